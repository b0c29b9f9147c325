// Quantized prompts' products (matvec.hpp's int8_gemm) on AMX's bf16 tiles, where the CPU has
// them: each value of x and each weight as the sum of two bf16 numbers, their products summed
// in the tiles' f32 for the whole row, with no scale to apply on the way.
//
// tdpbf16ps adds A · B into a [16 × 16] f32 tile C: A is 16 rows of 32 bf16 (16 rows of x),
// B is 16 rows of 16 columns × 2 bf16 (two consecutive values of each of 16 weight rows).
// Split v = v_hi + v_lo with v_hi = bf16(v) and v_lo = bf16(v − v_hi), each rounded to
// nearest: |v − v_hi − v_lo| ≤ 2^-18 |v| and |v_lo| ≤ 2^-9 |v|. Then
//   x·w ≈ x_hi·w_hi + x_hi·w_lo + x_lo·w_hi,   within 3 · 2^-18 |x·w|,
// every product exact in f32 (8-bit by 8-bit significands), summed by the tile in f32. That
// is within the int8 parts' bound (max |x| / 32512 over each 32 values, ≥ 2^-15 |x·w|): three
// multiplies where the int8 tiles take two, but no sums to store and scale every 32 values.
// A weight w = a·q − c is made in f32 from the regrouped panels' values and factors (one
// fused multiply-subtract: within 2^-24 of a·q − c), then split.
//
// Compiled alone with the AMX and AVX-512 flags (no templates of the standard library used
// here); run only where amx_bf16_available() says the CPU and the kernel allow the tiles.
#include <immintrin.h>

#include <cstdint>

// (GCC 12's AVX-512 headers start some intrinsics' results from a self-initialized value,
// which it then warns of here, inlined at -O3.)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernel_impl.hpp"

namespace attnlab::kernels::amx {

namespace {

constexpr std::size_t kPanel = 16, kPanels = 2, kStep = 32;  // weight rows a panel; values a tile's K
constexpr std::size_t kSliceSteps = 8;
constexpr float kLargestSplit = 3.0e38f;  // (bf16's largest is 3.39·10^38: a value past it rounds to infinity) // K's
                                          // slices: 256 values

// v rounded to bf16, as f32 (its low 16 bits zero).
inline __m512 bf16_of(__m512 v) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v))), 16));
}

// Two vectors of f32 (bf16 values) as one of pairs: lane j's low half a's bf16, high half b's.
inline __m512i as_pairs(__m512 a, __m512 b) {
  return _mm512_mask_blend_epi16(0xAAAAAAAA, _mm512_srli_epi32(_mm512_castps_si512(a), 16), _mm512_castps_si512(b));
}

// Tiles: 0-3 the sums (rows of x 0-15 and 16-31 by panels 0 and 1: tile 2·panel + half), 4
// and 5 x's two halves' parts, 6 and 7 a panel's parts.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

}  // namespace

bool splittable(const float* x, std::size_t length) {
  __mmask16 bad = 0;
  for (std::size_t i = 0; i < length; i += 16)
    bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), _mm512_set1_ps(kLargestSplit), _CMP_NLT_UQ);
  return bad == 0;
}

void split_row_bf16(const float* x, std::size_t length, std::size_t row, std::uint16_t* tiled) {
  const std::size_t tile = row / kTileRows, r = row % kTileRows, steps = length / kStep;
  for (std::size_t k = 0; k < steps; ++k) {
    std::uint16_t* out = tiled + ((tile * steps + k) * 2 * kTileRows + r) * kStep;  // [tile][step][part][16][32]
    for (std::size_t half = 0; half < 2; ++half) {
      const __m512 v = _mm512_loadu_ps(x + k * kStep + half * 16);
      const __m512 lo = _mm512_sub_ps(v, bf16_of(v));  // (exact)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + half * 16),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kTileRows * kStep + half * 16),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(lo)));
    }
  }
}

void bf16_weights(const Int8PanelsView& p, std::size_t length, std::size_t values, std::uint16_t* b) {
  const __m512i byte = _mm512_set1_epi32(0xFF);
  for (std::size_t g = 0; g < length / kStep; ++g)
    for (std::size_t t = 0; t < kStep / 4; ++t)
      for (std::size_t k = 0; k < kPanels; ++k) {
        const __m512i q = _mm512_loadu_si512(p.q + ((g * 8 + t) * kPanels + k) * 64);
        const std::size_t f = (g * kStep + 4 * t) / values;  // the factors' group
        const __m512 a = _mm512_mul_ps(_mm512_loadu_ps(p.a + (f * kPanels + k) * kPanel), _mm512_set1_ps(256.0f));
        const __m512 c = _mm512_loadu_ps(p.c + (f * kPanels + k) * kPanel);
        __m512 hi[4], lo[4];
        for (int v = 0; v < 4; ++v) {
          const __m512i qv = p.signed_values ? _mm512_srai_epi32(_mm512_slli_epi32(q, 24 - 8 * v), 24)
                                             : _mm512_and_si512(_mm512_srli_epi32(q, 8 * v), byte);
          const __m512 w = _mm512_fmsub_ps(_mm512_cvtepi32_ps(qv), a, c);
          hi[v] = bf16_of(w), lo[v] = bf16_of(_mm512_sub_ps(w, hi[v]));
        }
        // B's rows 2t and 2t + 1 of this step: values 4t, 4t + 1 and 4t + 2, 4t + 3 in pairs.
        std::uint16_t* step = b + ((g * kPanels + k) * 2) * kTileRows * kStep;  // [step][panel][part][16][32]
        _mm512_storeu_si512(step + (2 * t) * kStep, as_pairs(hi[0], hi[1]));
        _mm512_storeu_si512(step + (2 * t + 1) * kStep, as_pairs(hi[2], hi[3]));
        _mm512_storeu_si512(step + (kTileRows + 2 * t) * kStep, as_pairs(lo[0], lo[1]));
        _mm512_storeu_si512(step + (kTileRows + 2 * t + 1) * kStep, as_pairs(lo[2], lo[3]));
      }
}

void bf16_tiles(const std::uint16_t* b, std::size_t pairs, const std::uint16_t* x, std::size_t n, std::size_t length,
                float* y, std::size_t ldy, std::size_t cols, float beta, float* acc) {
  TileConfig config;
  for (int t = 0; t < 8; ++t)
    config.rows[t] = 16, config.bytes_per_row[t] = 64;
  _tile_loadconfig(&config);
  const std::size_t steps = length / kStep, part = kTileRows * kStep, stride = kStep * 2;
  const std::size_t tiles = (n + 2 * kTileRows - 1) / (2 * kTileRows) * 2;
  // The sums of x's tile `tile` by panel k of pair p, [pairs][rows / 16][2 panels][16][16]: in
  // the tiles while a slice of K is multiplied, here between slices. A slice of x's two tiles
  // stays in the nearest cache while it is multiplied by every pair's slice.
  const auto sums = [&](std::size_t p, std::size_t tile, std::size_t k) {
    return acc + ((p * tiles + tile) * kPanels + k) * 256;
  };
  for (std::size_t k0 = 0; k0 < steps; k0 += kSliceSteps) {
    const std::size_t k1 = k0 + kSliceSteps < steps ? k0 + kSliceSteps : steps;
    for (std::size_t t0 = 0; t0 < tiles; t0 += 2) {         // (x's rows are padded to whole pairs of tiles)
      const std::uint16_t* x0 = x + t0 * steps * 2 * part;  // [tile][step][part][16][32]
      const std::uint16_t* x1 = x0 + steps * 2 * part;
      for (std::size_t p = 0; p < pairs; ++p) {
        if (k0 == 0) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
        } else {
          _tile_loadd(0, sums(p, t0, 0), 64);
          _tile_loadd(1, sums(p, t0 + 1, 0), 64);
          _tile_loadd(2, sums(p, t0, 1), 64);
          _tile_loadd(3, sums(p, t0 + 1, 1), 64);
        }
        const std::uint16_t* bp = b + p * steps * kPanels * 2 * part;  // [pair][step][panel][part][16][32]
        for (std::size_t k = k0; k < k1; ++k) {
          const std::uint16_t *xs0 = x0 + k * 2 * part, *xs1 = x1 + k * 2 * part, *bs = bp + k * kPanels * 2 * part;
          _tile_loadd(4, xs0, stride);  // x's high parts by both parts of both panels
          _tile_loadd(5, xs1, stride);
          _tile_loadd(6, bs, stride);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 5, 6);
          _tile_loadd(7, bs + part, stride);
          _tile_dpbf16ps(0, 4, 7);
          _tile_dpbf16ps(1, 5, 7);
          _tile_loadd(6, bs + 2 * part, stride);
          _tile_dpbf16ps(2, 4, 6);
          _tile_dpbf16ps(3, 5, 6);
          _tile_loadd(7, bs + 3 * part, stride);
          _tile_dpbf16ps(2, 4, 7);
          _tile_dpbf16ps(3, 5, 7);
          _tile_loadd(4, xs0 + part, stride);  // x's low parts by the panels' high parts
          _tile_loadd(5, xs1 + part, stride);
          _tile_loadd(6, bs, stride);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 5, 6);
          _tile_loadd(7, bs + 2 * part, stride);
          _tile_dpbf16ps(2, 4, 7);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, sums(p, t0, 0), 64);
        _tile_stored(1, sums(p, t0 + 1, 0), 64);
        _tile_stored(2, sums(p, t0, 1), 64);
        _tile_stored(3, sums(p, t0 + 1, 1), 64);
      }
    }
  }
  _tile_release();
  for (std::size_t p = 0; p < pairs; ++p)
    for (std::size_t k = 0; k < kPanels; ++k) {
      const std::size_t first = (p * kPanels + k) * kPanel;
      const std::size_t live = cols > first ? (cols - first < kPanel ? cols - first : kPanel) : 0;
      const __mmask16 mask = __mmask16((1u << live) - 1);
      for (std::size_t i = 0; i < n && live > 0; ++i) {
        float* yi = y + i * ldy + first;
        const __m512 sum = _mm512_load_ps(sums(p, i / kTileRows, k) + (i % kTileRows) * kPanel);
        _mm512_mask_storeu_ps(
            yi, mask, beta == 0.0f ? sum : _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, yi), sum));
      }
    }
}

}  // namespace attnlab::kernels::amx
