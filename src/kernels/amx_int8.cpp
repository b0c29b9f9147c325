// The int8 GEMM of quantized prompts (matvec.hpp's int8_gemm) on AMX's tiles, where the CPU
// has them: the same regrouped panels and the same int8 parts of x as the VNNI kernel in
// matvec_tiles.cpp, multiplied 16 rows of x by 16 weight rows at a time by one instruction.
//
// tdpbsud adds A · B into a [16 × 16] int32 tile C: A is 16 rows of K signed bytes (x's parts,
// 16 rows of the prompt), B is K/4 rows of 16 columns × 4 bytes (four consecutive values of
// each of 16 weight rows: a panel's vectors, as regrouped, are exactly these rows). With K one
// factor group's values (32; Q6_K's 16) the tile holds, for each row of x and each weight row,
// Σ q·h over the group, and a second multiply by x's low parts Σ q·l. Those are read out of
// the tile and scaled once a group, as the VNNI kernel scales its sums:
//   y += a · s/256 · (256·Σ q·h + Σ q·l) − c · Σ x.
// The tile unit takes as long for K = 32 as for its widest 64 (16 cycles an instruction,
// measured), and the read-out is vector work: both bound this kernel, not the bytes.
//
// Compiled alone with the AMX and AVX-512 flags (no templates of the standard library used
// here, so that no code for these instructions can stand in for another file's); run only
// where amx_int8_available() says the CPU and the kernel allow the tiles.
#include <immintrin.h>

#include <cstdint>

// (GCC 12's AVX-512 headers start some intrinsics' results from a self-initialized value,
// which it then warns of here, inlined at -O3.)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernel_impl.hpp"

namespace attnlab::kernels::amx {

namespace {

// Tiles 0 and 1: Σ q·h of a group for panels 0 and 1; 2 and 3: Σ q·l; 4 and 5: x's high and
// low parts; 6 and 7: the two panels' values.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

TileConfig config_for(std::size_t values) {
  TileConfig config;
  for (int t = 0; t < 4; ++t)
    config.rows[t] = 16, config.bytes_per_row[t] = 64;
  for (int t = 4; t < 6; ++t)
    config.rows[t] = 16, config.bytes_per_row[t] = std::uint16_t(values);
  for (int t = 6; t < 8; ++t)
    config.rows[t] = std::uint8_t(values / 4), config.bytes_per_row[t] = 64;
  return config;
}

constexpr std::size_t kPanel = 16, kPanels = 2;

// A group's sums as the tiles hold them: [h or l][panel][row of x][weight row].
using GroupSums = std::int32_t[2][kPanels][kTileRows][kPanel];

// One group's sums for a tile of x (its parts at hi and lo) by both panels' values at q
// (signed bytes: tdpbssd; unsigned: tdpbsud), stored to `sums`.
template <bool Signed>
inline void multiply(const std::int8_t* hi, const std::int8_t* lo, const std::uint8_t* q, std::size_t values,
                     GroupSums& sums) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, hi, values);
  _tile_loadd(5, lo, values);
  _tile_loadd(6, q, kPanels * 64);
  _tile_loadd(7, q + 64, kPanels * 64);
  if constexpr (Signed) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  } else {
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
  }
  _tile_stored(0, sums[0][0], 64);
  _tile_stored(1, sums[0][1], 64);
  _tile_stored(2, sums[1][0], 64);
  _tile_stored(3, sums[1][1], 64);
}

// acc[r] += a · s_r/256 · (256·Σ q·h + Σ q·l) − c · Σ x_r for the tile's 16 rows r, both
// panels (a and c: the group's factors of the 32 weight rows; scale and xsums: the 16 rows'
// s and Σ x over the group); signed values have no c.
template <bool Signed>
inline void read_out(const GroupSums& sums, const float* a, const float* c, const float* scale, const float* xsums,
                     float (&acc)[kTileRows][kPanels * kPanel]) {
#pragma GCC unroll 2
  for (std::size_t k = 0; k < kPanels; ++k) {
    const __m512 ak = _mm512_loadu_ps(a + k * kPanel), ck = _mm512_loadu_ps(c + k * kPanel);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTileRows; ++r) {
      const __m512i total =
          _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(sums[0][k][r]), 8), _mm512_load_si512(sums[1][k][r]));
      __m512 sum = _mm512_load_ps(&acc[r][k * kPanel]);
      sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(ak, _mm512_set1_ps(scale[r])), sum);
      if constexpr (!Signed) sum = _mm512_fnmadd_ps(ck, _mm512_set1_ps(xsums[r]), sum);
      _mm512_store_ps(&acc[r][k * kPanel], sum);
    }
  }
}

template <bool Signed>
void panels_by_tiles(const Int8PanelsView& p, const avx512::Int8Rows& x, std::size_t n, std::size_t values, float* y,
                     std::size_t ldy, std::size_t cols, float beta) {
  const std::size_t length = x.length, groups = length / values;
  const std::size_t tile_bytes = kTileRows * values, q_step = (values / 4) * kPanels * 64;
  const TileConfig config = config_for(values);
  _tile_loadconfig(&config);
  alignas(64) GroupSums sums[2];  // two groups' sums: one is read out while the next is made
  alignas(64) float acc[kTileRows][kPanels * kPanel];
  for (std::size_t i0 = 0; i0 < n; i0 += kTileRows) {                      // (x's rows are padded to whole tiles)
    const std::int8_t *hi = x.hi + i0 * length, *lo = x.lo + i0 * length;  // (in tile order)
    const float *scale = x.scale + i0 * (length / 32), *xsums = x.sums + i0 * groups;  // (in tile order)
    for (std::size_t r = 0; r < kTileRows; ++r)
      for (std::size_t k = 0; k < kPanels; ++k)
        _mm512_store_ps(&acc[r][k * kPanel], _mm512_setzero_ps());
    const auto read = [&](std::size_t g) {
      read_out<Signed>(sums[g % 2], p.a + g * kPanels * kPanel, p.c + g * kPanels * kPanel,
                       scale + g * values / 32 * kTileRows, xsums + g * kTileRows, acc);
    };
    for (std::size_t g = 0; g < groups; ++g) {
      multiply<Signed>(hi + g * tile_bytes, lo + g * tile_bytes, p.q + g * q_step, values, sums[g % 2]);
      if (g > 0) read(g - 1);
    }
    read(groups - 1);
    const std::size_t live_rows = n - i0 < kTileRows ? n - i0 : kTileRows;
    for (std::size_t k = 0; k < kPanels; ++k) {
      const std::size_t live = cols > k * kPanel ? (cols - k * kPanel < kPanel ? cols - k * kPanel : kPanel) : 0;
      const __mmask16 mask = __mmask16((1u << live) - 1);
      for (std::size_t r = 0; r < live_rows; ++r) {
        float* yr = y + (i0 + r) * ldy + k * kPanel;
        const __m512 sum = _mm512_load_ps(&acc[r][k * kPanel]);
        _mm512_mask_storeu_ps(
            yr, mask, beta == 0.0f ? sum : _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, yr), sum));
      }
    }
  }
  _tile_release();
}

}  // namespace

void int8_panels(const Int8PanelsView& p, const avx512::Int8Rows& x, std::size_t n, std::size_t values, float* y,
                 std::size_t ldy, std::size_t cols, float beta) {
  if (p.signed_values)
    panels_by_tiles<true>(p, x, n, values, y, ldy, cols, beta);
  else
    panels_by_tiles<false>(p, x, n, values, y, ldy, cols, beta);
}

}  // namespace attnlab::kernels::amx
