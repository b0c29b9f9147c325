// Bit-exact f32 <-> f16 and f32 <-> bf16 conversions, round to nearest even. Each branch
// names the range of values it handles; docs: include/attnlab/core/dtype.hpp.
#include "attnlab/core/dtype.hpp"

#include <fmt/format.h>
#include <bit>
#include <cassert>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "attnlab/core/error.hpp"

namespace attnlab {

std::size_t dtype_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

double dtype_unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f32: return 0x1.0p-24;
    case DType::f16: return 0x1.0p-11;
    case DType::bf16: return 0x1.0p-8;
  }
  return 1.0;
}

DType parse_dtype(std::string_view text, std::string_view field) {
  if (text == "f32" || text == "fp32" || text == "float32") return DType::f32;
  if (text == "f16" || text == "fp16" || text == "float16" || text == "half") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  fail(field, fmt::format("unknown dtype \"{}\"; use f32 (4 bytes), f16 (2 bytes) or bf16 (2 bytes)", text));
}

std::uint16_t f32_to_f16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;

  // NaN: keep it a NaN (quiet bit set, top 9 payload bits kept); inf stays inf.
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x1ffu));
  // At or above 65520 (halfway between 65504, the largest f16, and 65536): rounds to inf.
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);

  // Normal f16 range, |x| >= 2^-14: rebias the exponent (127 -> 15), keep the top 10 of
  // the 23 mantissa bits, round on the 13 dropped ones. A carry out of the mantissa bumps
  // the exponent, which is the right answer (e.g. 2047.9 -> 2048).
  if (magnitude >= 0x38800000u) {
    std::uint32_t h = ((magnitude >> 23) - 127 + 15) << 10 | ((magnitude >> 13) & 0x3ffu);
    const std::uint32_t dropped = magnitude & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }

  // Subnormal f16 range: the result is m · 2^-24 with m in 0..1024. At or below 2^-25
  // (half the smallest subnormal; the tie goes to the even 0) the result is ±0.
  if (magnitude <= 0x33000000u) return static_cast<std::uint16_t>(sign);
  // x = (1.mantissa) · 2^(e-127) = full · 2^(e-150) with full = mantissa | 2^23, so
  // m = full · 2^(e-126) = full >> (126 - e); here 102 < e < 113, a shift of 14..24.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t full = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;
  std::uint32_t h = full >> shift;
  const std::uint32_t dropped = full & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (h & 1u))) ++h;  // m = 1024 is 2^-14, the smallest normal
  return static_cast<std::uint16_t>(sign | h);
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f)  // inf, or NaN made quiet
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
  // ±0 and subnormals: mantissa · 2^-24, exact in f32.
  const float magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
  return sign ? -magnitude : magnitude;
}

std::uint16_t f32_to_bf16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  // NaN: keep the sign and top payload bits, set the quiet bit so it cannot become inf.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  // Everything else, subnormals and overflow to inf included: bf16 is the top half of an
  // f32, so round the bottom 16 bits to nearest, ties to the even top half.
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_to_f32(std::uint16_t bits) {
  std::uint32_t f = static_cast<std::uint32_t>(bits) << 16;
  if ((f & 0x7fffffffu) > 0x7f800000u) f |= 0x400000u;  // a NaN comes back quiet
  return std::bit_cast<float>(f);
}

void f16_to_f32(std::span<const std::uint16_t> in, std::span<float> out) {
  assert(in.size() == out.size());
  std::size_t i = 0;
#if defined(__F16C__)
  // vcvtph2ps: exact, subnormals included; a signalling NaN comes back quiet, as above.
  for (; i + 8 <= in.size(); i += 8)
    _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i))));
#endif
  for (; i < in.size(); ++i)
    out[i] = f16_to_f32(in[i]);
}

void bf16_to_f32(std::span<const std::uint16_t> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    out[i] = bf16_to_f32(in[i]);
}

void f32_to_f16(std::span<const float> in, std::span<std::uint16_t> out) {
  assert(in.size() == out.size());
  std::size_t i = 0;
#if defined(__F16C__)
  // vcvtps2ph with round-to-nearest-even: the same bits as f32_to_f16, NaNs included.
  for (; i + 8 <= in.size(); i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in.data() + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < in.size(); ++i)
    out[i] = f32_to_f16(in[i]);
}

void f32_to_bf16(std::span<const float> in, std::span<std::uint16_t> out) {
  assert(in.size() == out.size());
  std::size_t i = 0;
#if defined(__AVX512F__)
  // g++ 12 warns of the undefined vectors its own intrinsics start masked shifts from.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  // The scalar rounding, 16 lanes at a time in integer arithmetic (not vcvtneps2bf16, which
  // flushes subnormal inputs to zero): the same bits as f32_to_bf16, NaNs included.
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= in.size(); i += 16) {
    const __m512i bits = _mm512_castps_si512(_mm512_loadu_ps(in.data() + i));
    const __m512i top = _mm512_srli_epi32(bits, 16);
    const __m512i rounding = _mm512_add_epi32(half, _mm512_and_si512(top, one));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, rounding), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), infinity);
    rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(top, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.data() + i), _mm512_cvtepi32_epi16(rounded));
  }
#pragma GCC diagnostic pop
#endif
  for (; i < in.size(); ++i)
    out[i] = f32_to_bf16(in[i]);
}

void f16_to_bf16(std::span<const std::uint16_t> in, std::span<std::uint16_t> out) {
  assert(in.size() == out.size());
  std::size_t i = 0;
#if defined(__AVX512BF16__)
  // vcvtph2ps, then vcvtneps2bf16 (round to nearest even, a NaN quiet): the latter treats a
  // subnormal f32 as 0, but an f16 widens to a normal f32 or ±0, inf, NaN, never to a
  // subnormal (the least f16, 2^-24, is far above f32's 2^-126). So the same bits as the two
  // scalar conversions, in three instructions a 16 values instead of some fifteen.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as above
  for (; i + 16 <= in.size(); i += 16) {
    const __m512 wide = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.data() + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.data() + i), std::bit_cast<__m256i>(_mm512_cvtneps_pbh(wide)));
  }
#pragma GCC diagnostic pop
#endif
  for (; i < in.size(); ++i)
    out[i] = f32_to_bf16(f16_to_f32(in[i]));
}

}  // namespace attnlab
