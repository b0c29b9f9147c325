// The per-instruction-set f32 matrix product (attnlab/kernels/gemm.hpp): packed panels and
// a register-blocked micro-kernel, as every fast GEMM does it. Compiled once per instruction
// set, like flash_tiles.cpp.
//
// C[M × N] = beta · C + op(A) · op(B) is cut three ways, each cut sized to a level of the
// memory: K into kKc-long slices, so that a slice of op(B) kKc × kNc stays in the L2/L3 cache
// while every row of A passes it; M into blocks of kMc rows of op(A) (kMc × kKc, in L2); and
// the two again into micro-tiles of kMr rows by kNr columns, whose kMr · kNr sums stay in
// registers for the whole slice: per step of k, kNr / W vectors of B are loaded and each of the
// kMr values of A broadcast and multiplied into them (kMr · kNr / W FMAs for kMr + kNr / W
// loads). Both operands are first copied ("packed") into the order the micro-kernel reads
// them, contiguous and zero-padded to whole tiles, whatever their transposition or stride:
// the copies cost O(M·K + K·N) against the product's O(M·N·K).
//
// With AVX-512 a tile is 8 × 48 (24 of the 32 registers hold sums, 3 hold B's vectors: 11
// loads for 24 FMAs; measured on 2 Sapphire Rapids cores beside 12 × 32, 14 × 32 and 6 × 64,
// it was as fast or faster at the model's shapes, within the spread of the runs); with AVX2
// and SSE2, which have 16 registers, 6 × 16 and 6 × 8 (12 hold sums).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernel_impl.hpp"
#include "simd.hpp"

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

constexpr std::size_t kMr = W == 16 ? 8 : 6;  // rows of a micro-tile
constexpr std::size_t kNv = W == 16 ? 3 : 2;  // its columns, in vectors
constexpr std::size_t kNr = kNv * W;          // its columns
constexpr std::size_t kKc = 256;              // the length of a slice of K
constexpr std::size_t kMc = kMr * 16;         // rows of op(A) packed at once (128 × 256 floats: 128 KiB with AVX-512)
constexpr std::size_t kNc = kNr * 32;  // columns of op(B) packed at once (1536 × 256 floats: 1.5 MiB with AVX-512)

// A 64-byte-aligned float buffer of this thread's, grown as needed and kept for the next call.
float* scratch(std::unique_ptr<float, decltype(&std::free)>& kept, std::size_t& capacity, std::size_t floats) {
  if (floats > capacity) {
    kept.reset(static_cast<float*>(std::aligned_alloc(64, round_up(floats * sizeof(float), 64))));
    capacity = kept ? floats : 0;
  }
  return kept.get();
}

// A W × W block of floats, v[r] its row r, transposed in place: v[l] then holds the l-th value
// of every row. log2 W rounds of interleaving pairs of vectors W / 2 apart (each interleave one
// lane-permuting instruction with AVX-512), instead of W · W scalar copies.
struct InterleaveLow {
  static constexpr int at(int l) { return (l % 2) * W + l / 2; }
};
struct InterleaveHigh {
  static constexpr int at(int l) { return (l % 2) * W + W / 2 + l / 2; }
};
inline void transpose(VF (&v)[W]) {
  for (int round = 1; round < W; round *= 2) {
    VF next[W];
    for (int i = 0; i < W / 2; ++i) {
      next[2 * i] = shuffle<InterleaveLow>(v[i], v[i + W / 2]);
      next[2 * i + 1] = shuffle<InterleaveHigh>(v[i], v[i + W / 2]);
    }
    for (int i = 0; i < W; ++i)
      v[i] = next[i];
  }
}

// Copies `count` ≤ W stored runs of kc values each (run r from value `first` + r · ld of
// `from`, stored as T) into out as f32, value k of run r at out[k · width + r]: a transposition,
// in W × W blocks (the last one zero-padded, never read past a run). Packs A's rows into its
// panels (width kMr) and a transposed B's rows into its panels (width W, kNv times per panel),
// widening a 16-bit B as it goes.
template <DType T>
void transpose_runs(const void* from, std::size_t first, std::size_t ld, std::size_t count, std::size_t kc, float* out,
                    std::size_t width) {
  for (std::size_t k = 0; k < kc; k += W) {
    const std::size_t values = std::min<std::size_t>(W, kc - k);
    VF v[W];
    for (std::size_t r = 0; r < std::size_t(W); ++r) {
      const std::size_t at = first + r * ld + k;
      v[r] = r >= count ? splat(0.0f) : values == W ? load_as_f32<T>(from, at) : load_tail<T>(from, at, values);
    }
    transpose(v);
    if (count == std::size_t(W))  // whole vectors stored as such (a copy of a length known only now is a call)
      for (std::size_t l = 0; l < values; ++l)
        store(out + (k + l) * width, v[l]);
    else if (count == kMr)
      for (std::size_t l = 0; l < values; ++l)
        std::memcpy(out + (k + l) * width, &v[l], kMr * sizeof(float));
    else
      for (std::size_t l = 0; l < values; ++l)
        std::memcpy(out + (k + l) * width, &v[l], count * sizeof(float));
  }
}

// op(A)'s rows [i0, i0 + m) and columns [k0, k0 + kc) as micro-panels of kMr rows: panel p
// holds, for each k, its kMr values of column k (rows past m zero).
void pack_a(bool ta, const float* A, std::size_t lda, std::size_t i0, std::size_t m, std::size_t k0, std::size_t kc,
            float* out) {
  for (std::size_t p = 0; p < m; p += kMr) {
    float* panel = out + p * kc;
    const std::size_t rows = std::min(kMr, m - p);
    if (rows < kMr) std::memset(panel, 0, kc * kMr * sizeof(float));
    if (ta) {  // op(A)(i, k) = A[k · lda + i]: a column of k is contiguous in i
      for (std::size_t k = 0; k < kc; ++k)
        std::memcpy(panel + k * kMr, A + (k0 + k) * lda + i0 + p, rows * sizeof(float));
    } else {  // W rows at a time (kMr exceeds W with SSE2's 4 lanes)
      for (std::size_t r = 0; r < rows; r += W)
        transpose_runs<DType::f32>(A, (i0 + p + r) * lda + k0, lda, std::min<std::size_t>(W, rows - r), kc, panel + r,
                                   kMr);
    }
  }
}

// op(B)'s rows [k0, k0 + kc) and columns [j0, j0 + n) as micro-panels of kNr columns, in f32:
// panel p holds, for each k, its kNr values of row k (columns past n zero).
template <DType T>
void pack_b(bool tb, const void* B, std::size_t ldb, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t n,
            float* out) {
  for (std::size_t p = 0; p < n; p += kNr) {
    float* panel = out + p * kc;
    const std::size_t cols = std::min(kNr, n - p);
    if (cols < kNr) std::memset(panel, 0, kc * kNr * sizeof(float));
    if (tb) {  // op(B)(k, j) = B[j · ldb + k]: a stored row is one column of op(B); W of them at a time
      for (std::size_t c = 0; c < cols; c += W)
        transpose_runs<T>(B, (j0 + p + c) * ldb + k0, ldb, std::min<std::size_t>(W, cols - c), kc, panel + c, kNr);
    } else {  // a stored row is a row of op(B): copied (widened) W values at a time
      for (std::size_t k = 0; k < kc; ++k)
        for (std::size_t c = 0; c < cols; c += W) {
          const std::size_t at = (k0 + k) * ldb + j0 + p + c, values = std::min<std::size_t>(W, cols - c);
          store(panel + k * kNr + c, values == W ? load_as_f32<T>(B, at) : load_tail<T>(B, at, values));
        }
    }
  }
}

// One micro-tile: sums[r][v] = Σ_k a[k · kMr + r] · b[k · kNr + v · W + lanes] over the slice's
// kc steps, then C's m × n corner of the tile = beta · C + sums (beta 0: C not read).
void micro_tile(std::size_t kc, const float* a, const float* b, float beta, float* C, std::size_t ldc, std::size_t m,
                std::size_t n) {
  // C's rows of the tile are asked for now, to have arrived when the sums are added to them.
  for (std::size_t r = 0; r < m; ++r) {
    __builtin_prefetch(C + r * ldc, 1);
    __builtin_prefetch(C + r * ldc + n - 1, 1);
  }
  VF sums[kMr][kNv];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kMr; ++r)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kNv; ++v)
      sums[r][v] = splat(0.0f);
  for (std::size_t k = 0; k < kc; ++k) {
    VF bv[kNv];
#pragma GCC unroll 4
    for (std::size_t v = 0; v < kNv; ++v)
      bv[v] = load(b + k * kNr + v * W);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kMr; ++r) {
      const VF ar = splat(a[k * kMr + r]);
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kNv; ++v)
        sums[r][v] += ar * bv[v];
    }
  }
  if (m == kMr && n == kNr) {
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kMr; ++r) {
      float* c = C + r * ldc;
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kNv; ++v) {
        if (beta != 0.0f) sums[r][v] += beta * load(c + v * W);
        store(c + v * W, sums[r][v]);
      }
    }
    return;
  }
  float tile[kMr][kNr];  // a corner: the sums out, then the part that exists
  for (std::size_t r = 0; r < kMr; ++r)
    for (std::size_t v = 0; v < kNv; ++v)
      store(tile[r] + v * W, sums[r][v]);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t c = 0; c < n; ++c)
      C[r * ldc + c] = beta != 0.0f ? beta * C[r * ldc + c] + tile[r][c] : tile[r][c];
}

}  // namespace

namespace {

template <DType T>
void gemm_as(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
             const void* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // no terms: C = beta · C
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  thread_local std::unique_ptr<float, decltype(&std::free)> a_kept(nullptr, &std::free), b_kept(nullptr, &std::free);
  thread_local std::size_t a_capacity = 0, b_capacity = 0;
  const std::size_t kc_most = std::min(kKc, K);
  float* const a_packed = scratch(a_kept, a_capacity, round_up(std::min(kMc, M), kMr) * kc_most);
  float* const b_packed = scratch(b_kept, b_capacity, round_up(std::min(kNc, N), kNr) * kc_most);
  if (!a_packed || !b_packed) throw std::bad_alloc();
  for (std::size_t j0 = 0; j0 < N; j0 += kNc) {
    const std::size_t n = std::min(kNc, N - j0);
    for (std::size_t k0 = 0; k0 < K; k0 += kKc) {
      const std::size_t kc = std::min(kKc, K - k0);
      const float slice_beta = k0 == 0 ? beta : 1.0f;  // later slices add to the first's sums
      pack_b<T>(tb, B, ldb, k0, kc, j0, n, b_packed);
      for (std::size_t i0 = 0; i0 < M; i0 += kMc) {
        const std::size_t m = std::min(kMc, M - i0);
        pack_a(ta, A, lda, i0, m, k0, kc, a_packed);
        for (std::size_t j = 0; j < n; j += kNr)  // a panel of B stays near while A's pass it
          for (std::size_t i = 0; i < m; i += kMr)
            micro_tile(kc, a_packed + i * kc, b_packed + j * kc, slice_beta, C + (i0 + i) * ldc + j0 + j, ldc,
                       std::min(kMr, m - i), std::min(kNr, n - j));
      }
    }
  }
}

}  // namespace

void gemm_f32(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
              const void* B, DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  switch (b_dtype) {
    case DType::f16: return gemm_as<DType::f16>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    case DType::bf16: return gemm_as<DType::bf16>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    default: return gemm_as<DType::f32>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
