// The tiled attention kernel (FlashAttention-2 style) for one instruction set.
//
// This file is compiled once per instruction set (generic x86-64, AVX2, AVX-512) with
// ATTNLAB_ISA naming the namespace; dispatch.cpp picks one at run time. The code is
// written with GCC vector types of 16 floats, which the compiler maps onto whatever
// registers the target has.
//
// For each head h and block of queries Q_b (block_q rows), over the key tiles that block
// can see (block_k keys each):
//   S = Q_b · K_tileᵀ                         (GEMM 1, packed Kᵀ)
//   m_new = max(m, rowmax(S·c))               c = scale / T · log2 e
//   P = 2^(S·c - m_new), l = l·2^(m - m_new) + rowsum(P)
//   O_b = O_b · 2^(m - m_new) + P · V_tile   (GEMM 2)
// and at the end O_b / l. Tiles no query of the block can see are skipped.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnlab/flash_attention.hpp"
#include "kernel_impl.hpp"

#ifndef ATTNLAB_ISA
#error "compile with -DATTNLAB_ISA=<namespace>"
#endif

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

constexpr int W = 16;  // floats per vector
typedef float VF __attribute__((vector_size(W * sizeof(float))));
typedef int VI __attribute__((vector_size(W * sizeof(int))));

constexpr std::size_t MR = 6;       // rows per micro-tile
constexpr std::size_t NR = 2;       // vectors per micro-tile row (32 columns)
constexpr std::size_t kColumnAlign = NR * W;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

inline VF load(const float* p) {
  VF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, VF v) { std::memcpy(p, &v, sizeof v); }
// All lanes = x. (Not VF{} + x: that costs an add, since 0 + x differs from x for -0.)
inline VF splat(float x) { return VF{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
inline std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// 2^x for x <= 0 (and -inf): Cephes' exp2f polynomial on [-0.5, 0.5] (relative error
// about 2e-7), scaled by 2^round(x) through the exponent bits. x < -126 gives exactly 0.
inline VF exp2_vec(VF x) {
  const VF clamped = x < -126.0f ? splat(-126.0f) : x;
  const VF shifter = splat(12582912.0f);  // 1.5·2^23: adding it rounds to an integer
  const VF rounded = (clamped + shifter) - shifter;
  const VF f = clamped - rounded;  // in [-0.5, 0.5]
  VF p = splat(1.535336188319500e-4f);
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  const VI exponent = __builtin_convertvector(rounded, VI) << 23;
  VI bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += exponent;
  VF result;
  std::memcpy(&result, &bits, sizeof result);
  return x < -126.0f ? splat(0.0f) : result;
}

inline float reduce_max(VF v) {
  float r = v[0];
  for (int l = 1; l < W; ++l) r = std::max(r, v[l]);
  return r;
}
inline float reduce_add(VF v) {
  float r = 0;
  for (int l = 0; l < W; ++l) r += v[l];
  return r;
}

// C[MR_][NR_·W] (+)= A[MR_][K] · B[K][NR_·W]; A is read by broadcasts (row stride lda),
// B by vector loads (row stride ldb), C has row stride ldc.
template <std::size_t MR_, std::size_t NR_, bool Accumulate>
inline void micro_gemm(const float* A, std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc,
                       std::size_t K) {
  VF acc[MR_][NR_];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR_; ++r)
#pragma GCC unroll 8
    for (std::size_t c = 0; c < NR_; ++c) acc[r][c] = Accumulate ? load(C + r * ldc + c * W) : VF{};
  for (std::size_t t = 0; t < K; ++t) {
    VF b[NR_];
#pragma GCC unroll 8
    for (std::size_t c = 0; c < NR_; ++c) b[c] = load(B + t * ldb + c * W);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR_; ++r) {
      const VF a = splat(A[r * lda + t]);
#pragma GCC unroll 8
      for (std::size_t c = 0; c < NR_; ++c) acc[r][c] += a * b[c];
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR_; ++r)
#pragma GCC unroll 8
    for (std::size_t c = 0; c < NR_; ++c) store(C + r * ldc + c * W, acc[r][c]);
}

// C[rows][cols] (+)= A[rows][K] · B[K][cols], rows a multiple of MR, cols of W. Column
// panels outside, so a panel of B stays in L1 while every row block passes over it.
template <bool Accumulate>
void block_gemm(const float* A, std::size_t lda, const float* B, std::size_t ldb, float* C, std::size_t ldc,
                std::size_t rows, std::size_t cols, std::size_t K) {
  std::size_t c0 = 0;
  for (; c0 + NR * W <= cols; c0 += NR * W)
    for (std::size_t r0 = 0; r0 < rows; r0 += MR)
      micro_gemm<MR, NR, Accumulate>(A + r0 * lda, lda, B + c0, ldb, C + r0 * ldc + c0, ldc, K);
  for (; c0 < cols; c0 += W)
    for (std::size_t r0 = 0; r0 < rows; r0 += MR)
      micro_gemm<MR, 1, Accumulate>(A + r0 * lda, lda, B + c0, ldb, C + r0 * ldc + c0, ldc, K);
}

// Per-thread scratch: a few tiles, never O(n·m).
struct Scratch {
  std::vector<float> q;        // [rows_pad][d_k]
  std::vector<float> kt;       // [d_k][cols_pad]   K tileᵀ
  std::vector<float> v;        // [cols_pad][dv_pad]
  std::vector<float> s;        // [rows_pad][cols_pad] scores, then probabilities
  std::vector<float> o;        // [rows_pad][dv_pad] running output
  std::vector<float> row_max;  // [rows_pad] in log2 units
  std::vector<float> row_sum;  // [rows_pad]
};

}  // namespace

void flash_attention_f32(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                         const AttentionOptions& options) {
  const std::size_t n = shape.n, m = shape.m, d_k = shape.d_k, d_v = shape.d_v;
  const std::size_t group = shape.heads / shape.kv_heads;
  const std::size_t block_q = round_up(std::max<std::size_t>(options.block_q, 1), MR);
  const std::size_t block_k = round_up(std::max<std::size_t>(options.block_k, 1), kColumnAlign);
  const std::size_t dv_pad = round_up(d_v, W);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(d_k)));
  const float c = static_cast<float>(scale / options.temperature * M_LOG2E);
  const std::size_t q_blocks = (n + block_q - 1) / block_q;
  const long offset = static_cast<long>(m) - static_cast<long>(n);
  const long window = options.window ? static_cast<long>(*options.window) : 0;

  // The keys query i sees: [first, last] (empty when first > last).
  const auto visible = [&](long i, long& first, long& last) {
    const long position = i + offset;
    first = 0;
    last = static_cast<long>(m) - 1;
    if (options.causal) last = std::min(last, position);
    if (window) {
      first = std::max(first, position - window + 1);
      last = std::min(last, position + window - 1);
    }
  };

  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
  {
    Scratch t;
    t.q.resize(block_q * d_k);
    t.kt.resize(d_k * block_k);
    t.v.resize(block_k * dv_pad);
    t.s.resize(block_q * block_k);
    t.o.resize(block_q * dv_pad);
    t.row_max.resize(block_q);
    t.row_sum.resize(block_q);
    std::vector<long> first(block_q), last(block_q);

#pragma omp for schedule(dynamic, 1)
    for (std::size_t work = 0; work < shape.heads * q_blocks; ++work) {
      // Causal blocks late in the sequence cost the most: hand them out first.
      const std::size_t h = work / q_blocks, qb = q_blocks - 1 - work % q_blocks;
      const std::size_t g = h / group;
      const std::size_t i0 = qb * block_q, rows = std::min(block_q, n - i0), rows_pad = round_up(rows, MR);
      const float* q_h = q + (h * n + i0) * d_k;
      const float* k_g = k + g * m * d_k;
      const float* v_g = v + g * m * d_v;

      std::memcpy(t.q.data(), q_h, rows * d_k * sizeof(float));
      std::fill(t.q.begin() + rows * d_k, t.q.begin() + rows_pad * d_k, 0.0f);
      std::fill(t.o.begin(), t.o.begin() + rows_pad * dv_pad, 0.0f);
      std::fill(t.row_max.begin(), t.row_max.end(), kMinusInf);
      std::fill(t.row_sum.begin(), t.row_sum.end(), 0.0f);
      long block_first = static_cast<long>(m), block_last = -1;
      for (std::size_t r = 0; r < rows_pad; ++r) {
        if (r < rows) visible(static_cast<long>(i0 + r), first[r], last[r]);
        else first[r] = 1, last[r] = 0;  // padding rows see nothing
        if (first[r] <= last[r]) block_first = std::min(block_first, first[r]), block_last = std::max(block_last, last[r]);
      }

      for (long j0 = block_first >= 0 ? block_first / static_cast<long>(block_k) * static_cast<long>(block_k) : 0;
           j0 <= block_last; j0 += static_cast<long>(block_k)) {
        const std::size_t cols = std::min<std::size_t>(block_k, m - j0), cols_pad = round_up(cols, kColumnAlign);
        // Pack K tileᵀ [d_k][cols_pad] and the V tile [cols_pad][dv_pad], zero padded.
        for (std::size_t t_ = 0; t_ < d_k; ++t_) {
          float* row = t.kt.data() + t_ * cols_pad;
          for (std::size_t j = 0; j < cols; ++j) row[j] = k_g[(j0 + j) * d_k + t_];
          std::fill(row + cols, row + cols_pad, 0.0f);
        }
        for (std::size_t j = 0; j < cols_pad; ++j) {
          float* row = t.v.data() + j * dv_pad;
          if (j < cols) {
            std::memcpy(row, v_g + (j0 + j) * d_v, d_v * sizeof(float));
            std::fill(row + d_v, row + dv_pad, 0.0f);
          } else {
            std::fill(row, row + dv_pad, 0.0f);
          }
        }

        // GEMM 1: S = Q_b · K_tileᵀ.
        block_gemm<false>(t.q.data(), d_k, t.kt.data(), cols_pad, t.s.data(), cols_pad, rows_pad, cols_pad, d_k);

        // Online softmax, row by row: mask, new max, rescale, exponentials.
        for (std::size_t r = 0; r < rows_pad; ++r) {
          float* s = t.s.data() + r * cols_pad;
          float* o = t.o.data() + r * dv_pad;
          const long lo = std::max(first[r] - j0, 0L), hi = std::min(last[r] - j0, static_cast<long>(cols) - 1);
          if (lo > hi) {  // this row sees nothing in this tile
            std::fill(s, s + cols_pad, 0.0f);
            continue;
          }
          const bool partial = lo > 0 || hi < static_cast<long>(cols_pad) - 1;
          VF tile_max = splat(kMinusInf);
          for (std::size_t j = 0; j < cols_pad; j += W) {
            VF x = load(s + j) * c;
            if (partial) {
              VI index = VI{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} + static_cast<int>(j);
              x = (index < static_cast<int>(lo)) | (index > static_cast<int>(hi)) ? splat(kMinusInf) : x;
            }
            store(s + j, x);
            tile_max = x > tile_max ? x : tile_max;
          }
          const float new_max = std::max(t.row_max[r], reduce_max(tile_max));
          const float correction = t.row_max[r] == kMinusInf ? 0.0f : std::exp2(t.row_max[r] - new_max);
          t.row_max[r] = new_max;
          VF sum = VF{};
          for (std::size_t j = 0; j < cols_pad; j += W) {
            const VF p = exp2_vec(load(s + j) - new_max);
            store(s + j, p);
            sum += p;
          }
          t.row_sum[r] = t.row_sum[r] * correction + reduce_add(sum);
          if (correction != 1.0f)
            for (std::size_t c0 = 0; c0 < dv_pad; c0 += W) store(o + c0, load(o + c0) * correction);
        }

        // GEMM 2: O_b += P · V_tile.
        block_gemm<true>(t.s.data(), cols_pad, t.v.data(), dv_pad, t.o.data(), dv_pad, rows_pad, dv_pad, cols_pad);
      }

      // O_b / l, written out; a row that saw no key stays 0.
      for (std::size_t r = 0; r < rows; ++r) {
        float* dst = out + (h * n + i0 + r) * d_v;
        const float inv = t.row_sum[r] > 0 ? 1.0f / t.row_sum[r] : 0.0f;
        for (std::size_t col = 0; col < d_v; ++col) dst[col] = t.o[r * dv_pad + col] * inv;
      }
    }
  }
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
