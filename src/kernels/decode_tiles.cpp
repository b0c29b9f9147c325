// The per-instruction-set part of split-K decoding (FlashDecoding): a few new queries
// against one contiguous run of a KV cache, leaving a partial softmax state that
// decode_split.cpp merges across runs. Compiled once per instruction set, like
// flash_tiles.cpp.
//
// Decoding reads every cached key and value once per step and does only 2·count
// multiply-adds with each number it reads (count = the queries sharing the KV head), so
// for one new token it is bound by memory bandwidth. The loop therefore computes straight
// on the cache's storage type as the rows stream in: W rows at a time (a vector's width:
// 16 with AVX-512, 8 with AVX2), each 16-bit vector converted to f32 in a register where it
// is used and never written back, so the only memory traffic is the cache itself. For each
// block of W rows:
//   1. scores: four keys (two without AVX-512) by up to four queries at a time, 16 or 8
//      independent sums; each key vector is converted once for all four queries, and the
//      per-key partial sums are folded into one vector of W scores per query (sum_each);
//   2. the block's online softmax, in vectors; the earlier output is rescaled only when
//      the block raises the running max;
//   3. values: up to four queries by four vectors of columns; each value vector is
//      converted once for the four queries.
// More than four queries (several new tokens, or eight or more heads per KV head) go four
// at a time over the same W rows, which are then in L1. From 16 queries on, AVX-512 takes
// a second loop, decode_run_lanes below, with the queries in the vector lanes.
//
// While a block is scored and mixed, the rows kAheadBytes further on are requested a line
// at a time, each as the same place in this block is read, so the memory system always
// has a steady number of reads in flight. (Requesting the next block's 128 lines at once
// at the block's start, as this loop first did, filled the line-fill buffers and stalled
// the loads the arithmetic was waiting for: a 128k-token f16 cache decoded at 50% of a plain
// read of its bytes that way and at 72-79% spread out, measured in one run; docs/performance.md
// has the table.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "attnlab/core/dtype.hpp"
#include "kernel_impl.hpp"
#include "simd.hpp"

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

constexpr std::size_t kRows = W;           // cached rows per block: one score vector per query
constexpr std::size_t kQueries = 4;        // queries scored and mixed together
constexpr std::size_t kAheadBytes = 4096;  // how far ahead of each read its array is prefetched (a d=128 f16 block)
#if defined(__AVX512F__)
constexpr int kKeys = 4;                   // keys scored together: 4 × 4 sums + 4 keys in 32 registers
constexpr std::size_t kColumnVectors = 4;  // value columns per pass: 4 × 4 sums + 4 values
#else
constexpr int kKeys = 2;  // 16 ymm registers: half as many
constexpr std::size_t kColumnVectors = 2;
#endif

// Σ_c acc[k][c] for k = 0..W-1, as one vector whose lane k is key k's score: the W
// horizontal sums folded together, each level halving the vectors and doubling the keys a
// vector holds (from W/2 lanes a key down to one): W - 1 pairs of shuffles and adds instead
// of W separate reductions (at W = 16, 45 operations instead of 16 × 8).
template <int H = W / 2>
inline VF sum_each(const VF (&acc)[2 * H]) {
  VF half[H];
  for (int k = 0; k < H; ++k)  // lanes of key 2k in each group of 2H, then those of key 2k+1
    half[k] = shuffle<Low<H>>(acc[2 * k], acc[2 * k + 1]) + shuffle<High<H>>(acc[2 * k], acc[2 * k + 1]);
  if constexpr (H > 1) return sum_each<H / 2>(half);
  return half[0];
}

// Where one block's rows are: `rows` (<= W) rows of `d` values, `row_bytes` apart.
struct Rows {
  const char* first;
  std::size_t row_bytes, rows, d;
  bool prefetch;  // whether reading the block also requests the rows kAheadBytes further on
  const void* row(std::size_t r) const { return first + r * row_bytes; }
  // Requests the cache line kAheadBytes past byte `byte` of row r (into L2), when this
  // block prefetches. A hint: it never faults, and the caller only sets `prefetch` when
  // the addresses stay inside the run's rows. (Always inlined: GCC counts a prefetch as
  // no side effect, so it deletes the call to a function that only prefetches.)
  [[gnu::always_inline]] void prefetch_ahead(std::size_t r, std::size_t byte) const {
    if (prefetch) __builtin_prefetch(first + r * row_bytes + byte + kAheadBytes, 0, 1);
  }
};

template <DType dtype>
constexpr std::size_t kValueBytes = dtype == DType::f32 ? 4 : 2;

// Per query (NQ of them, `q` [NQ × d_pad], already scaled): the W keys' scores into
// `scores` [NQ × W]. Lanes of keys past `keys.rows` hold 0 (masked later).
template <DType dtype, bool has_tail, int NQ>
void score_block(const Rows& keys, const float* q, std::size_t d_pad, float* scores) {
  const std::size_t full = keys.d / W, tail = keys.d % W;
  VF partial[NQ][W];  // partial[i][k]: query i · key k, W lanes still to be added
  // NK keys by NQ queries at once: NK·NQ independent sums, and each query vector loaded
  // once for NK keys (four keys by four queries: one load for every two multiply-adds).
  const auto dot = [&]<int NK>(std::size_t k) {
    VF acc[NK][NQ] = {};
    for (std::size_t v = 0; v < full; ++v) {
      const std::size_t byte = v * W * kValueBytes<dtype>;
      if (byte % 64 == 0)  // one request per line of each row
        for (int j = 0; j < NK; ++j)
          keys.prefetch_ahead(k + j, byte);
      VF kv[NK];
      for (int j = 0; j < NK; ++j)
        kv[j] = load_as_f32<dtype>(keys.row(k + j), v * W);
      for (int i = 0; i < NQ; ++i) {
        const VF qv = load(q + i * d_pad + v * W);
        for (int j = 0; j < NK; ++j)
          acc[j][i] += qv * kv[j];
      }
    }
    if constexpr (has_tail)
      for (int j = 0; j < NK; ++j) {
        const VF kv = load_tail<dtype>(keys.row(k + j), full * W, tail);
        for (int i = 0; i < NQ; ++i)
          acc[j][i] += load(q + i * d_pad + full * W) * kv;
      }
    for (int j = 0; j < NK; ++j)
      for (int i = 0; i < NQ; ++i)
        partial[i][k + j] = acc[j][i];
  };
  std::size_t k = 0;
  for (; k + kKeys <= keys.rows; k += kKeys)
    dot.template operator()<kKeys>(k);
  for (; k < keys.rows; ++k)
    dot.template operator()<1>(k);
  for (int i = 0; i < NQ; ++i) {
    for (std::size_t j = k; j < kRows; ++j)
      partial[i][j] = VF{};
    store(scores + i * kRows, sum_each(partial[i]));
  }
}

// out_i = out_i · correction_i + Σ_r p_i[r] · v_r for NQ queries at once (p [NQ × W]),
// so each value vector is converted once for all of them; kColumnVectors vectors of
// columns a pass, then one at a time, then the zero-padded tail.
template <DType dtype, bool has_tail, int NQ>
void mix_block(const Rows& values, const float* p, const float* correction, std::size_t d_pad, float* out) {
  const std::size_t full = values.d / W, tail = values.d % W;
  std::size_t v0 = 0;
  const auto pass = [&]<std::size_t NV, bool is_tail>(std::size_t first_vector) {
    VF acc[NQ][NV];
    for (int i = 0; i < NQ; ++i)
      for (std::size_t k = 0; k < NV; ++k)
        acc[i][k] = load(out + i * d_pad + (first_vector + k) * W) * correction[i];
    for (std::size_t r = 0; r < values.rows; ++r) {
      const std::size_t byte = first_vector * W * kValueBytes<dtype>;
      for (std::size_t line = 0; line < NV * W * kValueBytes<dtype>; line += 64)
        values.prefetch_ahead(r, byte + line);
      VF v[NV];
      for (std::size_t k = 0; k < NV; ++k)
        if constexpr (is_tail)
          v[k] = load_tail<dtype>(values.row(r), full * W, tail);
        else
          v[k] = load_as_f32<dtype>(values.row(r), (first_vector + k) * W);
      for (int i = 0; i < NQ; ++i) {
        const VF pr = splat(p[i * kRows + r]);
        for (std::size_t k = 0; k < NV; ++k)
          acc[i][k] += pr * v[k];
      }
    }
    for (int i = 0; i < NQ; ++i)
      for (std::size_t k = 0; k < NV; ++k)
        store(out + i * d_pad + (first_vector + k) * W, acc[i][k]);
  };
  for (; v0 + kColumnVectors <= full; v0 += kColumnVectors)
    pass.template operator()<kColumnVectors, false>(v0);
  for (; v0 < full; ++v0)
    pass.template operator()<1, false>(v0);
  if constexpr (has_tail) pass.template operator()<1, true>(full);
}

template <DType dtype, bool has_tail>
void decode_run_as(const DecodeRun& run) {
  const std::size_t d = run.d, d_pad = round_up(d, kDecodeRowPad), row_bytes = d * dtype_bytes(dtype);
  // Scratch kept per thread between calls: on this kind of machine a page fault costs
  // microseconds, and a decode step is only milliseconds long.
  thread_local std::vector<float> q, p, correction;
  thread_local std::vector<VF> top, total;  // per query: the running max (in every lane), Σ 2^(s - max) by lane
  q.assign(run.count * d_pad, 0.0f);        // scaled queries, zero padded to whole vectors
  p.resize(run.count * kRows);              // per query: the block's scores, then 2^(score - max)
  correction.resize(run.count);
  top.assign(run.count, splat(kMinusInf));
  total.assign(run.count, VF{});
  for (std::size_t i = 0; i < run.count; ++i)
    for (std::size_t c = 0; c < d; ++c)
      q[i * d_pad + c] = run.queries[i * d + c] * run.log2_scale;
  std::fill(run.out, run.out + run.count * d_pad, 0.0f);
  const VI lane = lane_numbers();
  const char* key_bytes = static_cast<const char*>(run.keys);
  const char* value_bytes = static_cast<const char*>(run.values);
  const std::size_t run_bytes = run.end * row_bytes;  // the run's end as an offset into each array
  const std::size_t block_bytes = kRows * row_bytes;

  for (std::size_t j0 = run.first; j0 < run.end; j0 += kRows) {
    const std::size_t rows = std::min(kRows, run.end - j0);
    // Prefetch while reading this block when the rows kAheadBytes on are still this run's;
    // only the first four queries do (the others read the block from L1).
    const bool ahead = j0 * row_bytes + kAheadBytes + block_bytes <= run_bytes;
    const auto block = [&](const char* bytes, std::size_t i0) {
      return Rows{bytes + (j0 - run.first) * row_bytes, row_bytes, rows, d, ahead && i0 == 0};
    };
    for (std::size_t i0 = 0; i0 < run.count; i0 += kQueries) {
      const Rows keys = block(key_bytes, i0);
      const float* qi = q.data() + i0 * d_pad;
      float* pi = p.data() + i0 * kRows;
      switch (std::min(kQueries, run.count - i0)) {
        case 4: score_block<dtype, has_tail, 4>(keys, qi, d_pad, pi); break;
        case 3: score_block<dtype, has_tail, 3>(keys, qi, d_pad, pi); break;
        case 2: score_block<dtype, has_tail, 2>(keys, qi, d_pad, pi); break;
        default: score_block<dtype, has_tail, 1>(keys, qi, d_pad, pi); break;
      }
    }
    // Online softmax per query, in vectors: mask keys past the block or past the query's
    // last visible key; only when the block raises the running max is what came before
    // rescaled by 2^(old max - new max) (after the first blocks that is rare).
    for (std::size_t i = 0; i < run.count; ++i) {
      float* pi = p.data() + i * kRows;
      const std::size_t seen = run.last_visible[i] < j0 ? 0 : std::min(rows, run.last_visible[i] - j0 + 1);
      correction[i] = 1.0f;
      if (seen == 0) {  // nothing visible here: leave the state as it is
        store(pi, VF{});
        continue;
      }
      const VF s = seen == kRows ? load(pi) : lane < static_cast<int>(seen) ? load(pi) : splat(kMinusInf);
      const VF block_top = all_lanes(s, max_vec);
      if (block_top[0] > top[i][0]) {
        const VF rescale = exp2_vec(top[i] - block_top);  // 0 for the first block (-inf)
        correction[i] = rescale[0];
        total[i] *= rescale;
        top[i] = block_top;
      }
      const VF e = exp2_vec(s - top[i]);
      store(pi, e);
      total[i] += e;
    }
    // out = out · correction + p · V, four queries at a time.
    for (std::size_t i0 = 0; i0 < run.count; i0 += kQueries) {
      const Rows values = block(value_bytes, i0);
      const float* pi = p.data() + i0 * kRows;
      const float* ci = correction.data() + i0;
      float* o = run.out + i0 * d_pad;
      switch (std::min(kQueries, run.count - i0)) {
        case 4: mix_block<dtype, has_tail, 4>(values, pi, ci, d_pad, o); break;
        case 3: mix_block<dtype, has_tail, 3>(values, pi, ci, d_pad, o); break;
        case 2: mix_block<dtype, has_tail, 2>(values, pi, ci, d_pad, o); break;
        default: mix_block<dtype, has_tail, 1>(values, pi, ci, d_pad, o); break;
      }
    }
  }
  for (std::size_t i = 0; i < run.count; ++i) {
    run.max[i] = top[i][0];
    run.sum[i] = all_lanes(total[i], add_vec)[0];
  }
}

// Many queries per KV head (16 or more: several new tokens, or eight query heads per KV
// head and two tokens): the queries go in the vector lanes, 16 to a group, as in the
// prefill's score tile. Each block of 16 rows is converted once into f32 scratch in L1 and
// each cached number is broadcast against a vector of 16 queries, so
//   scores: Sᵀ[j] (lane i: query i · key j) = Σ_c K[j][c] · Qᵀ[c], no fold across lanes;
//   softmax: element-wise across the 16 keys' vectors (the max of 16 vectors, 17 exp2s);
//   values: Oᵀ[c] = Oᵀ[c] · correction + Σ_j V[j][c] · Pᵀ[j], Oᵀ [d × 16] per group.
// The key-major loop above folds each key's 16 partial sums into one score per query, and
// goes over every block once per four queries; here that work is gone, which pays once a
// group of 16 lanes is full: measured with 2 threads, 16 queries per KV head (32 / 8 heads,
// 4 new tokens) decode 15-18% faster this way and 32 (8 / 1, 4 new tokens) 39% faster.
// AVX-512 only: its 32 registers hold the 16-key tile and a query vector; with AVX2's 16
// registers of half the width the tile would shrink to 4 keys (not measured).
#if defined(__AVX512F__)
constexpr std::size_t kLaneKeys = 16;     // keys scored together: 16 sums + a query vector in 32 registers
constexpr std::size_t kLaneColumns = 16;  // output columns mixed together
constexpr std::size_t kLaneQueries = W;   // queries per group, one to a lane: the path's threshold

template <DType dtype>
void decode_run_lanes(const DecodeRun& run) {
  const std::size_t d = run.d, d_pad = round_up(d, kDecodeRowPad), row_bytes = d * dtype_bytes(dtype);
  const std::size_t groups = (run.count + W - 1) / W;
  // Per-thread scratch, kept between calls (see decode_run_as).
  thread_local std::vector<float> qt, ot, kf, vf, pt;
  thread_local std::vector<VF> top, total;  // per group: running max, Σ 2^(s - max), by lane
  // The block's rows as f32, kept as [d_pad / 16][16 rows][16 columns]: column c of row j
  // at ((c / 16)·16 + j)·16 + c % 16, which is how converting a row's vectors stores them,
  // and puts all 256 numbers a step of the loops below broadcasts within one 1 KiB span
  // (one address register, the offsets constants).
  qt.assign(groups * d_pad * W, 0.0f);  // Qᵀ [groups][d_pad][16], scaled; lanes past count and columns past d 0
  ot.assign(groups * d_pad * W, 0.0f);  // Oᵀ [groups][d_pad][16]
  kf.resize(d_pad * kRows);             // the block's keys (convert writes every number)
  vf.resize(d_pad * kRows);             // its values
  pt.resize(kRows * W);                 // Pᵀ [16 keys][16 lanes] of one group
  top.assign(groups, splat(kMinusInf));
  total.assign(groups, VF{});
  for (std::size_t i = 0; i < run.count; ++i)
    for (std::size_t c = 0; c < d; ++c)
      qt[((i / W) * d_pad + c) * W + i % W] = run.queries[i * d + c] * run.log2_scale;
  const char* key_bytes = static_cast<const char*>(run.keys);
  const char* value_bytes = static_cast<const char*>(run.values);
  const std::size_t run_bytes = run.end * row_bytes;  // the run's end as an offset into each array
  const std::size_t block_bytes = kRows * row_bytes;
  const std::size_t full = d / W, tail = d % W;

  // `rows` rows from `block` (the cache's storage) into `dst` as f32 (layout above); rows
  // past them are zero, so every product with them is 0 · finite.
  const auto convert = [&](const Rows& block, float* dst) {
    for (std::size_t r = 0; r < kRows; ++r) {
      for (std::size_t v = 0; v < full; ++v) {
        const std::size_t byte = v * W * kValueBytes<dtype>;
        if (byte % 64 == 0 && r < block.rows) block.prefetch_ahead(r, byte);
        store(dst + (v * kRows + r) * W, r < block.rows ? load_as_f32<dtype>(block.row(r), v * W) : VF{});
      }
      if (tail)
        store(dst + (full * kRows + r) * W, r < block.rows ? load_tail<dtype>(block.row(r), full * W, tail) : VF{});
    }
  };

  for (std::size_t j0 = run.first; j0 < run.end; j0 += kRows) {
    const std::size_t rows = std::min(kRows, run.end - j0);
    const bool ahead = j0 * row_bytes + kAheadBytes + block_bytes <= run_bytes;
    convert(Rows{key_bytes + (j0 - run.first) * row_bytes, row_bytes, rows, d, ahead}, kf.data());
    convert(Rows{value_bytes + (j0 - run.first) * row_bytes, row_bytes, rows, d, ahead}, vf.data());
    for (std::size_t g = 0; g < groups; ++g) {
      const float* q = qt.data() + g * d_pad * W;
      // Sᵀ: kLaneKeys keys at a time, each key's numbers broadcast against 16 queries.
      VF s[kRows];
      for (std::size_t k = 0; k < kRows; k += kLaneKeys) {
        VF acc[kLaneKeys] = {};
        for (std::size_t v = 0; v < d_pad / W; ++v) {
          const float* keys = kf.data() + (v * kRows + k) * W;  // [kLaneKeys rows][16 columns]
          for (std::size_t c = 0; c < W; ++c) {
            const VF qc = load(q + (v * W + c) * W);
            for (std::size_t j = 0; j < kLaneKeys; ++j)
              acc[j] += splat(keys[j * W + c]) * qc;
          }
        }
        for (std::size_t j = 0; j < kLaneKeys; ++j)
          s[k + j] = acc[j];
      }
      // Key j is visible to lane i when j < rows and j0 + j <= last_visible[i]; `last` is
      // the last visible j per lane (-1: none in this block).
      VI last;
      for (std::size_t lane = 0; lane < W; ++lane) {
        const std::size_t i = g * W + lane;
        const std::size_t lv = i < run.count ? run.last_visible[i] : j0 + rows - 1;
        last[lane] = lv < j0 ? -1 : static_cast<int>(std::min(lv - j0, rows - 1));
      }
      VF block_top = splat(kMinusInf);
      for (std::size_t j = 0; j < kRows; ++j) {
        s[j] = static_cast<int>(j) <= last ? s[j] : splat(kMinusInf);
        block_top = max_vec(block_top, s[j]);
      }
      // The online softmax, lane by lane: a lane that has seen nothing yet keeps max -inf,
      // and subtracts 0 instead (so -inf - -inf never makes a NaN).
      const VF new_top = max_vec(top[g], block_top);
      const VF shift = new_top == kMinusInf ? splat(0.0f) : new_top;
      const VF correction = exp2_vec(top[g] - shift);  // 0 while the old max is -inf
      total[g] *= correction;
      top[g] = new_top;
      for (std::size_t j = 0; j < kRows; ++j) {
        const VF e = exp2_vec(s[j] - shift);
        total[g] += e;
        store(pt.data() + j * W, e);
      }
      // Oᵀ = Oᵀ · correction + Σ_j V[j][c] · Pᵀ[j], kLaneColumns columns at a time.
      float* o = ot.data() + g * d_pad * W;
      for (std::size_t c0 = 0; c0 < d_pad; c0 += kLaneColumns) {
        const float* values = vf.data() + (c0 / W * kRows) * W + c0 % W;  // row j's columns at j·16
        VF acc[kLaneColumns];
        for (std::size_t c = 0; c < kLaneColumns; ++c)
          acc[c] = load(o + (c0 + c) * W) * correction;
        for (std::size_t j = 0; j < rows; ++j) {
          const VF pj = load(pt.data() + j * W);
          for (std::size_t c = 0; c < kLaneColumns; ++c)
            acc[c] += splat(values[j * W + c]) * pj;
        }
        for (std::size_t c = 0; c < kLaneColumns; ++c)
          store(o + (c0 + c) * W, acc[c]);
      }
    }
  }
  // Back to one row per query: out [count × d_pad], max and sum per query.
  for (std::size_t i = 0; i < run.count; ++i) {
    const std::size_t g = i / W, lane = i % W;
    for (std::size_t c = 0; c < d; ++c)
      run.out[i * d_pad + c] = ot[(g * d_pad + c) * W + lane];
    std::fill(run.out + i * d_pad + d, run.out + (i + 1) * d_pad, 0.0f);
    run.max[i] = top[g][lane];
    run.sum[i] = total[g][lane];
  }
}
#endif

}  // namespace

// One loop per storage type, and for head widths that are not whole vectors a second one
// with the zero-padded last vector (kept apart so the common widths carry no tail code).
template <DType dtype>
void decode_run_as(const DecodeRun& run) {
#if defined(__AVX512F__)
  if (run.count >= kLaneQueries) return decode_run_lanes<dtype>(run);
#endif
  if (run.d % W == 0)
    decode_run_as<dtype, false>(run);
  else
    decode_run_as<dtype, true>(run);
}

void decode_run(const DecodeRun& run) {
  switch (run.dtype) {
    case DType::f32: return decode_run_as<DType::f32>(run);
    case DType::f16: return decode_run_as<DType::f16>(run);
    case DType::bf16: return decode_run_as<DType::bf16>(run);
  }
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
