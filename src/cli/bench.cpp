// attnlab bench: measure the machine's ceilings, then time the kernels against them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnlab/analysis/bench.hpp"
#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "common.hpp"

namespace attnlab::cli {

namespace {
std::string mib(std::size_t bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }
}  // namespace

Command bench_command(CLI::App& parent) {
  struct State {
    bool quick = false, json = false, causal = false, decode = false;
    std::size_t cache = 32768, new_tokens = 1;
    std::string cache_dtype = "f16";
    std::size_t n = 0, heads = 16, kv_heads = 0, d_k = 128;
    std::string dtype = "f32", kernel = "tiled";
    int threads = 0, repeats = 5;
  };
  auto state = std::make_shared<State>();
  CLI::App* app =
      parent.add_subcommand("bench", "Measure this machine's peaks, then time attention kernels as a share of them");
  app->add_flag("--quick", state->quick, "A subset that runs in about a minute");
  app->add_flag("--json", state->json, "Machine-readable output");
  app->add_option("--n", state->n, "One case: n = m tokens (default: the standard case list)");
  app->add_option("--heads", state->heads, "One case: query heads H")->capture_default_str();
  app->add_option("--kv-heads", state->kv_heads, "One case: key/value heads H_kv (default H)");
  app->add_option("--d-k", state->d_k, "One case: head width d_k = d_v")->capture_default_str();
  app->add_flag("--causal", state->causal, "One case: causal mask");
  app->add_option("--dtype", state->dtype, "One case: f32 or bf16")->capture_default_str();
  app->add_option("--kernel", state->kernel, "One case: tiled or reference")->capture_default_str();
  app->add_flag("--decode", state->decode, "One case: decode new tokens against a KV cache (instead of prefill)");
  app->add_option("--cache", state->cache, "Decode: cached tokens")->capture_default_str();
  app->add_option("--new-tokens", state->new_tokens, "Decode: new tokens per step, 1 to 8")->capture_default_str();
  app->add_option("--cache-dtype", state->cache_dtype, "Decode: the cache's storage, f32, f16 or bf16")
      ->capture_default_str();
  app->add_option("--threads", state->threads, "Threads (default: all cores)");
  app->add_option("--repeats", state->repeats, "Timed runs per case (median reported)")->capture_default_str();
  return {
      app, [state]() {
        if (state->repeats < 1 || state->repeats > 1000) fail("--repeats", "must be 1 to 1000");
        if (state->threads < 0 || state->threads > 1024) fail("--threads", "must be 0 (all) to 1024");
        std::vector<BenchCase> cases;
        if (state->decode) {
          const std::size_t kv = state->kv_heads ? state->kv_heads : state->heads;
          if (state->heads == 0 || kv == 0 || state->heads % kv != 0)
            fail("--kv-heads", fmt::format("{} must divide --heads {} (grouped-query attention)", kv, state->heads));
          if (state->new_tokens < 1 || state->new_tokens > 8) fail("--new-tokens", "must be 1 to 8");
          if (state->cache < state->new_tokens || state->cache > (1u << 22))
            fail("--cache", "must be at least --new-tokens and at most 4194304 tokens");
          if (state->d_k == 0 || state->d_k > 1024) fail("--d-k", "must be 1 to 1024");
          BenchCase c{fmt::format("decode cache={} H={} H_kv={} d={} {}", state->cache, state->heads, kv, state->d_k,
                                  state->cache_dtype),
                      {state->heads, kv, state->new_tokens, state->cache, state->d_k, state->d_k}};
          c.decode = true;
          c.cache_dtype = parse_dtype(state->cache_dtype, "--cache-dtype");
          cases.push_back(c);
        } else if (state->n > 0) {
          const std::size_t kv = state->kv_heads ? state->kv_heads : state->heads;
          if (state->heads == 0 || kv == 0 || state->heads % kv != 0)
            fail("--kv-heads", fmt::format("{} must divide --heads {} (grouped-query attention)", kv, state->heads));
          if (state->d_k == 0 || state->d_k > 1024) fail("--d-k", "must be 1 to 1024");
          if (state->n > (1u << 22)) fail("--n", "at most 4194304 tokens");
          BenchCase c{fmt::format("n={} H={} H_kv={} d={}{}", state->n, state->heads, kv, state->d_k,
                                  state->causal ? " causal" : ""),
                      {state->heads, kv, state->n, state->n, state->d_k, state->d_k}};
          c.options.causal = state->causal;
          if (state->dtype == "bf16")
            c.options.precision = Precision::bf16;
          else if (state->dtype != "f32")
            fail("--dtype", fmt::format("\"{}\" is not f32 or bf16", state->dtype));
          c.kernel = kernel_named(state->kernel, "--kernel");
          cases.push_back(c);
        } else {
          cases = standard_bench_cases(state->quick);
        }

        fmt::print(stderr, "measuring this machine's peaks...\n");
        const MachinePeaks peaks = measure_peaks(state->threads);
        nlohmann::json results = nlohmann::json::array();
        if (!state->json) {
          fmt::print(
              "machine: {} threads, {}; f32 FMA peak {:.1f} GFLOP/s, bf16 peak {:.1f} GFLOP/s, read bandwidth {:.1f} "
              "GB/s\n",
              peaks.threads, to_string(peaks.isa), peaks.f32_gflops, peaks.bf16_gflops, peaks.read_gbps);
          fmt::print("{:<34} {:>9} {:>11} {:>10} {:>8} {:>12}\n", "case", "kernel", "median ms", "GFLOP/s", "% peak",
                     "extra mem");
        }
        for (std::size_t k = 0; k < cases.size(); ++k) {
          fmt::print(stderr, "[{}/{}] {}\n", k + 1, cases.size(), cases[k].name);
          const BenchResult r = run_bench_case(cases[k], peaks, state->repeats);
          const std::string kernel(r.bench_case.decode ? "decode" : to_string(r.bench_case.kernel));
          if (state->json) {
            results.push_back(
                {{"case", r.bench_case.name},
                 {"kernel", kernel},
                 {"ran", r.ran},
                 {"skipped_because", r.skipped_because},
                 {"median_seconds", r.median_seconds},
                 {"gflops", r.gflops},
                 {"percent_of_peak", r.percent_of_peak},
                 {"extra_bytes", r.extra_bytes},
                 {"gbps", r.gbps},
                 {"percent_of_bandwidth", r.percent_of_bandwidth},
                 {"flops",
                  r.bench_case.decode ? 0.0 : attention_flops(r.bench_case.shape, r.bench_case.options.causal)}});
          } else if (!r.ran) {
            fmt::print("{:<34} {:>9} skipped: {}\n", r.bench_case.name, kernel, r.skipped_because);
          } else if (r.bench_case.decode) {
            fmt::print("{:<34} {:>9} {:>11.2f} {:>8.1f} GB/s, {:.1f}% of read bandwidth {:>12}\n", r.bench_case.name,
                       kernel, r.median_seconds * 1e3, r.gbps, r.percent_of_bandwidth, mib(r.extra_bytes));
          } else {
            fmt::print("{:<34} {:>9} {:>11.2f} {:>10.1f} {:>7.1f}% {:>12}\n", r.bench_case.name, kernel,
                       r.median_seconds * 1e3, r.gflops, r.percent_of_peak, mib(r.extra_bytes));
          }
        }
        if (state->json)
          fmt::print("{}\n", nlohmann::json{{"machine",
                                             {{"threads", peaks.threads},
                                              {"isa", to_string(peaks.isa)},
                                              {"f32_peak_gflops", peaks.f32_gflops},
                                              {"bf16_peak_gflops", peaks.bf16_gflops},
                                              {"read_gbps", peaks.read_gbps}}},
                                            {"results", results}}
                                 .dump(2));
        return 0;
      }};
}

}  // namespace attnlab::cli
