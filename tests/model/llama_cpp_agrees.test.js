// llama.cpp and attnlab, given the same GGUF file, agree: the same tokens for a prompt, the
// same next-token probabilities after it, and the same greedy continuation. llama.cpp is
// npm's node-llama-cpp with its prebuilt CPU libraries (no compiling), installed by
// scripts/test.sh into build/peers (ATTNLAB_PEERS_DIR); without it the test is skipped,
// saying so.
//
// The files are written here (gguf_writer.js): a 2-layer model, d_model 256, 4 query heads
// sharing 2 KV heads of 64, a SwiGLU MLP of 512, seeded random weights of a weight's size,
// every matrix in one type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K), for the
// architectures `llama` (llama.cpp rotates adjacent pairs: the file's q and k rows are in
// that order), `qwen2` (split halves, biases on q, k and v) and `gemma3` (six layers, a
// window on five of them, QK-norm, four norms per block stored as 1 + w, GeGLU, the embedding
// scaled by √d and tied), with a 48-token byte-level BPE tokenizer in the metadata.
//
// Bounds, from what each runtime computes: llama.cpp multiplies F32 weights in f32, F16 and
// BF16 weights with the activations rounded to 16 bits, and quantized weights with the
// activations quantized to 8 bits per block (Q8_0 / Q8_K); attnlab multiplies the weights
// (dequantized exactly) by f32 activations. So F32 agrees to float rounding, 16-bit types to
// a 16-bit rounding of the activations, quantized types to an 8-bit one.
//
// Run: ATTNLAB_BIN=build/attnlab ATTNLAB_PEERS_DIR=build/peers node --test tests/model/llama_cpp_agrees.test.js
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { gguf_file, random_tensor, seeded } = require('./gguf_writer.js');

const TYPES = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'IQ4_NL', 'Q4_K', 'Q5_K', 'Q6_K'];
// The largest difference of a next-token probability allowed, per type (see above).
// (Q6_K's random scales are int8s, so its weights have the heaviest tails and llama.cpp's
// 8-bit activations lose the most there: measured up to 8e-3.)
const BOUND = { F32: 1e-6, F16: 3e-4, BF16: 3e-3, Q8_0: 1e-2, Q4_0: 1e-2, Q4_1: 1e-2, Q5_0: 1e-2, Q5_1: 1e-2,
  IQ4_NL: 1e-2, Q4_K: 1e-2, Q5_K: 1e-2, Q6_K: 2e-2 };
const PROMPT = 'the cat sat on the mat';

// ---- the model file ------------------------------------------------------------------------

const LETTERS = [...'abcdefghijklmnopqrstuvwxyz'];
const MERGES = ['Ġ t', 'h e', 'Ġt he', 'Ġ c', 'a t', 'Ġc at', 'Ġ s', 'Ġs at', 'Ġ o', 'Ġo n', 'Ġ m', 'Ġm at', 'i n',
  'Ġ a', 'e r', 'Ġ i'];
const TOKENS = ['<|endoftext|>', 'Ġ', ...LETTERS, ...MERGES.map((m) => m.replace(' ', ''))];
while (TOKENS.length < 48) TOKENS.push(`<|unused${TOKENS.length}|>`);

function model_file(arch, type, seed) {
  const gemma = arch === 'gemma3';
  // Gemma 3: six layers, so that llama.cpp's pattern (a window on every layer but each sixth)
  // has a global layer, and a window of 5 that a 7-token prompt outgrows.
  const d = 256, heads = 4, kv_heads = 2, head_dim = 64, inner = 512, layers = gemma ? 6 : 2, vocab = TOKENS.length;
  const random = seeded(seed);
  const entries = [
    ['general.architecture', 'string', arch],
    [`${arch}.block_count`, 'u32', layers], [`${arch}.context_length`, 'u32', 64],
    [`${arch}.embedding_length`, 'u32', d], [`${arch}.feed_forward_length`, 'u32', inner],
    [`${arch}.attention.head_count`, 'u32', heads], [`${arch}.attention.head_count_kv`, 'u32', kv_heads],
    [`${arch}.attention.layer_norm_rms_epsilon`, 'f32', 1e-5], [`${arch}.rope.freq_base`, 'f32', 10000],
    ['tokenizer.ggml.model', 'string', 'gpt2'], ['tokenizer.ggml.pre', 'string', 'qwen2'],
    ['tokenizer.ggml.tokens', ['string'], TOKENS],
    ['tokenizer.ggml.token_type', ['i32'], TOKENS.map((t) => (t.startsWith('<|') ? 3 : 1))],
    ['tokenizer.ggml.merges', ['string'], MERGES],
    ['tokenizer.ggml.eos_token_id', 'u32', 0], ['tokenizer.ggml.add_bos_token', 'bool', false],
  ];
  if (gemma)
    entries.push([`${arch}.attention.key_length`, 'u32', head_dim], [`${arch}.attention.value_length`, 'u32', head_dim],
      [`${arch}.attention.sliding_window`, 'u32', 5]);
  const tensors = [];
  const matrix = (name, inputs, outputs) =>
    tensors.push({ name, dims: [inputs, outputs], type, data: random_tensor(random, type, inputs * outputs) });
  const vector = (name, n, around) => tensors.push({
    name, dims: [n], type: 'F32',
    data: Buffer.from(new Float32Array(Array.from({ length: n }, () => around + 0.1 * random.normal())).buffer),
  });
  matrix('token_embd.weight', d, vocab);
  for (let l = 0; l < layers; ++l) {
    const p = `blk.${l}.`;
    vector(p + 'attn_norm.weight', d, 1);
    matrix(p + 'attn_q.weight', d, heads * head_dim);
    matrix(p + 'attn_k.weight', d, kv_heads * head_dim);
    matrix(p + 'attn_v.weight', d, kv_heads * head_dim);
    if (gemma) {  // QK-norm; norms stored as the 1 + w they apply
      vector(p + 'attn_q_norm.weight', head_dim, 1);
      vector(p + 'attn_k_norm.weight', head_dim, 1);
    }
    if (arch === 'qwen2') {
      vector(p + 'attn_q.bias', heads * head_dim, 0);
      vector(p + 'attn_k.bias', kv_heads * head_dim, 0);
      vector(p + 'attn_v.bias', kv_heads * head_dim, 0);
    }
    matrix(p + 'attn_output.weight', heads * head_dim, d);
    if (gemma) vector(p + 'post_attention_norm.weight', d, 1);
    vector(p + 'ffn_norm.weight', d, 1);
    matrix(p + 'ffn_gate.weight', d, inner);
    matrix(p + 'ffn_up.weight', d, inner);
    matrix(p + 'ffn_down.weight', inner, d);
    if (gemma) vector(p + 'post_ffw_norm.weight', d, 1);
  }
  vector('output_norm.weight', d, 1);
  if (!gemma) matrix('output.weight', d, vocab);  // Gemma's head is the embedding
  return gguf_file(entries, tensors);
}

// ---- the two runtimes ----------------------------------------------------------------------

// node-llama-cpp from ATTNLAB_PEERS_DIR (or wherever require finds it), or why not.
async function load_llama_cpp() {
  const dir = process.env.ATTNLAB_PEERS_DIR;
  try {
    const entry = require.resolve('node-llama-cpp', { paths: dir ? [dir] : undefined });
    const { getLlama } = await import(entry);
    return { llama: await getLlama({ gpu: false, build: 'never', logLevel: 'error' }) };
  } catch (e) {
    return { missing: `node-llama-cpp cannot be loaded (${String(e.message).split('\n')[0]}); scripts/test.sh ` +
      'installs it into build/peers (ATTNLAB_PEERS_DIR) on x86-64 Linux with node 20 or later' };
  }
}

// llama.cpp's tokens of the prompt, its next-token probabilities after it, and its greedy continuation.
async function llama_cpp_run(llama, file, new_tokens, prompt = PROMPT) {
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  try {
    const ids = [...model.tokenize(prompt)];
    // The KV cache in f32 (llama.cpp's default is f16), flash attention off: attention as attnlab computes it.
    const context = await model.createContext({
      contextSize: 64, threads: 2, flashAttention: false,
      experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
    });
    try {
      const sequence = context.getSequence();
      const generated = [];
      let first = null;
      for await (const out of sequence.evaluateWithMetadata(ids, { probabilities: true }, { temperature: 0 })) {
        if (!first) first = out.probabilities;
        generated.push(out.token);
        if (generated.length >= new_tokens) break;
      }
      const probabilities = Array.from({ length: model.tokens.length ?? TOKENS.length }, (_, id) => first.get(id) ?? 0);
      return { ids, probabilities, generated };
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

// The tokens generated before the first end-of-text token (id 0, "<|endoftext|>"): llama.cpp
// stops there and does not return it; attnlab generates on.
const until_end = (ids) => (ids.includes(0) ? ids.slice(0, ids.indexOf(0)) : ids);

function softmax(logits) {
  const top = Math.max(...logits);
  const e = logits.map((x) => Math.exp(x - top));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

function attnlab(args) {
  const run = spawnSync(process.env.ATTNLAB_BIN, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(run.status, 0, `attnlab ${args.join(' ')}: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

function attnlab_run(file, new_tokens, prompt = PROMPT) {
  const ids = attnlab(['model', 'tokenize', file, prompt, '--json']).ids;
  const logits = attnlab(['model', 'run', file, '--ids', ids.join(','), '--json']).last_logits;
  const generated = attnlab(['model', 'generate', file, '--ids', ids.join(','), '--tokens', String(new_tokens),
    '--json']).generated.map((g) => g.id);
  return { ids, probabilities: softmax(logits), generated };
}

// ---- the check -----------------------------------------------------------------------------

// Two greedy continuations of the prompt `ids` agree token for token, unless at the first step where
// they part attnlab's two most probable tokens (from `source`) are within `tie` of each
// other and llama.cpp took one of them: there the runtimes' rounding (which changes with the
// CPU that llama.cpp's prebuilt library was chosen for) may tip the choice, and nothing after
// it is comparable. A continuation that ends (token 0) parts from one that goes on there.
function same_greedy_up_to_a_near_tie(source, ids, ours, theirs, tie, what) {
  const [a, b] = [until_end(ours), until_end(theirs)];
  const step = [...Array(Math.max(a.length, b.length)).keys()].find((i) => a[i] !== b[i]);
  if (step === undefined) return;
  const [here, there] = [a[step] ?? 0, b[step] ?? 0];
  const p = softmax(attnlab(['model', 'run', source, '--ids', [...ids, ...a.slice(0, step)].join(','), '--json']).last_logits);
  const [first, second] = [...p.keys()].sort((i, j) => p[j] - p[i]);
  const gap = p[first] - p[second];
  assert.ok(gap <= tie && [first, second].includes(there), `${what}: the greedy continuations part at step ${step} ` +
    `(${here} here, ${there} in llama.cpp), where attnlab's two most probable tokens, ${first} and ${second}, are ` +
    `${gap.toExponential(2)} apart: not a near tie (${tie})`);
  console.log(`${what}: the greedy continuations part at step ${step}, a near tie (${p[first].toFixed(4)} and ` +
    `${p[second].toFixed(4)})`);
}

const SKIP_NO_BIN = process.env.ATTNLAB_BIN ? false : 'ATTNLAB_BIN is not set: set it to build/attnlab';

test('llama.cpp and attnlab agree on the same GGUF files, every architecture and tensor type', { skip: SKIP_NO_BIN },
  async (t) => {
    const peer = await load_llama_cpp();
    if (peer.missing) {
      t.skip(peer.missing);
      return;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-llama-cpp-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    let seed = 20261202;
    for (const arch of ['llama', 'qwen2', 'gemma3']) {
      for (const type of arch === 'gemma3' ? ['F32', 'F16', 'Q8_0', 'Q4_K'] : TYPES) {
        const file = path.join(dir, `${arch}-${type}.gguf`);
        fs.writeFileSync(file, model_file(arch, type, ++seed));
        const lossless = type === 'F32' || type === 'F16';
        const new_tokens = lossless ? 12 : 1;
        const theirs = await llama_cpp_run(peer.llama, file, new_tokens);
        const ours = attnlab_run(file, new_tokens);
        assert.deepEqual(ours.ids, theirs.ids, `${arch} ${type}: the prompt's tokens`);
        let largest = 0;
        ours.probabilities.forEach((p, id) => { largest = Math.max(largest, Math.abs(p - theirs.probabilities[id])); });
        const top = Math.max(...theirs.probabilities);
        console.log(`${arch} ${type}: the next-token probabilities differ by at most ${largest.toExponential(2)} ` +
          `(llama.cpp's most probable: ${top.toFixed(3)}); greedy ${JSON.stringify(theirs.generated)}`);
        // llama.cpp's GELU (Gemma's MLP) reads a table indexed by the input rounded to f16:
        // the lossless types agree to that rounding there.
        const bound = arch === 'gemma3' ? Math.max(BOUND[type], 3e-4) : BOUND[type];
        assert.ok(largest <= bound, `${arch} ${type}: probabilities differ by ${largest} > ${bound}`);
        // The greedy continuation (one token for the lossy types, whose rounding may tip a
        // close choice later on): the same tokens up to a step where the choice is a near tie.
        same_greedy_up_to_a_near_tie(file, ours.ids, ours.generated, theirs.generated, 2 * bound, `${arch} ${type}`);
      }
    }
  });

// A model trained here (`attnlab train` on a text, one token per byte) and written by
// `attnlab model export`: llama.cpp runs the file as attnlab runs the folder it came from.
test('a model trained here and exported as GGUF runs in llama.cpp as in attnlab (GPT-2 and Llama-style)',
  { skip: SKIP_NO_BIN }, async (t) => {
    const peer = await load_llama_cpp();
    if (peer.missing) {
      t.skip(peer.missing);
      return;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-export-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const text = path.join(dir, 'text.txt');
    fs.writeFileSync(text, 'the cat sat on the mat. the dog sat on the log. '.repeat(40));
    const prompt = 'the cat sat on';
    for (const [arch, extra] of [['gpt2', ['--heads', '2']], ['llama', ['--heads', '2', '--kv-heads', '1']]]) {
      const folder = path.join(dir, arch);
      const trained = spawnSync(process.env.ATTNLAB_BIN, ['train', '--out', folder, '--task', 'text', text,
        '--arch', arch, ...extra, '--steps', '60', '--batch', '16', '--log-every', '30', '--checkpoint-every', '60',
        '--prev-token-steps', '0'], { encoding: 'utf8' });
      assert.equal(trained.status, 0, trained.stderr);
      const ours = attnlab_run(folder, 12, prompt);
      for (const type of ['f32', 'f16']) {
        const file = path.join(dir, `${arch}-${type}.gguf`);
        const written = attnlab(['model', 'export', folder, '--gguf', file, '--type', type, '--json']);
        assert.match(written.tokenizer, /vocab\.json \+ merges\.txt/);
        const theirs = await llama_cpp_run(peer.llama, file, 12, prompt);
        assert.deepEqual(theirs.ids, ours.ids, `${arch} ${type}: the prompt's tokens`);
        let largest = 0;
        ours.probabilities.forEach((p, id) => { largest = Math.max(largest, Math.abs(p - theirs.probabilities[id])); });
        console.log(`trained ${arch}, exported ${type}: the next-token probabilities differ by at most ` +
          `${largest.toExponential(2)}; greedy ${JSON.stringify(theirs.generated)}`);
        assert.ok(largest <= (type === 'f32' ? 1e-4 : 2e-3), `${arch} ${type}: probabilities differ by ${largest}`);
        same_greedy_up_to_a_near_tie(folder, ours.ids, ours.generated, theirs.generated, 2e-3, `trained ${arch} ${type}`);
      }
    }
  });
