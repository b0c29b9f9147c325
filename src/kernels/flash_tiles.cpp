// The tiled attention kernel (FlashAttention-2 style) for one instruction set.
//
// This file is compiled once per instruction set (generic x86-64, AVX2, AVX-512) with
// ATTNLAB_ISA naming the namespace; dispatch.cpp picks one at run time. The code is
// written with GCC vector types of W floats, one register of the target (simd.hpp).
//
// For each head h and block of queries Q_b (block_q rows), over the key tiles that block
// can see (block_k keys each), with c = scale / T · log2 e folded into Q_b once:
//   Sᵀ = K_tile · (c·Q_b)ᵀ                    (GEMM 1: keys down, queries across)
//   m_new = max(m, colmax(Sᵀ))                per query, W queries per vector
//   Pᵀ = 2^(Sᵀ - m_new), l = l·2^(m - m_new) + colsum(Pᵀ)
//   O_b = O_b · 2^(m - m_new) + P · V_tile   (GEMM 2, P read from Pᵀ)
// and at the end O_b / l. Working on Sᵀ keeps K and V in place (no transposed copies)
// and makes the softmax's max and sum plain vector operations across queries. Tiles no
// query of the block can see are skipped, and each query's visible keys are one range.
#include <omp.h>

#include <cstdint>
#if defined(ATTNLAB_HAS_BF16)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnlab/kernels/flash_attention.hpp"
#include "kernel_impl.hpp"
#include "simd.hpp"

#ifndef ATTNLAB_ISA
#error "compile with -DATTNLAB_ISA=<namespace>"
#endif

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

// Micro-tile sizes (rows × vectors of W columns) of the two GEMMs, chosen by measurement
// (docs/performance.md). AVX-512 has 32 vector registers: 24 accumulators, a row of B and a
// broadcast fit. AVX2 and SSE2 have 16: 12 accumulators, two of B and a broadcast.
#if defined(__AVX512F__)
constexpr std::size_t kScoreMR = 8, kScoreNR = 3;  // GEMM 1: 8 keys × 48 queries
constexpr std::size_t kMixMR = 6, kMixNR = 4;      // GEMM 2: 6 queries × 64 columns of d_v
#else
constexpr std::size_t kScoreMR = 6, kScoreNR = 2;  // 6 × 16 (AVX2)
constexpr std::size_t kMixMR = 6, kMixNR = 2;
#endif

// The multiply-accumulate step of the GEMMs, acc += a·b, in three flavours. Every operand
// is 32 bits wide: one float, or (bf16) a pair of bf16 numbers along the summed dimension,
// so the same packing and loops serve both and only this step differs.
struct MaddF32 {
  static void apply(VF& acc, float a, VF b) { acc += splat(a) * b; }
};

inline VF bf16_high(VF pairs) {  // the second (odd) bf16 of each pair, as floats
  VI bits;
  std::memcpy(&bits, &pairs, sizeof bits);
  bits &= static_cast<int>(0xFFFF0000u);
  VF out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
inline VF bf16_low(VF pairs) {  // the first (even) bf16 of each pair, as floats
  VI bits;
  std::memcpy(&bits, &pairs, sizeof bits);
  bits <<= 16;
  VF out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// Portable bf16: what vdpbf16ps does, one exact product added at a time, odd then even.
struct MaddBf16Portable {
  static void apply(VF& acc, float a, VF b) {
    const VF a_pair = splat(a);
    acc += bf16_high(a_pair) * bf16_high(b);
    acc += bf16_low(a_pair) * bf16_low(b);
  }
};

#if defined(ATTNLAB_HAS_BF16)
// The CPU's bf16 dot product: acc += a.odd·b.odd + a.even·b.even per lane.
struct MaddBf16Native {
  static void apply(VF& acc, float a, VF b) {
    __m512 acc_ps;
    std::memcpy(&acc_ps, &acc, sizeof acc_ps);
    __m512bh b_bh;
    std::memcpy(&b_bh, &b, sizeof b_bh);
    acc_ps = _mm512_dpbf16_ps(acc_ps, (__m512bh)_mm512_set1_ps(a), b_bh);
    std::memcpy(&acc, &acc_ps, sizeof acc);
  }
};
#endif

// f32 -> bf16 bits, rounding to nearest even (NaN stays NaN).
inline std::uint32_t to_bf16_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (bits >> 16) | 0x40u;  // quiet NaN
  return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
}
// Two floats as one 32-bit slot holding the pair (first in the low half), typed float.
inline float bf16_pair(float first, float second) {
  const std::uint32_t bits = to_bf16_bits(first) | (to_bf16_bits(second) << 16);
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// The vector form of bf16_pair: lane l holds the pair (first[l], second[l]).
inline VF bf16_pairs(VF first, VF second) {
  const auto round_to_bf16 = [](VF x) {  // the rounded bf16 in the high half of each lane
    VI bits;
    std::memcpy(&bits, &x, sizeof bits);
    const VI rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & static_cast<int>(0xFFFF0000u);
    const VI quiet_nan = (bits | 0x400000) & static_cast<int>(0xFFFF0000u);
    return (bits & 0x7FFFFFFF) > 0x7F800000 ? quiet_nan : rounded;
  };
  typedef unsigned VU __attribute__((vector_size(W * sizeof(unsigned))));
  const VI pairs = (VI)((VU)round_to_bf16(first) >> 16) | round_to_bf16(second);
  VF out;
  std::memcpy(&out, &pairs, sizeof out);
  return out;
}

// 2W consecutive floats x[0..2W) as W pairs (x[2l], x[2l+1]).
inline VF bf16_pairs_of(const float* x) {
  const VF a = load(x), b = load(x + W);
  return bf16_pairs(shuffle<Low<1>>(a, b), shuffle<High<1>>(a, b));  // the even lanes, the odd
}

// C[MR_][NR_·W] (+)= A[MR_][K] · B[K][NR_·W]. A is read one element at a time and
// broadcast (element (r, t) at A[r·a_row + t·a_col], so A may be stored either way round);
// B by vector loads (row stride ldb); C has row stride ldc. With col_max (not null), each
// column's max over the tile's rows is also folded into col_max[0 .. NR_·W) while the
// results are still in registers.
template <class Madd, std::size_t MR_, std::size_t NR_, bool Accumulate>
inline void micro_gemm(const float* A, std::size_t a_row, std::size_t a_col, const float* B, std::size_t ldb, float* C,
                       std::size_t ldc, std::size_t K, float* col_max) {
  VF acc[MR_][NR_];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR_; ++r)
#pragma GCC unroll 8
    for (std::size_t c = 0; c < NR_; ++c)
      acc[r][c] = Accumulate ? load(C + r * ldc + c * W) : VF{};
  for (std::size_t t = 0; t < K; ++t) {
    VF b[NR_];
#pragma GCC unroll 8
    for (std::size_t c = 0; c < NR_; ++c)
      b[c] = load(B + t * ldb + c * W);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR_; ++r) {
      const float a = A[r * a_row + t * a_col];
#pragma GCC unroll 8
      for (std::size_t c = 0; c < NR_; ++c)
        Madd::apply(acc[r][c], a, b[c]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR_; ++r)
#pragma GCC unroll 8
    for (std::size_t c = 0; c < NR_; ++c)
      store(C + r * ldc + c * W, acc[r][c]);
  if (!col_max) return;
#pragma GCC unroll 8
  for (std::size_t c = 0; c < NR_; ++c) {
    VF top = load(col_max + c * W);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR_; ++r)
      top = acc[r][c] > top ? acc[r][c] : top;
    store(col_max + c * W, top);
  }
}

// One row block of up to MR_ rows (a tail block has fewer) across NR_ vectors of columns.
template <class Madd, std::size_t MR_, std::size_t NR_, bool Accumulate>
inline void row_block(std::size_t rows, const float* A, std::size_t a_row, std::size_t a_col, const float* B,
                      std::size_t ldb, float* C, std::size_t ldc, std::size_t K, float* col_max) {
  if constexpr (MR_ > 1)
    if (rows < MR_) return row_block<Madd, MR_ - 1, NR_, Accumulate>(rows, A, a_row, a_col, B, ldb, C, ldc, K, col_max);
  micro_gemm<Madd, MR_, NR_, Accumulate>(A, a_row, a_col, B, ldb, C, ldc, K, col_max);
}

// Every row block of one column panel NR_ vectors wide.
template <class Madd, std::size_t MR_, std::size_t NR_, bool Accumulate>
inline void column_panel(const float* A, std::size_t a_row, std::size_t a_col, const float* B, std::size_t ldb,
                         float* C, std::size_t ldc, std::size_t rows, std::size_t K, float* col_max) {
  for (std::size_t r0 = 0; r0 < rows; r0 += MR_)
    row_block<Madd, MR_, NR_, Accumulate>(std::min(MR_, rows - r0), A + r0 * a_row, a_row, a_col, B, ldb, C + r0 * ldc,
                                          ldc, K, col_max);
}

// The last panel, narrower than a full one: `vectors` of them (1 .. NR_).
template <class Madd, std::size_t MR_, std::size_t NR_, bool Accumulate>
inline void tail_panel(std::size_t vectors, const float* A, std::size_t a_row, std::size_t a_col, const float* B,
                       std::size_t ldb, float* C, std::size_t ldc, std::size_t rows, std::size_t K, float* col_max) {
  if constexpr (NR_ > 1)
    if (vectors < NR_)
      return tail_panel<Madd, MR_, NR_ - 1, Accumulate>(vectors, A, a_row, a_col, B, ldb, C, ldc, rows, K, col_max);
  column_panel<Madd, MR_, NR_, Accumulate>(A, a_row, a_col, B, ldb, C, ldc, rows, K, col_max);
}

// C[rows][cols] (+)= A[rows][K] · B[K][cols], cols a multiple of W, in MR_ × NR_·W
// micro-tiles. Column panels on the outside, so a panel of B (K × NR_·W floats) stays in
// L1 while every row block passes over it. With col_max (not null, cols floats), each
// column's max over the rows is folded into it.
template <class Madd, std::size_t MR_, std::size_t NR_, bool Accumulate>
void block_gemm(const float* A, std::size_t a_row, std::size_t a_col, const float* B, std::size_t ldb, float* C,
                std::size_t ldc, std::size_t rows, std::size_t cols, std::size_t K, float* col_max = nullptr) {
  const auto max_at = [&](std::size_t c0) { return col_max ? col_max + c0 : nullptr; };
  std::size_t c0 = 0;
  for (; c0 + NR_ * W <= cols; c0 += NR_ * W)
    column_panel<Madd, MR_, NR_, Accumulate>(A, a_row, a_col, B + c0, ldb, C + c0, ldc, rows, K, max_at(c0));
  if constexpr (NR_ > 1)
    if (c0 < cols)
      tail_panel<Madd, MR_, NR_ - 1, Accumulate>((cols - c0) / W, A, a_row, a_col, B + c0, ldb, C + c0, ldc, rows, K,
                                                 max_at(c0));
}

// Per-thread scratch: a few tiles, never O(n·m).
// With bf16, each 32-bit slot of qt, k, pt and v holds a pair along the summed dimension.
struct Scratch {
  std::vector<float> qt;         // [d_k][rows_pad]   Q blockᵀ, pre-multiplied by c
  std::vector<float> k;          // [cols][d_k / 2]   K tile as bf16 pairs (bf16 only)
  std::vector<float> st;         // [cols][rows_pad]  S tileᵀ (keys × queries), then Pᵀ
  std::vector<float> tile_max;   // [rows_pad] each query's max over the tile, from GEMM 1
  std::vector<float> pt;         // [cols / 2][rows_pad] Pᵀ as bf16 pairs (bf16 only)
  std::vector<float> v;          // [cols / 2][d_v]   V tile as bf16 pairs (bf16 only)
  std::vector<float> o;          // [rows_pad][d_v] running output, or [d_v][rows_pad] (Oᵀ)
  std::vector<float> row_max;    // [rows_pad] running max per query, in log2 units
  std::vector<float> row_sum;    // [rows_pad] running sum per query
  std::vector<int> first, last;  // [rows_pad] each query's visible keys
};

// What every block of a call shares: the shape, the tile sizes, the logit scale.
struct Geometry {
  std::size_t n, m, d_k, d_v;
  std::size_t dk_slots;  // 32-bit slots along d_k (pairs with bf16)
  std::size_t group;     // query heads per KV head
  std::size_t block_q, block_k;
  bool o_transposed;  // d_v not a whole number of vectors: the output is kept as Oᵀ
  float c;            // scale / T · log2 e: scores come out as logits in log2 units
  long offset;        // m - n: query i sits at position i + offset among the keys
  long window;        // 0: none
  bool causal;
  AttentionLayout layout;  // where q, k, v and out lie
};

template <bool Bf16>
Geometry geometry_of(const AttentionShape& shape, const AttentionLayout& layout, const AttentionOptions& options) {
  Geometry g{};
  g.layout = layout;
  g.n = shape.n, g.m = shape.m, g.d_k = shape.d_k, g.d_v = shape.d_v;
  g.dk_slots = Bf16 ? (g.d_k + 1) / 2 : g.d_k;
  g.group = shape.heads / shape.kv_heads;
  const std::size_t masked_block_q = 96, open_block_q = 288;  // measured: docs/performance.md
  const bool diagonal = options.causal || options.window;
  g.block_q = round_up(options.block_q ? options.block_q : diagonal ? masked_block_q : open_block_q, W);
  g.block_k = std::max<std::size_t>(options.block_k, 1);
  g.o_transposed = g.d_v % W != 0;
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(g.d_k)));
  g.c = static_cast<float>(scale / options.temperature * M_LOG2E);
  g.offset = static_cast<long>(g.m) - static_cast<long>(g.n);
  // A window longer than both sequences hides nothing: clamped so that it fits a long.
  g.window = options.window ? static_cast<long>(std::min<std::size_t>(*options.window, g.n + g.m)) : 0;
  g.causal = options.causal;
  return g;
}

template <bool Bf16>
void allocate_scratch(Scratch& t, const Geometry& g) {
  t.qt.resize(g.dk_slots * g.block_q);
  t.st.resize(g.block_k * g.block_q);
  t.tile_max.resize(g.block_q);
  if (Bf16) t.k.resize(g.block_k * g.dk_slots), t.pt.resize((g.block_k + 1) / 2 * g.block_q);
  if (Bf16) t.v.resize((g.block_k + 1) / 2 * g.d_v);
  t.o.resize(g.block_q * g.d_v);
  t.row_max.resize(g.block_q);
  t.row_sum.resize(g.block_q);
  t.first.resize(g.block_q);
  t.last.resize(g.block_q);
}

// Q blockᵀ times c into t.qt, padding columns 0; the running output, max and sum reset.
template <bool Bf16>
void start_block(Scratch& t, const Geometry& g, const float* q_b, std::size_t rows, std::size_t rows_pad) {
  const auto q_at = [&](std::size_t r, std::size_t d) { return d < g.d_k ? q_b[r * g.layout.q_row + d] * g.c : 0.0f; };
  for (std::size_t d = 0; d < g.dk_slots; ++d) {
    float* row = t.qt.data() + d * rows_pad;
    for (std::size_t r = 0; r < rows; ++r)
      row[r] = Bf16 ? bf16_pair(q_at(r, 2 * d), q_at(r, 2 * d + 1)) : q_at(r, d);
    std::fill(row + rows, row + rows_pad, 0.0f);
  }
  std::fill(t.o.begin(), t.o.begin() + rows_pad * g.d_v, 0.0f);
  std::fill(t.row_max.begin(), t.row_max.end(), kMinusInf);
  std::fill(t.row_sum.begin(), t.row_sum.end(), 0.0f);
}

// Each query's visible keys [first, last] into t.first, t.last (padding queries see none);
// returns the range of keys any query of the block sees, [block_first, block_last].
std::pair<long, long> visible_keys(Scratch& t, const Geometry& g, std::size_t i0, std::size_t rows,
                                   std::size_t rows_pad) {
  long block_first = static_cast<long>(g.m), block_last = -1;
  for (std::size_t r = 0; r < rows_pad; ++r) {
    long first = 1, last = 0;
    if (r < rows) {
      const long position = static_cast<long>(i0 + r) + g.offset;
      first = 0;
      last = static_cast<long>(g.m) - 1;
      if (g.causal) last = std::min(last, position);
      if (g.window) first = std::max(first, position - g.window + 1), last = std::min(last, position + g.window - 1);
    }
    t.first[r] = static_cast<int>(first);
    t.last[r] = static_cast<int>(last);
    if (first <= last) block_first = std::min(block_first, first), block_last = std::max(block_last, last);
  }
  return {block_first, block_last};
}

// GEMM 1: Sᵀ = K_tile · (c·Q_b)ᵀ into t.st, keys down, queries across (bf16: K packed
// first), and each query's max over the tile's keys into t.tile_max (masks not applied).
template <class Madd, bool Bf16>
void score_tile(Scratch& t, const Geometry& g, const float* k_tile, std::size_t cols, std::size_t rows_pad) {
  const float* k_rows = k_tile;
  std::size_t k_row = g.layout.k_row;
  if (Bf16) {
    for (std::size_t j = 0; j < cols; ++j) {
      const float* row = k_tile + j * g.layout.k_row;
      float* pairs = t.k.data() + j * g.dk_slots;
      std::size_t d = 0;
      for (; 2 * d + 2 * W <= g.d_k; d += W)
        store(pairs + d, bf16_pairs_of(row + 2 * d));
      for (; d < g.dk_slots; ++d)
        pairs[d] = bf16_pair(row[2 * d], 2 * d + 1 < g.d_k ? row[2 * d + 1] : 0.0f);
    }
    k_rows = t.k.data();
    k_row = g.dk_slots;
  }
  std::fill(t.tile_max.begin(), t.tile_max.begin() + rows_pad, kMinusInf);
  block_gemm<Madd, kScoreMR, kScoreNR, false>(k_rows, k_row, 1, t.qt.data(), rows_pad, t.st.data(), rows_pad, cols,
                                              rows_pad, g.dk_slots, t.tile_max.data());
}

// Online softmax over the tile, W queries at a time: mask, new max, rescale the running
// sum and output by 2^(old max - new max), then Pᵀ = 2^(Sᵀ - max) in place in t.st.
void softmax_tile(Scratch& t, const Geometry& g, long j0, std::size_t cols, std::size_t rows_pad) {
  for (std::size_t r0 = 0; r0 < rows_pad; r0 += W) {
    VI first, last;
    std::memcpy(&first, t.first.data() + r0, sizeof first);
    std::memcpy(&last, t.last.data() + r0, sizeof last);
    bool masked = false;
    for (int l = 0; l < W; ++l)
      masked |= first[l] > j0 || last[l] < j0 + static_cast<long>(cols) - 1;
    // GEMM 1 left the max over every key; where a mask hides some, it is taken again.
    VF tile_max = load(t.tile_max.data() + r0);
    if (masked) {
      tile_max = splat(kMinusInf);
      for (std::size_t j = 0; j < cols; ++j) {
        float* s = t.st.data() + j * rows_pad + r0;
        const int key = static_cast<int>(j0 + j);
        const VF x = ((first > key) | (last < key)) ? splat(kMinusInf) : load(s);
        store(s, x);
        tile_max = x > tile_max ? x : tile_max;
      }
    }
    const VF old_max = load(t.row_max.data() + r0);
    const VF new_max = tile_max > old_max ? tile_max : old_max;
    // A query that has seen no key yet keeps max -inf: subtract 0 there, not -inf.
    const VF safe_max = new_max == kMinusInf ? splat(0.0f) : new_max;
    const VF correction = exp2_vec(old_max - safe_max);
    store(t.row_max.data() + r0, new_max);
    VF sum = VF{};
    for (std::size_t j = 0; j < cols; ++j) {
      float* s = t.st.data() + j * rows_pad + r0;
      const VF p = exp2_vec(load(s) - safe_max);
      store(s, p);
      sum += p;
    }
    store(t.row_sum.data() + r0, load(t.row_sum.data() + r0) * correction + sum);
    // The output so far is rescaled where a max rose: a row per query, or in Oᵀ a vector
    // multiply per column of d_v for all 16.
    bool unchanged = true;
    for (int l = 0; l < W; ++l)
      unchanged &= correction[l] == 1.0f;
    if (unchanged) continue;
    if (g.o_transposed) {
      for (std::size_t col = 0; col < g.d_v; ++col) {
        float* o = t.o.data() + col * rows_pad + r0;
        store(o, load(o) * correction);
      }
      continue;
    }
    for (int l = 0; l < W; ++l) {
      if (correction[l] == 1.0f) continue;
      float* o = t.o.data() + (r0 + l) * g.d_v;
      const VF factor = splat(correction[l]);
      for (std::size_t c0 = 0; c0 < g.d_v; c0 += W)
        store(o + c0, load(o + c0) * factor);
    }
  }
}

// GEMM 2: O_b += P · V_tile, with P read from Pᵀ and V in place (bf16: P and V packed as
// pairs of keys first). When d_v is not a whole number of vectors (d = 72), it is done
// transposed, O_bᵀ += V_tileᵀ · Pᵀ, queries across like GEMM 1: no columns of padding, and
// Oᵀ, V and a panel of Pᵀ fit in L1 together at such widths (at d = 96 and 128 they do
// not, and the row form is faster).
template <class Madd, bool Bf16>
void mix_tile(Scratch& t, const Geometry& g, const float* v_tile, std::size_t cols, std::size_t rows_pad) {
  const std::size_t key_slots = Bf16 ? (cols + 1) / 2 : cols;
  const float* p_rows = t.st.data();
  const float* v_rows = v_tile;
  std::size_t v_row = g.layout.v_row;
  if (Bf16) {
    for (std::size_t j = 0; j < key_slots; ++j) {
      const float* even = t.st.data() + 2 * j * rows_pad;
      const bool has_odd = 2 * j + 1 < cols;
      float* pairs = t.pt.data() + j * rows_pad;
      for (std::size_t r = 0; r < rows_pad; r += W)
        store(pairs + r, bf16_pairs(load(even + r), has_odd ? load(even + rows_pad + r) : VF{}));
      const float* v_even = v_tile + 2 * j * g.layout.v_row;
      float* row = t.v.data() + j * g.d_v;
      std::size_t col = 0;
      for (; col + W <= g.d_v; col += W)
        store(row + col, bf16_pairs(load(v_even + col), has_odd ? load(v_even + g.layout.v_row + col) : VF{}));
      for (; col < g.d_v; ++col)
        row[col] = bf16_pair(v_even[col], has_odd ? v_even[g.layout.v_row + col] : 0.0f);
    }
    p_rows = t.pt.data();
    v_rows = t.v.data();
    v_row = g.d_v;
  }
  if (g.o_transposed)
    block_gemm<Madd, kScoreMR, kScoreNR, true>(v_rows, 1, v_row, p_rows, rows_pad, t.o.data(), rows_pad, g.d_v,
                                               rows_pad, key_slots);
  // Widths that are not whole panels of kMixNR vectors (d = 80, 96) do better with the
  // scores' tile than with a narrow last panel.
  else if ((g.d_v / W) % kMixNR == 0)
    block_gemm<Madd, kMixMR, kMixNR, true>(p_rows, 1, rows_pad, v_rows, v_row, t.o.data(), g.d_v, rows_pad, g.d_v,
                                           key_slots);
  else
    block_gemm<Madd, kScoreMR, kScoreNR, true>(p_rows, 1, rows_pad, v_rows, v_row, t.o.data(), g.d_v, rows_pad, g.d_v,
                                               key_slots);
}

// O_b / l, written out (from Oᵀ transposed back); a query that saw no key stays 0.
void finish_block(const Scratch& t, const Geometry& g, float* out_block, std::size_t rows, std::size_t rows_pad) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* dst = out_block + r * g.layout.out_row;
    const float inv = t.row_sum[r] > 0 ? 1.0f / t.row_sum[r] : 0.0f;
    for (std::size_t col = 0; col < g.d_v; ++col)
      dst[col] = t.o[g.o_transposed ? col * rows_pad + r : r * g.d_v + col] * inv;
  }
}

// The kernel for one multiply-accumulate flavour; Bf16 says whether operands are packed
// as bf16 pairs. Work is (head, query block) pairs shared among the threads; each block
// walks its visible key tiles: score, online softmax, mix; then divides by the row sums.
template <class Madd, bool Bf16>
void flash_kernel(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                  const AttentionLayout& layout, const AttentionOptions& options) {
  const Geometry g = geometry_of<Bf16>(shape, layout, options);
  const std::size_t q_blocks = (g.n + g.block_q - 1) / g.block_q;
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
  {
    Scratch t;
    allocate_scratch<Bf16>(t, g);
#pragma omp for schedule(dynamic, 1)
    for (std::size_t work = 0; work < shape.heads * q_blocks; ++work) {
      // Causal blocks late in the sequence cost the most: hand them out first.
      const std::size_t h = work / q_blocks, qb = q_blocks - 1 - work % q_blocks;
      const std::size_t kv_head = h / g.group;
      const std::size_t i0 = qb * g.block_q, rows = std::min(g.block_q, g.n - i0), rows_pad = round_up(rows, W);
      const float* k_g = k + kv_head * layout.k_head;
      const float* v_g = v + kv_head * layout.v_head;

      start_block<Bf16>(t, g, q + h * layout.q_head + i0 * layout.q_row, rows, rows_pad);
      const auto [block_first, block_last] = visible_keys(t, g, i0, rows, rows_pad);
      for (long j0 = block_first; j0 <= block_last; j0 += static_cast<long>(g.block_k)) {
        const std::size_t cols = std::min<std::size_t>(g.block_k, static_cast<std::size_t>(block_last - j0 + 1));
        score_tile<Madd, Bf16>(t, g, k_g + j0 * layout.k_row, cols, rows_pad);
        softmax_tile(t, g, j0, cols, rows_pad);
        mix_tile<Madd, Bf16>(t, g, v_g + j0 * layout.v_row, cols, rows_pad);
      }
      finish_block(t, g, out + h * layout.out_head + i0 * layout.out_row, rows, rows_pad);
    }
  }
}

}  // namespace

void flash_attention_f32(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                         const AttentionLayout& layout, const AttentionOptions& options) {
  flash_kernel<MaddF32, false>(q, k, v, out, shape, layout, options);
}

void flash_attention_bf16(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                          const AttentionLayout& layout, const AttentionOptions& options) {
#if defined(ATTNLAB_HAS_BF16)
  if (options.isa == Isa::avx512_bf16) {
    flash_kernel<MaddBf16Native, true>(q, k, v, out, shape, layout, options);
    return;
  }
#endif
  flash_kernel<MaddBf16Portable, true>(q, k, v, out, shape, layout, options);
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
