// Vector helpers shared by the per-instruction-set kernel files (flash_tiles.cpp,
// decode_tiles.cpp): GCC vector types of 16 floats, which the compiler maps onto whatever
// registers the target has, loads, stores, broadcasts and a vector 2^x.
#pragma once
#include <cstddef>
#include <cstring>
#include <limits>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#ifndef ATTNLAB_ISA
#error "compile with -DATTNLAB_ISA=<namespace>"
#endif

// Lanes picked by constant indices: from `a` (0..W-1), or from `a` then `b` (W..2W-1).
// GCC spells it __builtin_shuffle with an index vector, clang __builtin_shufflevector with
// the indices as arguments (the fuzz build compiles the kernels with clang).
#if defined(__clang__)
#define ATTNLAB_SHUFFLE(a, ...) __builtin_shufflevector(a, a, __VA_ARGS__)
#define ATTNLAB_SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define ATTNLAB_SHUFFLE(a, ...) __builtin_shuffle(a, VI{__VA_ARGS__})
#define ATTNLAB_SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, VI{__VA_ARGS__})
#endif

namespace attnlab::kernels::ATTNLAB_ISA {
namespace {

constexpr int W = 16;  // floats per vector
typedef float VF __attribute__((vector_size(W * sizeof(float))));
typedef int VI __attribute__((vector_size(W * sizeof(int))));
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

}  // namespace
}  // namespace attnlab::kernels::ATTNLAB_ISA
