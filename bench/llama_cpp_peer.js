#!/usr/bin/env node
// attnlab beside llama.cpp on the same GGUF files, in the same run, with the same threads:
// prompt processing (one forward over --prompt tokens) and generation (--generate tokens,
// one at a time through the KV cache, after a --context-token prompt). llama.cpp is npm's
// node-llama-cpp with its prebuilt CPU libraries (scripts/test.sh installs it into
// build/peers), its KV cache in f32 as attnlab's is.
//
// Run: node bench/llama_cpp_peer.js [--attnlab build/attnlab] [--model FILE.gguf]
//        [--types F32,F16,Q8_0,Q4_K] [--prompt 512] [--generate 32] [--context 64] [--threads 2]
//        [--repeats 3] [--shape gpt2-small|qwen2.5-0.5b|tinyllama-1.1b] [--write FILE] [--json]
//        [--cache f32,f16,q8_0] [--flash off,on]
// --cache: the KV caches compared (default f32: both runtimes' generating cache in f32); each
// runtime generates through a cache of that type. --flash: llama.cpp's flash attention off, on
// or both (attnlab's attention is always its tiled kernel); llama.cpp keeps a q8_0 value cache
// only with flash attention, so q8_0 is measured with it on. Speed at length (docs/long-context.md):
//   node bench/llama_cpp_peer.js --shape qwen2.5-0.5b --types F16 --prompt 16384 --context 16384
//        --generate 16 --cache f16,q8_0 --flash off,on --repeats 1   (and --context 32760)
// Both runtimes compute the prompt's last logits only, as prompt processing does.
// Without --model it writes, for each type, a Llama-architecture file of --shape with seeded
// random weights (tests/model/gguf_writer.js): by default GPT-2 small's size (12 layers,
// d_model 768, 12 heads, an MLP of 2048 gated: about the same weights). With --write it only
// writes that file, of the first type, to FILE (to measure other commands on a model of a
// real size). It prints each runtime's figures, attnlab's
// as a share of this machine's peaks (from `attnlab bench --model`), and the ratios. Each figure
// is the median of --repeats runs, the two runtimes taking turns, so that what else the
// machine does in the meantime falls on both.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { gguf_parts, random_tensor, seeded } = require('../tests/model/gguf_writer.js');

const ROOT = path.join(__dirname, '..');

function flags() {
  const out = { attnlab: path.join(ROOT, 'build', 'attnlab'), model: null, types: ['F32', 'F16', 'Q8_0', 'Q4_K'],
    prompt: 512, generate: 32, context: 64, threads: 2, repeats: 3, json: false, shape: 'gpt2-small', write: null,
    cache: ['f32'], flash: ['off'] };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--attnlab') out.attnlab = value();
    else if (a === '--model') out.model = value();
    else if (a === '--types') out.types = value().split(',');
    else if (a === '--prompt') out.prompt = Number(value());
    else if (a === '--generate') out.generate = Number(value());
    else if (a === '--context') out.context = Number(value());
    else if (a === '--threads') out.threads = Number(value());
    else if (a === '--repeats') out.repeats = Number(value());
    else if (a === '--json') out.json = true;
    else if (a === '--shape') out.shape = value();
    else if (a === '--write') out.write = value();
    else if (a === '--cache') out.cache = value().split(',');
    else if (a === '--flash') out.flash = value().split(',');
    else throw new Error(`unknown flag ${a}; see the top of bench/llama_cpp_peer.js`);
  }
  for (const name of ['prompt', 'generate', 'context', 'threads', 'repeats'])
    if (!(Number.isInteger(out[name]) && out[name] >= 1))
      throw new Error(`--${name} ${out[name]}: give a whole number, 1 or more`);
  for (const c of out.cache)
    if (!['f32', 'f16', 'q8_0'].includes(c)) throw new Error(`--cache ${c}: use f32, f16 or q8_0`);
  for (const x of out.flash)
    if (!['off', 'on'].includes(x)) throw new Error(`--flash ${x}: use off or on`);
  return out;
}

// The shapes the bench writes files of (Llama architecture, seeded random weights): GPT-2
// small's size, and two models people run locally, at their own layer count, widths, heads
// (grouped-query), MLP, vocabulary and positions.
const SHAPES = {
  'gpt2-small': { layers: 12, d: 768, heads: 12, kv_heads: 12, inner: 2048, vocab: 8192, context: 2048 },
  'qwen2.5-0.5b': { layers: 24, d: 896, heads: 14, kv_heads: 2, inner: 4864, vocab: 151936, context: 32768 },
  'tinyllama-1.1b': { layers: 22, d: 2048, heads: 32, kv_heads: 4, inner: 5632, vocab: 32000, context: 2048 },
  // a tiny model of many positions: the browser tests run it past the weights a run returns
  'tiny-4k': { layers: 2, d: 32, heads: 2, kv_heads: 1, inner: 64, vocab: 300, context: 4096 },
};

// A Llama-architecture file of `shape` in `type`, its tokenizer bytes only (and fillers up
// to the vocabulary); the LM head tied to the embedding where the shape is large (no
// output.weight: llama.cpp and attnlab then read token_embd). As the Buffers that make it, in
// order (llama_shaped: one Buffer; write_llama_shaped: a file of any size).
function llama_shaped_parts(shape_name, type) {
  const shape = SHAPES[shape_name];
  if (!shape) throw new Error(`--shape ${shape_name}: use one of ${Object.keys(SHAPES).join(', ')}`);
  const { layers, d, heads, kv_heads, inner, context } = shape, head_dim = d / heads;
  // Byte-level symbols (GPT-2's table) for the 256 bytes, then fillers up to the vocabulary.
  const symbols = [];
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    symbols.push(printable ? String.fromCharCode(b) : null);
  }
  let extra = 0;
  for (let b = 0; b < 256; ++b) if (symbols[b] === null) symbols[b] = String.fromCharCode(256 + extra++);
  const vocab = ['<|endoftext|>', ...symbols];
  while (vocab.length < shape.vocab) vocab.push(`<|filler${vocab.length}|>`);
  const random = seeded(7);
  const tensors = [];
  const matrix = (name, inputs, outputs) =>
    tensors.push({ name, dims: [inputs, outputs], type, data: random_tensor(random, type, inputs * outputs) });
  const norm = (name) => tensors.push({ name, dims: [d], type: 'F32', data: Buffer.from(new Float32Array(d).fill(1).buffer) });
  matrix('token_embd.weight', d, vocab.length);
  for (let l = 0; l < layers; ++l) {
    const p = `blk.${l}.`;
    norm(p + 'attn_norm.weight');
    matrix(p + 'attn_q.weight', d, d);
    matrix(p + 'attn_k.weight', d, kv_heads * head_dim);
    matrix(p + 'attn_v.weight', d, kv_heads * head_dim);
    matrix(p + 'attn_output.weight', d, d);
    norm(p + 'ffn_norm.weight');
    matrix(p + 'ffn_gate.weight', d, inner);
    matrix(p + 'ffn_up.weight', d, inner);
    matrix(p + 'ffn_down.weight', inner, d);
  }
  norm('output_norm.weight');
  if (shape_name === 'gpt2-small') matrix('output.weight', d, vocab.length);
  return gguf_parts([
    ['general.architecture', 'string', 'llama'], ['llama.block_count', 'u32', layers],
    ['llama.context_length', 'u32', context], ['llama.embedding_length', 'u32', d],
    ['llama.feed_forward_length', 'u32', inner], ['llama.attention.head_count', 'u32', heads],
    ['llama.attention.head_count_kv', 'u32', kv_heads], ['llama.attention.layer_norm_rms_epsilon', 'f32', 1e-5],
    ['llama.rope.freq_base', 'f32', shape_name === 'qwen2.5-0.5b' ? 1000000 : 10000],
    ['tokenizer.ggml.model', 'string', 'gpt2'], ['tokenizer.ggml.pre', 'string', 'gpt-2'],
    ['tokenizer.ggml.tokens', ['string'], vocab],
    ['tokenizer.ggml.token_type', ['i32'], vocab.map((t, i) => (i === 0 ? 3 : 1))],  // only <|endoftext|> is a control token
    ['tokenizer.ggml.merges', ['string'], []],
  ], tensors);
}

const llama_shaped = (shape_name, type) => Buffer.concat(llama_shaped_parts(shape_name, type));

// Writes the file a part at a time: a 1.1B model's F32 file (4.1 GB) is past one Buffer's
// largest size.
function write_llama_shaped(file, shape_name, type) {
  const out = fs.openSync(file, 'w');
  try {
    for (const part of llama_shaped_parts(shape_name, type)) fs.writeSync(out, part);
  } finally {
    fs.closeSync(out);
  }
}

// GPT-2 small's size, as the bench has always measured.
const gpt2_small_llama = (type) => llama_shaped('gpt2-small', type);

// llama.cpp's figures with its KV cache of type `cache` and flash attention `flash` ('on'/'off').
async function llama_cpp(file, f, cache, flash) {
  const entry = require.resolve('node-llama-cpp', { paths: [path.join(ROOT, 'build', 'peers')] });
  const { getLlama } = await import(entry);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  const type = cache.toUpperCase();
  const context = await model.createContext({
    // a batch (node-llama-cpp's micro-batch too) of the prompt, up to llama.cpp's own default of
    // 2,048 tokens: with flash attention off its scores are [batch × context × heads] floats
    // (15 GB at 16k tokens of a 14-head model in one batch)
    contextSize: Math.max(f.prompt, f.context + f.generate) + 8, batchSize: Math.min(Math.max(f.prompt, f.context), 2048),
    threads: f.threads,
    flashAttention: flash === 'on', experimentalKvCacheKeyType: type, experimentalKvCacheValueType: type,
  });
  const ids = Array.from({ length: Math.max(f.prompt, f.context + 1) }, (_, i) => 1 + ((i * 37) % 255));
  let sequence = context.getSequence();
  let start = process.hrtime.bigint();
  await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, f.prompt));
  const prompt_seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (f.prompt !== f.context) {  // the same prompt is the generation's context as it stands
    await sequence.clearHistory();
    await sequence.evaluateWithoutGeneratingNewTokens(ids.slice(0, f.context));
  }
  let generated = 0;
  start = process.hrtime.bigint();
  for await (const token of sequence.evaluate([ids[f.context]], { temperature: 0 })) {
    void token;
    if (++generated >= f.generate) break;
  }
  const generate_seconds = Number(process.hrtime.bigint() - start) / 1e9;
  await context.dispose();
  await model.dispose();
  return { prompt_tokens_per_second: f.prompt / prompt_seconds, generate_tokens_per_second: generated / generate_seconds };
}

// attnlab's figures, generating through a cache of type `cache`.
function attnlab(file, f, cache) {
  const run = (args) => {
    const r = spawnSync(f.attnlab, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`attnlab ${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  // attnlab's own median (`bench --repeats`, 5 by default) inside each of this script's runs;
  // from 4,096 tokens on a forward lasts seconds to minutes, and one timed forward a run is
  // what llama.cpp gets too.
  const long = Math.max(f.prompt, f.context) >= 4096;
  const common = ['--threads', String(f.threads), ...(long ? ['--repeats', '1'] : [])];
  const gen = run(['bench', '--model', file, '--tokens', String(f.context), '--logits', 'last', '--generate',
    String(f.generate), '--cache-dtype', cache, '--json', ...common]);
  // The generating run times the forward over its context first: where that is the prompt, it
  // is the prompt's figure (at 16k tokens a forward takes minutes).
  const prompt = f.prompt === f.context ? gen
    : run(['bench', '--model', file, '--tokens', String(f.prompt), '--logits', 'last', '--json', ...common]);
  // The prompt again with its products in bf16, where the CPU has bf16 units (AVX-512 BF16 or
  // AMX): as a share of that unit's peak.
  const m = prompt.machine;
  const bf16 = m.bf16_peak_gflops > 0 || m.amx_bf16_peak_gflops > 0
    ? run(['bench', '--model', file, '--tokens', String(f.prompt), '--logits', 'last', '--bf16', '--json', ...common])
    : null;
  return {
    prompt_tokens_per_second: prompt.tokens_per_second,
    prompt_percent_of_f32_peak: prompt.percent_of_peak,
    // a Q8_0 or Q4_K file's prompt as a share of the int8 peak (VNNI) where its products are int8; else null
    prompt_percent_of_int8_peak: prompt.percent_of_int8_peak ?? null,
    // where those products ran on AMX's bf16 tiles instead: that unit's share too; else null
    prompt_percent_of_amx_bf16_peak: prompt.percent_of_amx_bf16_peak ?? null,
    prompt_bf16_tokens_per_second: bf16 ? bf16.tokens_per_second : 0,
    prompt_bf16_percent_of_bf16_peak: bf16 ? bf16.percent_of_bf16_peak : null,  // null: no peak measured for its unit
    bf16_isa: bf16 ? bf16.bf16_isa : 'none',
    generate_tokens_per_second: gen.generation.tokens_per_second,
    generate_percent_of_read_bandwidth: gen.generation.percent_of_read_bandwidth,
    // resident memory while generating (the prompt through the cache, then the new tokens) against the goal:
    // (the file + the cache's formula) + 10%; null where the system could not measure it apart
    generate_resident_bytes: gen.generation.resident_peak_bytes,
    generate_goal_bytes: gen.generation.goal_bytes,
    machine: prompt.machine,
  };
}

// Each numeric field's median over the runs (the other fields from the first run).
function medians(runs) {
  const out = { ...runs[0] };
  for (const [key, value] of Object.entries(out)) {
    if (typeof value !== 'number') continue;
    const sorted = runs.map((r) => r[key]).sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    out[key] = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
  return out;
}

async function main() {
  const f = flags();
  if (f.write) {
    write_llama_shaped(f.write, f.shape, f.types[0]);
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnlab-peer-'));
  const rows = [];
  try {
    const files = f.model ? [[path.basename(f.model), f.model]] : f.types.map((type) => {
      const file = path.join(dir, `${f.shape}-llama-${type}.gguf`);
      write_llama_shaped(file, f.shape, type);
      return [type, file];
    });
    for (const [name, file] of files)
      for (const cache of f.cache) {
        // llama.cpp keeps a quantized value cache only with flash attention
        const flashes = cache === 'q8_0' ? ['on'] : f.flash;
        const [our_runs, their_runs] = [[], flashes.map(() => [])];
        for (let r = 0; r < f.repeats; ++r) {
          if (r % 2 === 0) our_runs.push(attnlab(file, f, cache));
          for (let k = 0; k < flashes.length; ++k) their_runs[k].push(await llama_cpp(file, f, cache, flashes[k]));
          if (r % 2 === 1) our_runs.push(attnlab(file, f, cache));
        }
        const ours = medians(our_runs);
        flashes.forEach((flash, k) => {
          const theirs = medians(their_runs[k]);
          rows.push({ file: name, cache, flash, attnlab: ours, llama_cpp: theirs,
            prompt_ratio: ours.prompt_tokens_per_second / theirs.prompt_tokens_per_second,
            prompt_bf16_ratio: ours.prompt_bf16_tokens_per_second / theirs.prompt_tokens_per_second,
            generate_ratio: ours.generate_tokens_per_second / theirs.generate_tokens_per_second });
        });
      }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  if (f.json) {
    console.log(JSON.stringify({ prompt: f.prompt, generate: f.generate, context: f.context, threads: f.threads,
      repeats: f.repeats, cache: f.cache, flash: f.flash, rows }, null, 2));
    return;
  }
  const m = rows[0].attnlab.machine;
  console.log(`machine: ${m.isa}, ${m.threads} threads, f32 peak ${m.f32_peak_gflops.toFixed(0)} GFLOP/s, ` +
    `read ${m.read_gbps.toFixed(1)} GB/s; each figure the median of ${f.repeats} runs`);
  console.log(`| file | cache | llama.cpp flash | prompt ${f.prompt} tokens: attnlab tok/s (% f32 peak) | llama.cpp | ` +
    `ratio | generate ${f.generate} after ${f.context}: attnlab tok/s (% read bandwidth) | llama.cpp | ratio | ` +
    'attnlab resident while generating / goal |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  const mib = (bytes) => (bytes === null ? 'not measured' : `${(bytes / 2 ** 20).toFixed(0)} MiB`);
  for (const r of rows)
    console.log(`| ${r.file} | ${r.cache} | ${r.flash} | ${r.attnlab.prompt_tokens_per_second.toFixed(0)} ` +
      `(${r.attnlab.prompt_percent_of_f32_peak.toFixed(0)}%) | ${r.llama_cpp.prompt_tokens_per_second.toFixed(0)} | ` +
      `${r.prompt_ratio.toFixed(2)}× | ${r.attnlab.generate_tokens_per_second.toFixed(1)} ` +
      `(${r.attnlab.generate_percent_of_read_bandwidth.toFixed(0)}%) | ${r.llama_cpp.generate_tokens_per_second.toFixed(1)} | ` +
      `${r.generate_ratio.toFixed(2)}× | ${mib(r.attnlab.generate_resident_bytes)} / ${mib(r.attnlab.generate_goal_bytes)} |`);
}

if (require.main === module) {
  main().catch((e) => {
    console.error(`llama_cpp_peer: ${e.message}`);
    process.exit(2);
  });
}
module.exports = { gpt2_small_llama, llama_shaped };
