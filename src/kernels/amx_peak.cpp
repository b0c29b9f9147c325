// AMX's ceiling (attnlab/kernels/peak.hpp): how fast this CPU's tile unit multiplies bf16,
// measured as the f32 and bf16 peaks are, from registers only. AMX is a matrix unit beside
// the vector registers: eight tile registers of up to 16 rows × 64 bytes, and one
// instruction, tdpbf16ps, that adds a [16 × 32] bf16 tile times a [32 × 16] bf16 tile into a
// [16 × 16] f32 tile: 16·16·32 = 8,192 multiply-adds; tdpbusd does the same with u8 · s8
// bytes into int32, 16·16·64 = 16,384. This file alone is compiled with -mamx-tile -mamx-bf16
// -mamx-int8, and nothing in it runs unless the CPU and the kernel say AMX is there.
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "attnlab/kernels/peak.hpp"

namespace attnlab {

namespace {

// Linux keeps AMX's 8 KiB of tile state off until a process asks for it (arch_prctl).
constexpr int kArchRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
constexpr int kTileDataFeature = 18;            // XFEATURE_XTILEDATA

// Whether the CPU reports AMX-TILE and the unit at CPUID leaf 7's EDX bit `unit_bit` (22:
// AMX-BF16, 25: AMX-INT8), and the operating system saves tile state (XCR0 bits 17 and 18).
bool cpu_has_amx(unsigned unit_bit) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << unit_bit))) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: xgetbv is allowed
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);
}

// The tiles' state for this process, asked of the kernel once.
bool tiles_granted() {
  static const bool granted = syscall(SYS_arch_prctl, kArchRequestPermission, kTileDataFeature) == 0;
  return granted;
}

// A tile configuration: palette 1, every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

enum class TileUnit { bf16, int8 };

// `iterations` rounds of four tile multiplies on this thread: tiles 4, 5 (A) by 6, 7 (B) into
// the accumulators 0 to 3, every input 1 (bf16 1.0, or the byte 1). Returns accumulator 0's
// first value, which must come out as 32 · iterations (bf16: 32 products an element a
// multiply; exact while below 2^24) or 64 · iterations (int8: 64; exact below 2^31).
double tile_rounds(TileUnit unit, long iterations) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  alignas(64) std::uint8_t one_tile[16 * 64];
  for (std::size_t i = 0; i < sizeof one_tile; i += 2) {
    one_tile[i] = unit == TileUnit::bf16 ? 0x80 : 1;  // bf16 1.0 is 0x3f80, little-endian
    one_tile[i + 1] = unit == TileUnit::bf16 ? 0x3f : 1;
  }
  _tile_loadd(4, one_tile, 64);
  _tile_loadd(5, one_tile, 64);
  _tile_loadd(6, one_tile, 64);
  _tile_loadd(7, one_tile, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  if (unit == TileUnit::bf16)
    for (long i = 0; i < iterations; ++i) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  else
    for (long i = 0; i < iterations; ++i) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  alignas(64) std::uint32_t out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  if (unit == TileUnit::int8) return double(std::int32_t(out[0]));
  float first;
  std::memcpy(&first, out, sizeof first);
  return first;
}

// Operations a second of `unit`'s tile multiplies on `threads` threads: 0 where a short run's
// known sum, or any thread's, came out wrong.
double tile_peak(TileUnit unit, int threads, long iterations) {
  const double per_product = unit == TileUnit::bf16 ? 32 : 64;  // multiply-adds an output element a multiply
  if (iterations <= 0 || tile_rounds(unit, 1000) != per_product * 1000) return 0;
  bool right = true;
  const auto start = std::chrono::steady_clock::now();
  // The long run's sum: exact in int32 (below 2^31); in f32 only while below 2^24, so positive.
#pragma omp parallel num_threads(threads) reduction(&& : right)
  {
    const double sum = tile_rounds(unit, iterations);
    right = unit == TileUnit::int8 ? sum == per_product * double(iterations) : sum > 0;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!right) return 0;
  const double ops = 2.0 * 4 * 16 * 16 * per_product * double(iterations) * threads;
  return ops / seconds / 1e9;
}

}  // namespace

bool amx_bf16_available() {
  static const bool available = cpu_has_amx(22) && tiles_granted();
  return available;
}

bool amx_int8_available() {
  static const bool available = cpu_has_amx(25) && tiles_granted();
  return available;
}

double amx_bf16_peak_gflops(int threads, long iterations) {
  return amx_bf16_available() ? tile_peak(TileUnit::bf16, threads, iterations) : 0;
}

double amx_int8_peak_gops(int threads, long iterations) {
  return amx_int8_available() ? tile_peak(TileUnit::int8, threads, iterations) : 0;
}

}  // namespace attnlab
