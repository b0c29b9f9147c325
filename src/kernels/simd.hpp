// Vector helpers shared by the per-instruction-set kernel files (flash_tiles.cpp,
// decode_tiles.cpp, matvec_tiles.cpp): GCC vector types of W floats, one register of the
// target (16 with AVX-512, 8 with AVX2, 4 with SSE2), loads (of f32, f16 and bf16 values,
// widened in registers), stores, broadcasts, lane shuffles and reductions and a vector 2^x.
//
// W is the register's width, not a fixed 16: a GCC vector wider than the target's registers
// has no machine mode, and GCC 12 keeps every such variable on the stack (a load and a store
// around each operation). With 16 floats on AVX2 the decode kernel read its cache at 4% of
// the memory bandwidth and the prefill ran at 6% of the f32 peak (docs/performance.md).
#pragma once
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "attnlab/core/dtype.hpp"

#ifndef ATTNLAB_ISA
#error "compile with -DATTNLAB_ISA=<namespace>"
#endif

namespace attnlab::kernels::ATTNLAB_ISA {
namespace {

#if defined(__AVX512F__)
constexpr int W = 16;  // floats per vector: one register
#elif defined(__AVX__)
constexpr int W = 8;
#else
constexpr int W = 4;
#endif
typedef float VF __attribute__((vector_size(W * sizeof(float))));
typedef int VI __attribute__((vector_size(W * sizeof(int))));
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// The lanes of `a` then `b` (0..W-1 from a, W..2W-1 from b) picked by Pattern::at(l) for
// each lane l of the result, a compile-time index. GCC spells it __builtin_shuffle with an
// index vector, clang __builtin_shufflevector with the indices as arguments (the fuzz build
// compiles the kernels with clang).
template <class Pattern, std::size_t... L>
inline VF shuffle(VF a, VF b, std::index_sequence<L...>) {
#if defined(__clang__)
  return __builtin_shufflevector(a, b, Pattern::at(static_cast<int>(L))...);
#else
  return __builtin_shuffle(a, b, VI{Pattern::at(static_cast<int>(L))...});
#endif
}
template <class Pattern>
inline VF shuffle(VF a, VF b) {
  return shuffle<Pattern>(a, b, std::make_index_sequence<W>{});
}
template <int S>
struct SwapBy {  // lane l ^ S of a: neighbours S apart trade places
  static constexpr int at(int l) { return l ^ S; }
};
// Of two vectors each holding groups of 2H lanes, the first H lanes of each group (Low) or
// the last H (High), a's groups first: lane l comes from group l / H of the two vectors'
// groups in turn. With H = 1 these are the even and the odd lanes of a then b.
template <int H>
struct Low {
  static constexpr int at(int l) { return l / H * 2 * H + l % H; }
};
template <int H>
struct High {
  static constexpr int at(int l) { return Low<H>::at(l) + H; }
};

inline VF load(const float* p) {
  VF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, VF v) { std::memcpy(p, &v, sizeof v); }
// All lanes = x. (Not VF{} + x: that costs an add, since 0 + x differs from x for -0.)
inline VF splat(float x) {
  return [x]<std::size_t... L>(std::index_sequence<L...>) { return VF{((void)L, x)...}; }
  (std::make_index_sequence<W>{});
}
// 0, 1, ..., W - 1.
inline VI lane_numbers() {
  return []<std::size_t... L>(std::index_sequence<L...>) { return VI{static_cast<int>(L)...}; }
  (std::make_index_sequence<W>{});
}
inline std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// 2^x for x <= 0 (and -inf): Cephes' exp2f polynomial on [-0.5, 0.5] (within 2e-9 of
// 2^f; evaluated in f32, within 1e-7 relative), scaled by 2^round(x). x < -126 gives
// exactly 0 (never a subnormal, which would slow every multiply it meets).
inline VF exp2_poly(VF f) {  // 2^f for f in [-0.5, 0.5]
  VF p = splat(1.535336188319500e-4f);
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  return p * f + 1.0f;
}
#if defined(__AVX512F__)
// AVX-512: rounding and scaling are one instruction each (vrndscaleps, vscalefps), and the
// zeroing of x < -126 rides on the scaling's mask: 11 instructions instead of 16.
inline VF exp2_vec(VF x) {
  __m512 v;
  std::memcpy(&v, &x, sizeof v);
  // -inf would make f NaN; max(-127, NaN) keeps the NaN (vmaxps returns its second operand).
  const __m512 clamped = _mm512_max_ps(_mm512_set1_ps(-127.0f), v);
  const __m512 rounded = _mm512_roundscale_ps(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  VF f;
  const __m512 f_ps = _mm512_sub_ps(clamped, rounded);
  std::memcpy(&f, &f_ps, sizeof f);
  const VF p = exp2_poly(f);
  __m512 p_ps;
  std::memcpy(&p_ps, &p, sizeof p_ps);
  const __mmask16 normal = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ);  // NaN stays NaN
  const __m512 result = _mm512_maskz_scalef_ps(normal, p_ps, rounded);
  VF out;
  std::memcpy(&out, &result, sizeof out);
  return out;
}
#else
inline VF exp2_vec(VF x) {
  const VF clamped = x < -126.0f ? splat(-126.0f) : x;
  const VF shifter = splat(12582912.0f);  // 1.5·2^23: adding it rounds to an integer
  const VF rounded = (clamped + shifter) - shifter;
  const VF p = exp2_poly(clamped - rounded);
  const VI exponent = __builtin_convertvector(rounded, VI) << 23;
  VI bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += exponent;
  VF result;
  std::memcpy(&result, &bits, sizeof result);
  return x < -126.0f ? splat(0.0f) : result;
}
#endif

// `op` (add, max) over the W lanes, halving the distance each step; every lane ends up
// holding the result.
template <int S = W / 2, class Op>
inline VF all_lanes(VF v, Op op) {
  v = op(v, shuffle<SwapBy<S>>(v, v));
  if constexpr (S > 1) return all_lanes<S / 2>(v, op);
  return v;
}
constexpr auto max_vec = [](VF a, VF b) -> VF { return a > b ? a : b; };  // objects, not functions: inlined
constexpr auto add_vec = [](VF a, VF b) -> VF { return a + b; };

template <class From>
inline VF bit_cast_vf(const From& x) {
  static_assert(sizeof(From) == sizeof(VF));
  VF out;
  std::memcpy(&out, &x, sizeof out);
  return out;
}

// GCC 12's own _mm512_cvtph_ps trips its -Wmaybe-uninitialized; the code here is fine.
// (Clang has no such warning, and would warn about the unknown name.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Values c..c+W-1 of `row` (stored as `dtype`) as floats, converted in registers.
template <DType dtype>
inline VF load_as_f32(const void* row, std::size_t c) {
  if constexpr (dtype == DType::f32) {
    return load(static_cast<const float*>(row) + c);
  } else {
    const std::uint16_t* p = static_cast<const std::uint16_t*>(row) + c;
#if defined(__AVX512F__)
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (dtype == DType::f16) return bit_cast_vf(_mm512_cvtph_ps(half));
    return bit_cast_vf(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));  // bf16: the top half of an f32
#elif defined(__AVX2__) && defined(__F16C__)
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (dtype == DType::f16) return bit_cast_vf(_mm256_cvtph_ps(half));
    return bit_cast_vf(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16)));
#else
    VF out;
    for (int l = 0; l < W; ++l)
      out[l] = dtype == DType::f16 ? f16_to_f32(p[l]) : bf16_to_f32(p[l]);
    return out;
#endif
  }
}
#pragma GCC diagnostic pop

// The last `n` < W values of a row from column c, zero padded (never reads past the
// row): copied raw into a zeroed vector's worth of storage first, so no call is made and
// the compiler can keep every accumulator in registers around it.
template <DType dtype>
inline VF load_tail(const void* row, std::size_t c, std::size_t n) {
  using Raw = std::conditional_t<dtype == DType::f32, float, std::uint16_t>;
  Raw raw[W] = {};
  for (std::size_t l = 0; l < n; ++l)
    raw[l] = static_cast<const Raw*>(row)[c + l];
  return load_as_f32<dtype>(raw, 0);
}

}  // namespace
}  // namespace attnlab::kernels::ATTNLAB_ISA
