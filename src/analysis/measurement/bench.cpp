// Benchmark cases and timing. Each case allocates its inputs, runs once to warm up, then
// takes the median of several runs; peak extra memory comes from the counting allocator.
#include "attnlab/analysis/bench.hpp"

#include <omp.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>

#include "attnlab/analysis/memory.hpp"
#include "attnlab/core/kv_cache.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_decode.hpp"
#include "attnlab/kernels/peak.hpp"

namespace attnlab {

namespace {

std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> x(count);
  for (float& v : x)
    v = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return x;
}

// Bytes the reference kernel's grids take for one head: scores, scaled, logits,
// exponentials, weights (n × m doubles each) plus the projections.
double reference_grid_bytes(const AttentionShape& s) { return 5.0 * s.n * s.m * sizeof(double); }

}  // namespace

double decode_flops(const AttentionShape& s) { return 4.0 * s.n * s.heads * s.m * s.d_k; }

MachinePeaks measure_peaks(int threads) {
  MachinePeaks p;
  p.threads = threads > 0 ? threads : omp_get_max_threads();
  p.isa = best_isa();
  // Best of three short runs, each long enough (~0.2 s) to reach a steady clock.
  for (int trial = 0; trial < 3; ++trial) {
    p.f32_gflops = std::max(p.f32_gflops, fma_peak_gflops(p.isa, p.threads, 50'000'000));
    if (p.isa == Isa::avx512_bf16) p.bf16_gflops = std::max(p.bf16_gflops, bf16_peak_gflops(p.threads, 50'000'000));
    if (amx_bf16_available()) p.amx_gflops = std::max(p.amx_gflops, amx_bf16_peak_gflops(p.threads, 2'000'000));
    if (p.isa == Isa::avx512_bf16) p.int8_gops = std::max(p.int8_gops, int8_peak_gops(p.threads, 50'000'000));
    if (amx_int8_available()) p.amx_int8_gops = std::max(p.amx_int8_gops, amx_int8_peak_gops(p.threads, 2'000'000));
  }
  for (int trial = 0; trial < 3; ++trial)  // (~0.1 s each at 3 GHz)
    p.clock_ghz = std::max(p.clock_ghz, core_clock_ghz(p.threads, 40'000'000));
  const std::vector<float> big = random_floats((512u << 20) / sizeof(float), 1);  // 512 MiB, far beyond L3
  const Isa isa = p.isa;
  for (int trial = 0; trial < 3; ++trial) {
    const double gbps = read_bandwidth_gbps(isa, p.threads, big.data(), big.size(), 2);
    p.read_gbps = std::max(p.read_gbps, gbps);
  }
  return p;
}

namespace {

// Decoding n new tokens against a cache of m tokens, timed like prefill; the figure of merit
// is the cache's bytes read per second.
BenchResult run_decode_case(const BenchCase& c, const MachinePeaks& peaks, int repeats) {
  BenchResult r{c};
  const AttentionShape& s = c.shape;
  KVCache cache(1, s.kv_heads, s.d_k, c.cache_dtype);
  cache.reserve(s.m);
  const std::vector<float> row = random_floats(s.kv_heads * s.d_k * 64, 5);
  for (std::size_t t = 0; t < s.m; ++t) {
    const std::span<const float> kv(row.data() + (t % 63) * s.kv_heads * s.d_k, s.kv_heads * s.d_k);
    cache.append(0, kv, kv);
  }
  const auto q = random_floats(s.n * s.heads * s.d_k, 6);
  std::vector<float> out(q.size());
  DecodeOptions options;
  options.threads = peaks.threads;
  // The warm-up run's peak heap growth is the kernel's extra memory (it keeps its scratch
  // per thread between calls, so later runs allocate nothing).
  memory::reset_peak();
  const std::size_t before = memory::current_bytes();
  flash_decode(cache, 0, s.heads, q, s.n, out, options);
  r.extra_bytes = memory::peak_bytes() - before;
  // The roofline beside it: the same bytes read and nothing else, timed in turn with the
  // decode so both see the same machine (and the same caches: a small cache stays hot).
  std::vector<ByteRange> ranges;
  const std::size_t array_bytes = s.m * s.d_k * dtype_bytes(c.cache_dtype);
  for (std::size_t g = 0; g < s.kv_heads; ++g) {
    ranges.push_back({cache.keys(0, g), array_bytes});
    ranges.push_back({cache.values(0, g), array_bytes});
  }
  std::vector<double> times, stream_times;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    flash_decode(cache, 0, s.heads, q, s.n, out, options);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    stream_times.push_back(stream_read_seconds(peaks.isa, peaks.threads, ranges));
  }
  std::sort(times.begin(), times.end());
  std::sort(stream_times.begin(), stream_times.end());
  r.ran = true;
  r.median_seconds = times[times.size() / 2];
  r.gflops = decode_flops(s) / r.median_seconds / 1e9;
  r.percent_of_peak = 100.0 * r.gflops / peaks.f32_gflops;
  r.bytes = static_cast<double>(cache.used_bytes());
  r.gbps = r.bytes / r.median_seconds / 1e9;
  r.stream_gbps = r.bytes / stream_times[stream_times.size() / 2] / 1e9;
  r.percent_of_stream = 100.0 * r.gbps / r.stream_gbps;
  // Several queries per KV head (grouped heads, several new tokens) do more arithmetic per
  // byte: past about 2·(peak / bandwidth) multiply-adds a byte the FLOPs are the floor.
  r.roofline_seconds = std::max(r.bytes / (r.stream_gbps * 1e9), decode_flops(s) / (peaks.f32_gflops * 1e9));
  r.percent_of_bandwidth = 100.0 * r.gbps / peaks.read_gbps;
  return r;
}

}  // namespace

BenchResult run_bench_case(const BenchCase& c, const MachinePeaks& peaks, int repeats) {
  if (c.decode) return run_decode_case(c, peaks, repeats);
  BenchResult r{c};
  const AttentionShape& s = c.shape;
  if (c.kernel == KernelKind::reference && reference_grid_bytes(s) > 4.0 * (1u << 30)) {
    r.skipped_because =
        fmt::format("the materialised grid would need {:.1f} GiB per head", reference_grid_bytes(s) / (1u << 30));
    return r;
  }
  const auto q = random_floats(s.heads * s.n * s.d_k, 2), k = random_floats(s.kv_heads * s.m * s.d_k, 3),
             v = random_floats(s.kv_heads * s.m * s.d_v, 4);
  std::vector<float> out(s.heads * s.n * s.d_v);
  AttentionOptions options = c.options;
  options.threads = peaks.threads;

  run_attention_kernel(c.kernel, q.data(), k.data(), v.data(), out.data(), s, options);  // warm-up
  std::vector<double> times;
  for (int rep = 0; rep < repeats; ++rep) {
    memory::reset_peak();
    const std::size_t before = memory::current_bytes();
    const auto start = std::chrono::steady_clock::now();
    run_attention_kernel(c.kernel, q.data(), k.data(), v.data(), out.data(), s, options);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    r.extra_bytes = std::max(r.extra_bytes, memory::peak_bytes() - before);
  }
  std::sort(times.begin(), times.end());
  r.ran = true;
  r.median_seconds = times[times.size() / 2];
  r.gflops = attention_flops(s, options.causal) / r.median_seconds / 1e9;
  const double peak = options.precision == Precision::bf16 ? peaks.bf16_gflops : peaks.f32_gflops;
  r.percent_of_peak = peak > 0 ? 100.0 * r.gflops / peak : 0;
  return r;
}

std::vector<BenchCase> standard_bench_cases(bool quick) {
  std::vector<BenchCase> cases;
  const auto prefill = [&](std::size_t n, std::size_t heads, std::size_t d, bool causal) {
    BenchCase c{fmt::format("prefill n={} H={} d={}{}", n, heads, d, causal ? " causal" : ""),
                {heads, heads, n, n, d, d}};
    c.options.causal = causal;
    cases.push_back(c);
  };
  const auto decode = [&](std::size_t cached) {
    BenchCase c{fmt::format("decode cache={} H=32 H_kv=8 d=128 f16", cached), {32, 8, 1, cached, 128, 128}};
    c.decode = true;
    cases.push_back(c);
  };
  if (quick) {
    for (bool causal : {false, true})
      prefill(1024, 16, 128, causal);
    prefill(1024, 32, 64, false);
    prefill(1024, 28, 72, false);
    decode(8192);
    return cases;
  }
  for (std::size_t d : {64, 128})
    for (std::size_t n : {512, 2048, 8192, 16384})
      for (bool causal : {false, true})
        prefill(n, 2048 / d, d, causal);
  for (bool causal : {false, true}) {
    prefill(8192, 16, 128, causal);
    cases.back().name += " bf16";
    cases.back().options.precision = Precision::bf16;
  }
  // Head widths real models use, beside d = 128 at the same n and H·d.
  for (std::size_t d : {128, 72, 80, 96})
    prefill(4096, 2048 / d, d, false);
  for (std::size_t n : {65536, 131072})
    prefill(n, 1, 128, true);
  for (std::size_t cached : {4096, 32768, 131072})
    decode(cached);
  return cases;
}

}  // namespace attnlab
