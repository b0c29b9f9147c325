// `attnlab bench`: the machine's own ceilings, then the kernels timed against them.
// Figures are a share of the peak measured in the same run, never absolute claims.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

struct MachinePeaks {
  int threads = 1;
  Isa isa = Isa::generic;
  double f32_gflops = 0;     // fused multiply-adds on every thread, 2 FLOPs each
  double bf16_gflops = 0;    // bf16 dot products (0 where the CPU has none)
  double amx_gflops = 0;     // AMX bf16 tile multiplies (0 where the CPU has none)
  double int8_gops = 0;      // int8 dot products, AVX-512 VNNI (0 where the CPU has none)
  double amx_int8_gops = 0;  // AMX int8 tile multiplies (0 where the CPU has none)
  double read_gbps = 0;      // streaming reads from a buffer far larger than the caches
  double clock_ghz = 0;      // a core's clock running scalar code (0 where not measured)
};
MachinePeaks measure_peaks(int threads);

struct BenchCase {
  std::string name;
  AttentionShape shape;  // for decode: heads, kv_heads, n = new tokens, m = cached tokens, d_k = d_v
  AttentionOptions options;
  KernelKind kernel = KernelKind::tiled;
  bool decode = false;  // new tokens against a KV cache of m tokens (flash_decode)
  DType cache_dtype = DType::f16;
};

struct BenchResult {
  BenchCase bench_case;
  bool ran = false;
  std::string skipped_because;      // why a case did not run (e.g. the grid would not fit)
  double median_seconds = 0;        // median of the timed runs, after one warm-up
  double gflops = 0;                // attention_flops / median_seconds
  double percent_of_peak = 0;       // of the f32 or bf16 peak, by the case's precision
  std::size_t extra_bytes = 0;      // peak heap bytes during a run beyond inputs and outputs
  double gbps = 0;                  // decode: cache bytes read / median_seconds
  double percent_of_bandwidth = 0;  // decode: of the measured read bandwidth
  double stream_gbps = 0;           // decode: reading the same cache bytes, nothing else (same run)
  double percent_of_stream = 0;     // decode: that read's time / the decode's time
  double bytes = 0;                 // decode: the cache's bytes, read once per step
  double roofline_seconds = 0;      // decode: the slower of reading them and the FLOPs at the f32 peak
};

// FLOPs of decoding shape.n new tokens against shape.m cached ones, every head: a multiply
// and an add per query number per cached key for the scores, and again for mixing values.
double decode_flops(const AttentionShape& shape);

// Times one case: one warm-up, then `repeats` runs; inputs are seeded random numbers.
BenchResult run_bench_case(const BenchCase& bench_case, const MachinePeaks& peaks, int repeats);

// The case list; `quick` keeps a subset that runs in about a minute.
std::vector<BenchCase> standard_bench_cases(bool quick);

}  // namespace attnlab
