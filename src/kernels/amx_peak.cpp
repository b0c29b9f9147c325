// AMX's ceiling (attnlab/kernels/peak.hpp): how fast this CPU's tile unit multiplies bf16,
// measured as the f32 and bf16 peaks are, from registers only. AMX is a matrix unit beside
// the vector registers: eight tile registers of up to 16 rows × 64 bytes, and one
// instruction, tdpbf16ps, that adds a [16 × 32] bf16 tile times a [32 × 16] bf16 tile into a
// [16 × 16] f32 tile: 16·16·32 = 8,192 multiply-adds. This file alone is compiled with
// -mamx-tile -mamx-bf16, and nothing in it runs unless the CPU and the kernel say AMX is there.
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "attnlab/kernels/peak.hpp"

namespace attnlab {

namespace {

// Linux keeps AMX's 8 KiB of tile state off until a process asks for it (arch_prctl).
constexpr int kArchRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
constexpr int kTileDataFeature = 18;            // XFEATURE_XTILEDATA

// Whether the CPU reports AMX-TILE and AMX-BF16 (CPUID leaf 7: EDX bits 24 and 22) and the
// operating system saves tile state (XCR0 bits 17 and 18).
bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 22))) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: xgetbv is allowed
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);
}

// A tile configuration: palette 1, every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

// `iterations` rounds of four tile multiplies on this thread: tiles 4, 5 (A) by 6, 7 (B) into
// the accumulators 0 to 3, every input 1.0. Returns accumulator 0's first value, which must
// come out as 32 · iterations (exact while that stays below 2^24).
float tile_rounds(long iterations) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  alignas(64) std::uint16_t one_tile[16 * 32];
  for (std::uint16_t& v : one_tile)
    v = 0x3f80;  // bf16 1.0
  _tile_loadd(4, one_tile, 64);
  _tile_loadd(5, one_tile, 64);
  _tile_loadd(6, one_tile, 64);
  _tile_loadd(7, one_tile, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

}  // namespace

bool amx_bf16_available() {
  static const bool available = [] {
    if (!cpu_has_amx_bf16()) return false;
    return syscall(SYS_arch_prctl, kArchRequestPermission, kTileDataFeature) == 0;
  }();
  return available;
}

double amx_bf16_peak_gflops(int threads, long iterations) {
  if (!amx_bf16_available() || iterations <= 0) return 0;
  // First a short run whose sum is known: a unit that computes wrong is no peak.
  if (tile_rounds(1000) != 32.0f * 1000) return 0;
  bool right = true;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(&& : right)
  right = tile_rounds(iterations) > 0;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!right) return 0;
  const double flops = 2.0 * 4 * 16 * 16 * 32 * double(iterations) * threads;
  return flops / seconds / 1e9;
}

}  // namespace attnlab
