// The machine's limits, measured: what a core's FMA units, its bf16 dot products and its
// memory system can do at best. Benchmarks state every kernel as a share of these, measured
// in the same run (a machine shared with others changes from minute to minute).
#pragma once
#include <cstddef>
#include <span>

#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

// GFLOP/s of independent fused multiply-adds (2 FLOPs each) on `threads` threads with the
// vectors of `isa`, over `iterations` steps per thread.
double fma_peak_gflops(Isa isa, int threads, long iterations);

// GFLOP/s of bf16 dot products (AVX-512 BF16); 0 where the CPU or the build has none.
double bf16_peak_gflops(int threads, long iterations);

// GOP/s of int8 dot products (AVX-512 VNNI's vpdpbusd: 64 multiply-adds of u8 · s8 into
// int32 an instruction, 2 operations each), the unit a Q8_0 or K-quant prompt's products run on
// (matvec.hpp's int8_gemm); 0 where the CPU or the build has none, or where the probe's known
// sums came out wrong (exact in int32 for up to 2^29 iterations).
double int8_peak_gops(int threads, long iterations);

// Whether this CPU has AMX tiles with bf16 multiplies (amx_tile and amx_bf16), or with int8
// multiplies (amx_tile and amx_int8), and the operating system has let this process use the
// tiles (asked once, on the first call).
bool amx_bf16_available();
bool amx_int8_available();

// GFLOP/s of AMX bf16 tile multiplies (tdpbf16ps on four accumulators) on `threads` threads,
// `iterations` rounds each; 0 where amx_bf16_available() is false, or where a short run's
// known sum came out wrong. amx_int8_peak_gops: the same for int8 (tdpbusd, 16·16·64
// multiply-adds an instruction), in GOP/s, its sums exact for up to 2^25 iterations.
double amx_bf16_peak_gflops(int threads, long iterations);
double amx_int8_peak_gops(int threads, long iterations);

// The clock a core runs at, in GHz: a chain of dependent integer adds (one cycle each) timed
// on each of `threads` threads at once, `iterations` rounds of eight, averaged over the
// threads; 0 where the build has no such chain (not x86-64). Under AVX-512 or AMX work a core
// may run slower than this.
double core_clock_ghz(int threads, long iterations);

// GB/s of streaming reads of `count` floats at `data` (`passes` times) on `threads` threads.
double read_bandwidth_gbps(Isa isa, int threads, const float* data, std::size_t count, int passes);

// Seconds to read every byte of `ranges` once on `threads` threads (pieces of 64 KiB taken
// in turn, as the decode kernel takes its chunks): the floor for any kernel that must read
// the same bytes, measured where they are (a KV cache that fits in the last-level cache
// streams faster than one that comes from memory).
struct ByteRange {
  const void* data;
  std::size_t bytes;
};
double stream_read_seconds(Isa isa, int threads, std::span<const ByteRange> ranges);

}  // namespace attnlab
