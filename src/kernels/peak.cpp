// The machine's own ceilings, measured with the same compiler and instruction set the
// kernels use: fused multiply-add throughput (f32), bf16 and int8 dot-product throughput.
// Compiled once per instruction set next to flash_tiles.cpp.
#include <omp.h>

#include <chrono>
#include <cstring>

#include "kernel_impl.hpp"
#include "simd.hpp"

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {
constexpr int kChains = 12;  // independent accumulators: enough to cover FMA latency

// The probe's vector: the ISA's own register (__m512, __m256), written with intrinsics so that
// nothing but the FMAs is measured. (When the kernels' VF was 16 floats on every ISA, GCC kept
// an AVX2 build's 12 of them on the stack, each FMA a load and a store, and the "peak"
// measured a tenth of what the products then reached.)
#if defined(__AVX512F__)
using Reg = __m512;
constexpr int kRegFloats = 16;
inline Reg reg_splat(float x) { return _mm512_set1_ps(x); }
inline Reg reg_fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
inline float reg_first(Reg a) { return _mm512_cvtss_f32(a); }
#elif defined(__FMA__)
using Reg = __m256;
constexpr int kRegFloats = 8;
inline Reg reg_splat(float x) { return _mm256_set1_ps(x); }
inline Reg reg_fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
inline float reg_first(Reg a) { return _mm256_cvtss_f32(a); }
#else
using Reg = VF;
constexpr int kRegFloats = W;
inline Reg reg_splat(float x) { return VF{} + x; }
inline Reg reg_fma(Reg a, Reg b, Reg c) { return a * b + c; }
inline float reg_first(Reg a) { return a[0]; }
#endif

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

double fma_peak_gflops(int threads, long iterations) {
  double total_flops = 0, elapsed = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total_flops)
  {
    Reg acc[kChains];
    for (int c = 0; c < kChains; ++c)
      acc[c] = reg_splat(1.0f + c * 1e-3f);
    const Reg a = reg_splat(0.999999f), b = reg_splat(1e-7f);
    for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 12
      for (int c = 0; c < kChains; ++c)
        acc[c] = reg_fma(acc[c], a, b);
    float sink = 0;
    for (int c = 0; c < kChains; ++c)
      sink += reg_first(acc[c]);
    volatile float keep = sink;
    (void)keep;
    total_flops += 2.0 * kRegFloats * kChains * iterations;
  }
  elapsed = seconds_since(start);
  return total_flops / elapsed / 1e9;
}

double bf16_peak_gflops(int threads, long iterations) {
#if defined(ATTNLAB_HAS_BF16)
  double total_flops = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total_flops)
  {
    __m512 acc[kChains];
    for (int c = 0; c < kChains; ++c)
      acc[c] = _mm512_set1_ps(1.0f + c);
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);
    for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 12
      for (int c = 0; c < kChains; ++c)
        acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
    float sink = 0;
    for (int c = 0; c < kChains; ++c) {
      float lanes[W];
      _mm512_storeu_ps(lanes, acc[c]);
      sink += lanes[0];
    }
    volatile float keep = sink;
    (void)keep;
    total_flops += 4.0 * W * kChains * iterations;  // each lane: two multiplies and two adds
  }
  return total_flops / seconds_since(start) / 1e9;
#else
  (void)threads;
  (void)iterations;
  return 0.0;
#endif
}

double int8_peak_gops(int threads, long iterations) {
#if defined(ATTNLAB_HAS_BF16)  // the AVX-512 build, compiled with -mavx512vnni as well
  double total_ops = 0;
  bool right = true;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total_ops) reduction(&& : right)
  {
    __m512i acc[kChains];
    for (int c = 0; c < kChains; ++c)
      acc[c] = _mm512_setzero_si512();
    const __m512i ones = _mm512_set1_epi8(1);
    for (long it = 0; it < iterations; ++it)
#pragma GCC unroll 12
      for (int c = 0; c < kChains; ++c)
        acc[c] = _mm512_dpbusd_epi32(acc[c], ones, ones);  // each int32 lane += 4 products of u8 · s8
    // Each chain's first lane must hold 4 · iterations: a unit that computes wrong is no peak.
    for (int c = 0; c < kChains; ++c)
      right = right && _mm_cvtsi128_si32(_mm512_castsi512_si128(acc[c])) == int(4 * iterations);
    total_ops += 2.0 * 64 * kChains * iterations;  // 64 multiply-adds an instruction, 2 operations each
  }
  const double seconds = seconds_since(start);
  return right ? total_ops / seconds / 1e9 : 0.0;
#else
  (void)threads;
  (void)iterations;
  return 0.0;
#endif
}

}  // namespace attnlab::kernels::ATTNLAB_ISA

namespace attnlab::kernels::ATTNLAB_ISA {

double read_bandwidth_gbps(int threads, const float* data, std::size_t count, int passes) {
  const auto start = std::chrono::steady_clock::now();
  float total = 0;
  for (int pass = 0; pass < passes; ++pass) {
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (std::size_t block = 0; block < count / (4 * W); ++block) {
      const float* p = data + block * 4 * W;
      VF a, b, c, d;
      std::memcpy(&a, p, sizeof a);
      std::memcpy(&b, p + W, sizeof b);
      std::memcpy(&c, p + 2 * W, sizeof c);
      std::memcpy(&d, p + 3 * W, sizeof d);
      const VF s = (a + b) + (c + d);
      total += s[0] + s[W - 1];
    }
  }
  const double seconds = seconds_since(start);
  volatile float keep = total;
  (void)keep;
  return static_cast<double>(count / (4 * W) * 4 * W) * sizeof(float) * passes / seconds / 1e9;
}

// Reads `bytes` at `data` (whole vectors, then the rest byte by byte) and returns a sum, so
// the compiler cannot drop the reads.
float read_bytes(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  VF a = VF{}, b = VF{};
  std::size_t i = 0;
  for (; i + 2 * sizeof(VF) <= bytes; i += 2 * sizeof(VF)) {
    VF x, y;
    std::memcpy(&x, p + i, sizeof x);
    std::memcpy(&y, p + i + sizeof x, sizeof y);
    a += x;
    b += y;
  }
  float rest = 0;
  for (; i < bytes; ++i)
    rest += static_cast<unsigned char>(p[i]);
  const VF s = a + b;
  return s[0] + s[W - 1] + rest;
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
