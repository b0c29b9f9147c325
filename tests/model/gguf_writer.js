// A GGUF writer for the tests, written from the GGUF specification (ggml's docs/gguf.md) and
// ggml's block layouts, independently of attnlab's C++ reader: metadata of the types the
// tests need and tensors of every type attnlab reads, each aligned to 32 bytes.
//
//   gguf_file(entries, tensors): entries are [key, kind, value] (kind 'u32', 'i32', 'f32',
//   'bool', 'string', or ['string'] / ['i32'] / ['f32'] for an array); tensors are
//   {name, dims (ggml's order: a row's length first), type, data (a Buffer)}.
//   gguf_parts(entries, tensors): the same file as the Buffers that make it, in order.
//   random_tensor(random, type, count): `count` values of a weight's size (about 0.05) in
//   `type`: F32, F16 and BF16 from normals; the quantized types as seeded random blocks whose
//   scales make values of that size.
'use strict';

const TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 };

// ggml's type numbers, values per block and bytes per block.
const GGML = {
  F32: [0, 1, 4], F16: [1, 1, 2], Q4_0: [2, 32, 18], Q4_1: [3, 32, 20], Q5_0: [6, 32, 22], Q5_1: [7, 32, 24],
  Q8_0: [8, 32, 34], Q4_K: [12, 256, 144], Q5_K: [13, 256, 176], Q6_K: [14, 256, 210], IQ4_NL: [20, 32, 18],
  BF16: [30, 1, 2],
};

class Writer {
  constructor() { this.parts = []; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.parts.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.parts.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.parts.push(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.parts.push(b); }
  bool(v) { this.parts.push(Buffer.from([v ? 1 : 0])); }
  string(s) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.parts.push(b); }
  value(kind, v) {
    if (Array.isArray(kind)) {
      this.u32(TYPE[kind[0]]);
      this.u64(v.length);
      for (const x of v) this[kind[0]](x);
    } else {
      this[kind](v);
    }
  }
  pad(alignment) {
    const length = this.parts.reduce((n, b) => n + b.length, 0);
    this.parts.push(Buffer.alloc((alignment - (length % alignment)) % alignment));
  }
}

function gguf_file(entries, tensors = []) {
  return Buffer.concat(gguf_parts(entries, tensors));
}

// The same file as the buffers that make it, in order: written one after another, a file past
// one Buffer's largest size (2 GiB: a 1.1B model's f32 weights) never needs to be whole in one.
function gguf_parts(entries, tensors = []) {
  const w = new Writer();
  w.parts.push(Buffer.from('GGUF'));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(entries.length);
  for (const [key, kind, value] of entries) {
    w.string(key);
    w.u32(Array.isArray(kind) ? TYPE.array : TYPE[kind]);
    w.value(kind, value);
  }
  let offset = 0;
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML[t.type][0]);
    w.u64(offset);
    offset += Math.ceil(t.data.length / 32) * 32;
  }
  w.pad(32);
  for (const t of tensors) {
    w.parts.push(t.data);
    w.pad(32);
  }
  return w.parts;
}

// mulberry32, and normals from it (Box-Muller).
function seeded(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.normal = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
  return next;
}

// IEEE half precision of x (round to nearest even), as its 16 bits. (x's f32 bits read through
// one scratch word: an array made per call kept a 1.1B-value file's writing at tens of minutes.)
const f32_scratch = new Float32Array(1);
const f32_scratch_bits = new Uint32Array(f32_scratch.buffer);
function f16_bits(x) {
  f32_scratch[0] = x;
  const u = f32_scratch_bits[0];
  const sign = (u >>> 16) & 0x8000;
  const exponent = ((u >>> 23) & 0xff) - 127 + 15;
  let mantissa = u & 0x7fffff;
  if (exponent >= 31) return sign | 0x7c00;
  if (exponent <= 0) {  // subnormal
    if (exponent < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - exponent;
    const half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1), midpoint = 1 << (shift - 1);
    return sign | (half + (rest > midpoint || (rest === midpoint && (half & 1)) ? 1 : 0));
  }
  let bits = sign | (exponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (bits & 1))) bits += 1;
  return bits;
}

// The f16 scale(s) of each block: where they lie, and the range that makes weights of ~0.05.
const SCALES = {
  Q8_0: { at: [0], low: 3e-4, high: 1e-3 },   // d · q, q in [-128, 127]
  Q4_0: { at: [0], low: 5e-3, high: 1.5e-2 }, // d · (q - 8), q in [0, 15]
  Q4_1: { at: [0, 2], low: 5e-3, high: 1.5e-2 }, // d · q + m (m drawn like d: its values are around 0.05)
  Q5_0: { at: [0], low: 3e-3, high: 8e-3 },   // d · (q - 16), q in [0, 31]
  Q5_1: { at: [0, 2], low: 3e-3, high: 8e-3 }, // d · q + m
  IQ4_NL: { at: [0], low: 3e-4, high: 8e-4 }, // d · grid[q], the grid within ±127
  Q4_K: { at: [0, 2], low: 1e-4, high: 3e-4 }, // d · sc · q - dmin · m, sc and m 6-bit
  Q5_K: { at: [0, 2], low: 5e-5, high: 1.5e-4 },
  Q6_K: { at: [208], low: 2e-5, high: 6e-5 },  // d · scale · (q - 32), scale int8
};

function random_tensor(random, type, count) {
  if (type === 'F32' || type === 'F16' || type === 'BF16') {
    const values = new Float32Array(count);
    for (let i = 0; i < count; ++i) values[i] = 0.05 * random.normal();
    if (type === 'F32') return Buffer.from(values.buffer);
    const out = new Uint16Array(count);
    const bits = new Uint32Array(values.buffer);
    for (let i = 0; i < count; ++i) out[i] = type === 'F16' ? f16_bits(values[i]) : bits[i] >>> 16;
    return Buffer.from(out.buffer);
  }
  const [, per_block, block_bytes] = GGML[type];
  const out = Buffer.alloc((count / per_block) * block_bytes);
  for (let i = 0; i < out.length; ++i) out[i] = Math.floor(random() * 256);
  const { at, low, high } = SCALES[type];
  for (let block = 0; block < out.length; block += block_bytes)
    for (const a of at) out.writeUInt16LE(f16_bits(low + (high - low) * random()), block + a);
  return out;
}

module.exports = { gguf_file, gguf_parts, random_tensor, seeded, GGML };
