// attnlab bench: measure the machine's ceilings, then time the kernels against them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/bench.hpp"
#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/analysis/memory.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/gemm.hpp"
#include "attnlab/kernels/matvec.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/selective_decoder.hpp"
#include "attnlab/model/tensor.hpp"
#include "attnlab/model/threads.hpp"
#include "attnlab/model/train_run.hpp"
#include "attnlab/model/training.hpp"
#include "attnlab/operations/bench.hpp"
#include "common.hpp"
#include "numbers.hpp"
#include "operation_flags.hpp"

namespace attnlab::cli {

namespace {

// The request (operations/bench.hpp), and the command's own --json.
struct BenchFlags : BenchRequest {
  bool json = false;
};

// H_kv as given (default H), checked to divide H.
std::size_t kv_heads_of(const BenchFlags& f) {
  const std::size_t heads = f.heads_or_default(), kv = f.kv_heads.value_or(heads);
  if (heads % kv != 0)
    fail("--kv-heads", fmt::format("{} must divide --heads {} (grouped-query attention)", kv, heads));
  return kv;
}

// The cases the flags ask for: one decode case, one prefill case, or the standard list.
std::vector<BenchCase> cases_from_flags(const BenchFlags& f) {
  if (f.decode) {
    if (f.cache < f.new_tokens) fail("--cache", "must be at least --new-tokens");
    const std::size_t kv = kv_heads_of(f);
    const std::string cache_dtype = f.cache_dtype.value_or("f16");
    if (cache_dtype == "q8_0")
      fail("--cache-dtype",
           "q8_0 is a model's generating cache (--model M --generate N); the kernel case reads "
           "f32, f16 or bf16");
    BenchCase c{
        fmt::format("decode cache={} H={} H_kv={} d={} {}", f.cache, f.heads_or_default(), kv, f.d_k, cache_dtype),
        {f.heads_or_default(), kv, f.new_tokens, f.cache, f.d_k, f.d_k}};
    c.decode = true;
    c.cache_dtype = parse_dtype(cache_dtype, "--cache-dtype");
    return {c};
  }
  if (f.n) {
    const std::size_t n = *f.n;
    const std::size_t kv = kv_heads_of(f);
    BenchCase c{fmt::format("n={} H={} H_kv={} d={}{}", n, f.heads_or_default(), kv, f.d_k, f.causal ? " causal" : ""),
                {f.heads_or_default(), kv, n, n, f.d_k, f.d_k}};
    c.options.causal = f.causal;
    c.options.precision = f.dtype == "bf16" ? Precision::bf16 : Precision::f32;
    c.kernel = kernel_named(f.kernel, "--kernel");
    return {c};
  }
  return standard_bench_cases(f.quick);
}

std::string mib(std::size_t bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }
std::string kernel_of(const BenchResult& r) {
  return r.bench_case.decode ? "decode" : std::string(to_string(r.bench_case.kernel));
}

nlohmann::json result_json(const BenchResult& r) {
  const double flops = r.bench_case.decode ? decode_flops(r.bench_case.shape)
                                           : attention_flops(r.bench_case.shape, r.bench_case.options.causal);
  return {{"case", r.bench_case.name},
          {"kernel", kernel_of(r)},
          {"ran", r.ran},
          {"skipped_because", r.skipped_because},
          {"median_seconds", r.median_seconds},
          {"gflops", r.gflops},
          {"percent_of_peak", r.percent_of_peak},
          {"extra_bytes", r.extra_bytes},
          {"gbps", r.gbps},
          {"percent_of_bandwidth", r.percent_of_bandwidth},
          {"stream_gbps", r.stream_gbps},
          {"percent_of_stream", r.percent_of_stream},
          {"bytes", r.bytes},
          {"roofline_seconds", r.roofline_seconds},
          {"percent_of_roofline", r.ran ? 100.0 * r.roofline_seconds / r.median_seconds : 0.0},
          {"flops", flops}};
}

nlohmann::json peaks_json(const MachinePeaks& peaks) {
  return {{"threads", peaks.threads},
          {"isa", to_string(peaks.isa)},
          {"f32_peak_gflops", peaks.f32_gflops},
          {"bf16_peak_gflops", peaks.bf16_gflops},
          {"amx_bf16_peak_gflops", peaks.amx_gflops},
          {"int8_peak_gops", peaks.int8_gops},
          {"amx_int8_peak_gops", peaks.amx_int8_gops},
          {"read_gbps", peaks.read_gbps},
          {"clock_ghz", peaks.clock_ghz}};
}

// The kernels' --json: the machine, each case, and the OpenBLAS kernels this process runs
// (bench/peers.py gives PyTorch the same ones).
nlohmann::json kernels_json(const MachinePeaks& peaks, const nlohmann::json& results) {
  return {{"machine", peaks_json(peaks)},
          {"results", results},
          {"blas_core", blas_core()},
          {"f32_products", f32_products_kernels()}};
}

// The AMX peak as a figure, or why there is none.
std::string amx_peak_text(const MachinePeaks& peaks) {
  return peaks.amx_gflops > 0 ? fmt::format("{:.1f} GFLOP/s", peaks.amx_gflops) : std::string("none (no AMX here)");
}

// The int8 peaks (VNNI's dot products, AMX's tiles), or that there are none.
std::string int8_peaks_text(const MachinePeaks& peaks) {
  return fmt::format(
      "int8 peak {}, AMX int8 {}",
      peaks.int8_gops > 0 ? fmt::format("{:.1f} GOP/s", peaks.int8_gops) : "none (no AVX-512 VNNI and BF16 here)",
      peaks.amx_int8_gops > 0 ? fmt::format("{:.1f} GOP/s", peaks.amx_int8_gops) : "none");
}

// The peak of the unit the bf16 products run on (attnlab/model/blas.hpp): AMX's tiles or
// AVX-512's bf16 dot products; 0 where they run on neither, or where no probe measured it
// (ATTNLAB_ISA below avx512_bf16, or the tile probe unbuilt or failing).
double bf16_products_peak(const MachinePeaks& peaks) {
  const std::string isa = bf16_products_isa();
  return isa == "avx512_core_amx" ? peaks.amx_gflops : isa == "avx512_core_bf16" ? peaks.bf16_gflops : 0.0;
}

void print_header(const MachinePeaks& peaks) {
  fmt::print(
      "machine: {} threads, {}; f32 FMA peak {:.1f} GFLOP/s, bf16 peak {:.1f} GFLOP/s, AMX bf16 peak {}, {}, read "
      "bandwidth {:.1f} GB/s, clock {:.2f} GHz\n",
      peaks.threads, to_string(peaks.isa), peaks.f32_gflops, peaks.bf16_gflops, amx_peak_text(peaks),
      int8_peaks_text(peaks), peaks.read_gbps, peaks.clock_ghz);
  fmt::print("{:<34} {:>9} {:>11} {:>10} {:>8} {:>12}\n", "case", "kernel", "median ms", "GFLOP/s", "% peak",
             "extra mem");
}

void print_result(const BenchResult& r) {
  const std::string& name = r.bench_case.name;
  if (!r.ran)
    fmt::print("{:<34} {:>9} skipped: {}\n", name, kernel_of(r), r.skipped_because);
  else if (r.bench_case.decode)
    fmt::print(
        "{:<34} {:>9} {:>11.2f} {:>8.1f} GB/s, {:.1f}% of read bandwidth, {:.1f}% of reading the same bytes "
        "({:.1f} GB/s), {:.1f}% of the roofline {:>12}\n",
        name, kernel_of(r), r.median_seconds * 1e3, r.gbps, r.percent_of_bandwidth, r.percent_of_stream, r.stream_gbps,
        100.0 * r.roofline_seconds / r.median_seconds, mib(r.extra_bytes));
  else
    fmt::print("{:<34} {:>9} {:>11.2f} {:>10.1f} {:>7.1f}% {:>12}\n", name, kernel_of(r), r.median_seconds * 1e3,
               r.gflops, r.percent_of_peak, mib(r.extra_bytes));
}

// `run` once to warm up, then `repeats` timed runs: the median's seconds. A warm-up that
// takes a second or more is itself the first timed run: what warming up pays for (the mapped
// weights' first reads, the scratch's first pages) is then under 1% of it, and at long
// prompts (16k tokens of a 0.5B model: minutes a forward) a separate warm-up would double the
// measurement for nothing.
double median_seconds(std::size_t repeats, const std::function<void()>& run) {
  const auto timed = [&run] {
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> times;
  if (const double first = timed(); first >= 1.0) times.push_back(first);
  while (times.size() < repeats)
    times.push_back(timed());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void print_blas_machine(const MachinePeaks& peaks) {
  fmt::print("machine: {} threads, {}; f32 FMA peak {:.1f} GFLOP/s, bf16 {:.1f}, AMX bf16 {}, {}; f32 products: {}\n",
             peaks.threads, to_string(peaks.isa), peaks.f32_gflops, peaks.bf16_gflops, amx_peak_text(peaks),
             int8_peaks_text(peaks), f32_products_kernels());
}

// The forward pass of a model over `tokens` seeded random ids: the median of the timed runs
// (after one warm-up), tokens per second, and GFLOP/s as a share of the f32 peak. Then its
// memory: the process's peak resident size during the runs above what it held before the
// model was loaded (the peak probes' buffers given back before the runs), beside the checkpoint's bytes and the
// forward's own buffers. The goal is resident ≤ file + 10% + buffers: the weights are read where the mapped file holds
// them.
int bench_model(const BenchFlags& f) {
  const std::size_t generate = f.generate.value_or(0);
  const std::size_t resident_before = memory::resident_bytes();
  // Mapped, not read: what the weights will take in memory is priced before anything is widened.
  Model model = load_model(f.model);
  const ModelConfig& c = model.config;
  if (f.tokens > c.n_positions)
    fail("--tokens", fmt::format("{} is more than the model's {} positions", f.tokens, c.n_positions));
  if (f.tokens + generate > c.n_positions)
    fail("--generate", fmt::format("{} prompt tokens and {} new ones are more than the model's {} positions", f.tokens,
                                   generate, c.n_positions));
  const LogitRows logit_rows = f.logits == "last" ? LogitRows::last : LogitRows::every;
  const CacheType cache = parse_cache_type(f.cache_dtype.value_or("f32"), "--cache-dtype");
  const std::size_t buffers = forward_buffer_bytes(c, f.tokens, logit_rows);
  require_available_memory(buffers, "--tokens", "the forward's buffers", "give fewer --tokens");
  if (f.f32) {
    require_available_memory(c.parameters() * sizeof(float), "--f32", "the weights widened to f32",
                             "leave --f32 out: attnlab reads 16-bit and quantized weights where they lie");
    widen_to_f32(model);
  }
  fmt::print(stderr, "measuring this machine's peaks...\n");
  const MachinePeaks peaks = measure_peaks(int(f.threads));
  release_free_heap();  // the peak probes' buffers are not the model's
  reset_peak_rss();
  SplitMix64 rng(1);
  std::vector<int> ids(f.tokens);
  for (int& id : ids)
    id = static_cast<int>(rng.next() % c.vocab_size);
  if (f.bf16) check_bf16_products("--bf16");
  const Bf16Products bf16(f.bf16);
  const double median = median_seconds(f.repeats, [&] { model_forward(model, ids, {.logits = logit_rows}); });
  const double flops = forward_flops(c, f.tokens, logit_rows);
  const double gflops = flops / median / 1e9;
  // A Q8_0 or K-quant file's products are int8 dot products where the CPU has VNNI
  // (int8_prompt_products): the forward's operations as a share of that unit's peak too (the
  // attention and the norms in f32 included).
  const bool int8_products = int8_prompt_products(model.stored_type) && peaks.int8_gops > 0 && !f.f32 && !f.bf16;
  // Where the CPU has AMX, those products run on its bf16 tiles instead (int8_gemm_tiles):
  // three tile multiplies a product, so the unit's busy share is three times the useful one.
  const bool tile_products = int8_products && int8_gemm_tiles() && peaks.amx_gflops > 0;
  // Generation: the prompt through the cache, then one token at a time (greedy). Each new
  // token reads every weight once and the whole cache: that traffic over the measured read
  // bandwidth is what the step could take at best.
  const std::size_t file = checkpoint_summary(f.model).bytes;
  nlohmann::json generation;
  std::uint64_t cache_bytes = 0;  // the generating cache's formula at its longest
  std::size_t forward_peak = 0;   // the resident peak before generating (the measure below resets it)
  if (generate) {
    // Its memory on its own: the forward's buffers above given back, the peak from here.
    forward_peak = memory::resident_peak_bytes();
    release_free_heap();
    const bool generation_peak = reset_peak_rss();
    Decoder decoder(model, cache);
    decoder.reserve(f.tokens + generate);
    std::vector<float> logits = decoder.step(ids);
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < generate; ++i) {
      const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      logits = decoder.step(std::span<const int>(&next, 1));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double per_token = seconds / double(generate);
    // The weights a token reads, and the cache read at the middle step: 2 × L × H_kv × a row's
    // bytes (cache_token_bytes) × its length.
    const Model::Read read = model.read_per_token();
    const double per_cache_token = double(cache_token_bytes(c, cache)),
                 bytes = double(read.bytes) + per_cache_token * (double(f.tokens) + double(generate) / 2);
    cache_bytes = cache_token_bytes(c, cache) * (f.tokens + generate);
    // The goal while generating: the weights where the file holds them and the cache's formula,
    // 10% over both (the decoder's own buffers are a prompt batch's: tens of MiB).
    const std::size_t peak = memory::resident_peak_bytes(),
                      resident = peak > resident_before ? peak - resident_before : 0;
    const double goal = 1.1 * (double(file) + double(cache_bytes));
    // Where the peak could not be reset (/proc/self/clear_refs), it is the forward's: not measured.
    const nlohmann::json measured = generation_peak ? nlohmann::json(resident) : nlohmann::json(nullptr),
                         met = generation_peak ? nlohmann::json(double(resident) <= goal) : nlohmann::json(nullptr);
    // Each thread's time per 256 weights (a K-quant super-block's worth), in ns and in cycles
    // of the clock measured with the peaks: what a kernel spends on a block beside its bytes.
    const double super_block_ns = per_token * 1e9 * peaks.threads / (double(read.values) / 256);
    generation = {{"prompt_tokens", f.tokens},
                  {"ns_per_super_block", super_block_ns},
                  {"cycles_per_super_block", super_block_ns * peaks.clock_ghz},
                  {"new_tokens", generate},
                  {"cache", cache_type_name(cache)},
                  {"cache_bytes", cache_bytes},
                  {"tokens_per_second", 1 / per_token},
                  {"bytes_per_token", bytes},
                  {"gbps", bytes / per_token / 1e9},
                  {"percent_of_read_bandwidth", 100 * bytes / per_token / 1e9 / peaks.read_gbps},
                  {"resident_peak_bytes", measured},  // null: not measured
                  {"goal_bytes", goal},
                  {"goal_met", met}};
  }
  // The survey's pass (model/survey.hpp) against the forward it rides on, both without logits:
  // what a survey adds to reading the corpus.
  nlohmann::json survey;
  if (f.survey) {
    const double plain = median_seconds(f.repeats, [&] { model_forward(model, ids, {.logits = LogitRows::none}); });
    SurveyTotals totals;
    totals.layers = c.n_layer, totals.heads = c.n_head;
    totals.per_head.resize(c.n_layer * c.n_head);
    SurveyWindow window{&totals, 0, 0, 0};
    const double surveyed =
        median_seconds(f.repeats, [&] { model_forward(model, ids, {.logits = LogitRows::none, .survey = &window}); });
    survey = {{"tokens_per_second", f.tokens / surveyed},
              {"forward_tokens_per_second", f.tokens / plain},
              {"percent_of_forward", 100 * plain / surveyed},
              {"goal_met", plain / surveyed >= 0.5}};
  }
  const std::size_t peak = std::max(forward_peak, memory::resident_peak_bytes());
  const std::size_t resident = peak > resident_before ? peak - resident_before : 0;
  // the weights where the file holds them, the forward's buffers, and a generating cache
  const double goal = 1.1 * double(file) + double(buffers) + double(cache_bytes);
  if (f.json) {
    nlohmann::json out{{"machine", peaks_json(peaks)},
                       {"model", config_json(c)},
                       {"tokens", f.tokens},
                       {"median_seconds", median},
                       {"tokens_per_second", f.tokens / median},
                       {"flops", flops},
                       {"gflops", gflops},
                       {"percent_of_peak", 100 * gflops / peaks.f32_gflops},
                       {"products", f.bf16 ? "bf16" : "f32"},
                       {"logits", f.logits},
                       {"blas_core", blas_core()},
                       {"f32_products", f32_products_kernels()},
                       {"memory",
                        {{"file_bytes", file},
                         {"weight_bytes", model.weight_bytes()},
                         {"stored_dtype", dtype_name(model.stored_dtype)},
                         {"buffer_bytes", buffers},
                         {"cache_bytes", cache_bytes},
                         {"resident_peak_bytes", resident},
                         {"goal_bytes", goal},
                         {"goal_met", double(resident) <= goal}}}};
    if (int8_products) out["percent_of_int8_peak"] = 100 * gflops / peaks.int8_gops;
    if (tile_products) out["percent_of_amx_bf16_peak"] = 100 * gflops / peaks.amx_gflops;
    if (int8_products) out["quantized_products_on"] = tile_products ? "amx_bf16_tiles" : "vnni_int8";
    if (generate) out["generation"] = generation;
    if (f.survey) out["survey"] = survey;
    if (f.bf16) {
      out["bf16_isa"] = bf16_products_isa();
      const double peak = bf16_products_peak(peaks);  // 0 where no probe measured that unit
      out["percent_of_bf16_peak"] = peak > 0 ? nlohmann::json(100 * gflops / peak) : nlohmann::json(nullptr);
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  print_blas_machine(peaks);
  fmt::print(
      "{} ({}), {} tokens: median {:.3f} s, {:.0f} tokens/s, {:.1f} GFLOP/s "
      "({:.1f}% of the f32 peak; {:.1f} GFLOP a pass)\n",
      f.model, describe(c), f.tokens, median, f.tokens / median, gflops, 100 * gflops / peaks.f32_gflops, flops / 1e9);
  if (tile_products)
    fmt::print(
        "products on AMX's bf16 tiles (x and the weights as two bf16 parts each, three multiplies a product): "
        "{:.1f}% of the AMX bf16 peak, {:.1f}% counting the three; {:.1f}% of the VNNI int8 peak\n",
        100 * gflops / peaks.amx_gflops, 300 * gflops / peaks.amx_gflops, 100 * gflops / peaks.int8_gops);
  else if (int8_products)
    fmt::print("products in int8 (VNNI): {:.1f}% of the int8 peak, {:.1f} GOP/s\n", 100 * gflops / peaks.int8_gops,
               peaks.int8_gops);
  if (f.bf16 && bf16_products_peak(peaks) > 0)
    fmt::print("products in bf16 on {}: {:.1f}% of its peak, {:.1f} GFLOP/s\n", bf16_products_isa(),
               100 * gflops / bf16_products_peak(peaks), bf16_products_peak(peaks));
  else if (f.bf16)
    fmt::print("products in bf16 on {}: no peak measured for it in this run\n", bf16_products_isa());
  fmt::print(
      "memory: the files {}, the weights in memory {} ({}{}), the forward's buffers {}{}; peak resident {} "
      "(goal ≤ file + 10% + buffers{} = {}: {})\n",
      format_bytes(file), format_bytes(model.weight_bytes()), ggml_type_name(model.stored_type),
      f.f32 ? " widened to f32" : ", read where the mapped file holds them", format_bytes(buffers),
      cache_bytes ? fmt::format(", the {} cache {}", cache_type_name(cache), format_bytes(cache_bytes)) : "",
      format_bytes(resident), cache_bytes ? " + cache" : "", format_bytes(static_cast<std::uint64_t>(goal)),
      double(resident) <= goal ? "met" : "NOT met");
  if (f.survey)
    fmt::print("survey: {:.0f} tokens/s against the forward's {:.0f} without logits: {:.0f}% of it (goal ≥ 50%: {})\n",
               survey["tokens_per_second"].get<double>(), survey["forward_tokens_per_second"].get<double>(),
               survey["percent_of_forward"].get<double>(), survey["goal_met"].get<bool>() ? "met" : "NOT met");
  if (generate) {
    const nlohmann::json& resident = generation["resident_peak_bytes"];
    const std::string goal = format_bytes(static_cast<std::uint64_t>(generation["goal_bytes"].get<double>()));
    fmt::print(
        "generation: {} tokens after {} of prompt, {:.1f} tokens/s; {} read per token, {:.1f} GB/s ({:.0f}% of "
        "the measured read bandwidth); {:.1f} ns a 256-weight block on each thread ({:.0f} cycles at {:.2f} GHz); "
        "{}\n",
        generate, f.tokens, generation["tokens_per_second"].get<double>(),
        format_bytes(static_cast<std::uint64_t>(generation["bytes_per_token"].get<double>())),
        generation["gbps"].get<double>(), generation["percent_of_read_bandwidth"].get<double>(),
        generation["ns_per_super_block"].get<double>(), generation["cycles_per_super_block"].get<double>(),
        peaks.clock_ghz,
        resident.is_null()
            ? fmt::format("peak resident while generating not measured: this system does not let a process reset "
                          "its peak (/proc/self/clear_refs; goal ≤ (file + cache) + 10% = {})",
                          goal)
            : fmt::format("peak resident while generating {} (goal ≤ (file + cache) + 10% = {}: {})",
                          format_bytes(resident.get<std::uint64_t>()), goal,
                          generation["goal_met"].get<bool>() ? "met" : "NOT met"));
  }
  return 0;
}

// The attribution of one prediction (docs/attribution.md), each part timed on its own as a
// multiple of one forward pass over the same tokens: the read-outs should cost a few
// forwards, not one per token per layer. A patching site reruns the blocks after it, for the
// rows from its position on (the rows before enter as the corrupted run's cached keys and
// values), and the last row's logits; patching every residual site is (L + 1) · n of them.
int bench_attribute(const BenchFlags& f) {
  const Model model = load_model(f.model);
  const ModelConfig& c = model.config;
  if (f.tokens > c.n_positions)
    fail("--tokens", fmt::format("{} is more than the model's {} positions", f.tokens, c.n_positions));
  require_available_memory(forward_buffer_bytes(c, f.tokens), "--tokens", "the forward's buffers",
                           "give fewer --tokens");
  SplitMix64 rng(1);
  std::vector<int> ids(f.tokens);
  for (int& id : ids)
    id = static_cast<int>(rng.next() % c.vocab_size);
  const std::size_t p = ids.size() - 1;
  ForwardOptions keep;
  keep.keep_stream = true;
  const ForwardResult run = model_forward(model, ids, keep);
  const int target = top_k(run.logits_at(p), 1)[0].id;
  const double forward = median_seconds(f.repeats, [&] { model_forward(model, ids); });
  const std::vector<std::pair<std::string, std::function<void()>>> parts = {
      {"forward keeping the stream", [&] { (void)model_forward(model, ids, keep); }},
      {"direct logit attribution", [&] { (void)attribute_logit(model, ids); }},
      {"logit lens", [&] { (void)logit_lens(model, ids, target); }},
      {"context mixing (weights, value norms, rollout, ALTI)", [&] { (void)context_mixing(model, run, p); }},
      {"gradient at the input (one backward)", [&] { (void)stream_gradient(model, run.stream[0].x_in, p, target); }},
      {"one patching site (layer L/2, position n/2: its rows on, the rest cached)",
       [&] {
         const std::vector<float>& x = run.stream[c.n_layer / 2].x_in;
         (void)forward_suffix(model, c.n_layer / 2, run.stream, ids.size() / 2,
                              {x.begin() + std::ptrdiff_t(ids.size() / 2 * c.n_embd), x.end()});
       }},
  };
  nlohmann::json timed = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows{{"part", "median", "× a forward"}};
  for (const auto& [name, work] : parts) {
    fmt::print(stderr, "timing {}...\n", name);
    const double seconds = median_seconds(f.repeats, work);
    timed.push_back({{"name", name}, {"seconds", seconds}, {"forwards", seconds / forward}});
    rows.push_back({name, fmt::format("{:.4f} s", seconds), fmt::format("{:.2f}", seconds / forward)});
  }
  if (f.json) {
    fmt::print("{}\n", nlohmann::json{{"model", config_json(c)},
                                      {"tokens", f.tokens},
                                      {"forward_seconds", forward},
                                      {"parts", timed},
                                      {"residual_sites", (c.n_layer + 1) * f.tokens}}
                           .dump(2));
    return 0;
  }
  fmt::print("{} ({}), the prediction at the last of {} tokens; one forward pass: {:.4f} s\n{}", f.model, describe(c),
             f.tokens, forward, format_table(rows, true));
  fmt::print("patching every residual site is {} sites like that one, on average\n", (c.n_layer + 1) * f.tokens);
  return 0;
}

// Training steps of attnlab train's model on its induction task: each timed run is
// `steps` whole steps (loss and every gradient, clipping, AdamW) after one warm-up step;
// the median run gives tokens/s and GFLOP/s (training_flops) as a share of the f32 peak.
int bench_train(const BenchFlags& f) {
  TrainSettings s = f.shape;
  s.heads = f.heads_or_default();
  try {
    check_train_settings(s);  // checked and priced as `attnlab train` does, before anything is allocated
  } catch (const InputError& e) {
    throw with_flag_name(e);
  }
  const Model model = initial_model(s);
  const ModelConfig& c = model.config;
  std::vector<float> p = flatten<float>(model), g(p.size());
  Batch batch;
  for (std::size_t b = 0; b < s.batch; ++b)
    batch.push_back(induction_sequence(b, s.context + 1, s.vocab).ids);
  if (f.bf16) check_bf16_products("--bf16");
  AdamW adam;
  const auto step = [&] {
    loss_and_gradients<float>(c, p, batch, g,
                              {.attention_only = s.attention_only, .bf16 = f.bf16});  // on bench's thread budget
    clip_gradients(g, s.clip);
    adam.step(p, g, 1e-3);
  };
  fmt::print(stderr, "measuring this machine's peaks...\n");
  const MachinePeaks peaks = measure_peaks(int(f.threads));
  const double seconds = median_seconds(f.repeats,
                                        [&] {
                                          for (std::size_t k = 0; k < s.steps; ++k)
                                            step();
                                        }) /
                         static_cast<double>(s.steps);
  const double tokens = double(s.batch * s.context);
  const double flops = double(s.batch) * training_flops(c, s.context, s.attention_only);
  const double gflops = flops / seconds / 1e9;
  if (f.json) {
    fmt::print("{}\n", nlohmann::json{{"machine", peaks_json(peaks)},
                                      {"layers", s.layers},
                                      {"heads", s.heads},
                                      {"d_model", s.d_model},
                                      {"context", s.context},
                                      {"vocab", s.vocab},
                                      {"batch", s.batch},
                                      {"attn_only", s.attention_only},
                                      {"parameters", parameter_count(c)},
                                      {"step_seconds", seconds},
                                      {"tokens_per_second", tokens / seconds},
                                      {"flops_per_step", flops},
                                      {"gflops", gflops},
                                      {"percent_of_peak", 100 * gflops / peaks.f32_gflops},
                                      {"products", f.bf16 ? "bf16" : "f32"},
                                      {"blas_core", blas_core()},
                                      {"f32_products", f32_products_kernels()}}
                           .dump(2));
    return 0;
  }
  print_blas_machine(peaks);
  fmt::print(
      "training step: {} layers × {} heads, d_model {}, context {}, vocabulary {}, batch {}{}: median {:.3f} ms, "
      "{:.0f} tokens/s, {:.1f} GFLOP/s ({:.1f}% of the f32 peak; {:.3f} GFLOP a step: 3 × the forward's, "
      "6 × parameters × tokens plus attention){}\n",
      s.layers, s.heads, s.d_model, s.context, s.vocab, s.batch, s.attention_only ? ", attention only" : "",
      seconds * 1e3, tokens / seconds, gflops, 100 * gflops / peaks.f32_gflops, flops / 1e9,
      f.bf16 ? fmt::format("; products in bf16 on {}", bf16_products_isa()) : "");
  return 0;
}

// oneDNN's product at one shape on operands already of a unit's types (VendorProduct): its
// kernel, GFLOP/s (GOP/s) and share of the peak of the unit it runs on, as measured in this run
// (bf16: the bf16 products' unit; int8: AMX's tiles where its kernel's name says so, else VNNI's
// dot products).
struct UnitCeiling {
  std::string kernel;  // empty: none here
  double gflops = 0, peak = 0;

  std::string text() const {
    if (kernel.empty()) return "none here";
    return peak > 0 ? fmt::format("{:.1f} ({:.1f}%)", gflops, 100 * gflops / peak) : fmt::format("{:.1f}", gflops);
  }
  nlohmann::json json() const {
    if (kernel.empty()) return nullptr;
    return {{"kernel", kernel},
            {"gflops", gflops},
            {"percent_of_peak", peak > 0 ? nlohmann::json(100 * gflops / peak) : nlohmann::json(nullptr)}};
  }
};

UnitCeiling unit_ceiling(UnitOperands operands, std::size_t tokens, std::size_t out, std::size_t in,
                         std::size_t repeats, const MachinePeaks& peaks) {
  const std::unique_ptr<VendorProduct> product = VendorProduct::make(operands, tokens, out, in);
  if (!product) return {};
  const bool tiles = product->kernel().find("amx") != std::string::npos;
  const double peak =
      operands == UnitOperands::bf16 ? bf16_products_peak(peaks) : (tiles ? peaks.amx_int8_gops : peaks.int8_gops);
  // Run for a tenth of a second first: in a process's first tenth of a second, oneDNN's AMX
  // int8 product ran 12× slower (8 ms against 0.6; seen on Sapphire Rapids).
  const auto start = std::chrono::steady_clock::now();
  do
    product->run();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100));
  const double seconds = median_seconds(repeats, [&] { product->run(); });
  return {product->kernel(), 2.0 * double(tokens) * double(out) * double(in) / seconds / 1e9, peak};
}

// The f32 products of a model's linear layers, y = x · Wᵀ with W stored [out × in] as the
// layers hold it: attnlab's own kernels with W in f32 and in f16 (packed from the stored
// values), and OpenBLAS's (on the kernels it runs here), each the median of the timed runs
// after one warm-up, in GFLOP/s and as a share of the f32 peak measured in the same run.
int bench_products(const BenchFlags& f) {
  struct Product {
    std::string_view name;
    std::size_t tokens, out, in;
  };
  static constexpr Product kProducts[] = {{"GPT-2 small, 1024 tokens: Q, K, V", 1024, 2304, 768},
                                          {"GPT-2 small: MLP in", 1024, 3072, 768},
                                          {"GPT-2 small: MLP out", 1024, 768, 3072},
                                          {"GPT-2 small: LM head", 1024, 50257, 768},
                                          {"1.1B Llama, 256 tokens: Q, K, V", 256, 2560, 2048},
                                          {"1.1B Llama: MLP gate and up", 256, 11264, 2048},
                                          {"1.1B Llama: MLP down", 256, 2048, 5632},
                                          {"1.1B Llama: LM head", 256, 32000, 2048}};
  const bool own = f32_gemm_vectorized();
  const F32Kernels model_kernels = f32_kernels();
  const bool with_onednn = onednn_f32_available();
  // The largest product's x, W (f32 and f16) and y, then beside them the ceiling's x, W (as
  // stored and packed) and y, in bytes.
  std::size_t most = 0;
  for (const Product& p : kProducts)
    most = std::max(most, (p.tokens * p.in + p.out * p.in + 2 * p.tokens * p.out) * sizeof(float) +
                              (p.tokens * p.in + 3 * p.out * p.in) * sizeof(std::uint16_t));
  require_available_memory(most, "--products", "the largest product's operands", "free some memory first");
  fmt::print(stderr, "measuring this machine's peaks...\n");
  const MachinePeaks peaks = measure_peaks(int(f.threads));
  if (!f.json)
    fmt::print(
        "machine: {} threads, {}; f32 FMA peak {:.1f} GFLOP/s; OpenBLAS kernels: {}\n{:<58} {:>15} {:>15} {:>15} "
        "{:>15} {:>6}\n",
        peaks.threads, to_string(peaks.isa), peaks.f32_gflops, blas_core(), "product (tokens × out × in)",
        "oneDNN f32 W", "attnlab f32 W", "attnlab f16 W", "OpenBLAS f32 W", "ratio");
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> ceilings;  // the second table's rows
  std::size_t k = 0;
  for (const Product& p : kProducts) {
    if (f.quick && p.name.find("Q, K, V") == std::string_view::npos) continue;  // --quick: each model's first
    fmt::print(stderr, "[{}/{}] {}\n", ++k, f.quick ? 2 : std::size(kProducts), p.name);
    SplitMix64 rng(k);
    const auto normals = [&](std::size_t count) {
      std::vector<float> v(count);
      for (float& value : v)
        value = float(rng.normal());
      return v;
    };
    const std::vector<float> x = normals(p.tokens * p.in), w = normals(p.out * p.in);
    std::vector<std::uint16_t> w16(w.size());
    f32_to_f16(w, w16);
    std::vector<float> y(p.tokens * p.out);
    const double flops = 2.0 * double(p.tokens) * double(p.out) * double(p.in);
    const auto gflops_by = [&](F32Kernels kernels, bool f16) {
      const UseF32Kernels use(kernels);
      const double seconds = median_seconds(f.repeats, [&] {
        if (!f16)
          gemm(false, true, p.tokens, p.out, p.in, x.data(), p.in, w.data(), p.in, 0.0f, y.data(), p.out);
        else if (!gemm_16bit(p.tokens, p.out, p.in, x.data(), p.in, w16.data(), DType::f16, p.in, 0.0f, y.data(),
                             p.out))
          throw std::logic_error("bench --products: attnlab's kernels refused an f16 product");
      });
      return flops / seconds / 1e9;
    };
    const double onednn = with_onednn ? gflops_by(F32Kernels::onednn, false) : 0.0,
                 mine = own ? gflops_by(F32Kernels::attnlab, false) : 0.0,
                 mine16 = own ? gflops_by(F32Kernels::attnlab, true) : 0.0,
                 theirs = gflops_by(F32Kernels::openblas, false);
    const double chosen = model_kernels == F32Kernels::onednn    ? onednn
                          : model_kernels == F32Kernels::attnlab ? mine
                                                                 : theirs;
    const auto share = [&](double g) { return 100 * g / peaks.f32_gflops; };
    const auto or_null = [](bool measured, double value) {
      return measured ? nlohmann::json(value) : nlohmann::json(nullptr);
    };
    const UnitCeiling bf16 = unit_ceiling(UnitOperands::bf16, p.tokens, p.out, p.in, f.repeats, peaks),
                      int8 = unit_ceiling(UnitOperands::int8, p.tokens, p.out, p.in, f.repeats, peaks);
    ceilings.push_back(fmt::format("{:<58} {:>32} {:>32}",
                                   fmt::format("{} ({} × {} × {})", p.name, p.tokens, p.out, p.in), bf16.text(),
                                   int8.text()));
    if (f.json) {
      results.push_back({{"product", p.name},
                         {"tokens", p.tokens},
                         {"out", p.out},
                         {"in", p.in},
                         {"onednn_gflops", or_null(with_onednn, onednn)},
                         {"onednn_percent_of_peak", or_null(with_onednn, share(onednn))},
                         {"attnlab_gflops", or_null(own, mine)},
                         {"attnlab_percent_of_peak", or_null(own, share(mine))},
                         {"attnlab_f16_gflops", or_null(own, mine16)},
                         {"attnlab_f16_percent_of_peak", or_null(own, share(mine16))},
                         {"openblas_gflops", theirs},
                         {"openblas_percent_of_peak", share(theirs)},
                         {"model_f32_kernels_over_openblas", chosen / theirs},
                         {"onednn_bf16_ceiling", bf16.json()},
                         {"onednn_int8_ceiling", int8.json()}});
      continue;
    }
    const auto figure = [&](bool measured, double g) {
      return measured ? fmt::format("{:.1f} ({:.1f}%)", g, share(g)) : std::string("none here");
    };
    fmt::print("{:<58} {:>15} {:>15} {:>15} {:>15} {:>5.2f}×\n",
               fmt::format("{} ({} × {} × {})", p.name, p.tokens, p.out, p.in), figure(with_onednn, onednn),
               figure(own, mine), figure(own, mine16), figure(true, theirs), chosen / theirs);
  }
  if (f.json)
    fmt::print("{}\n", nlohmann::json{{"machine", peaks_json(peaks)},
                                      {"blas_core", blas_core()},
                                      {"f32_products", f32_products_kernels()},
                                      {"results", results}}
                           .dump(2));
  else {
    fmt::print(
        "GFLOP/s (share of the f32 peak); ratio: the model's f32 products' kernels ÷ OpenBLAS's. The model's "
        "products here: {} (ATTNLAB_GEMM=onednn, attnlab or openblas chooses; OPENBLAS_CORETYPE, OpenBLAS's "
        "kernels).\n\nThe vendor's ceiling on the bf16 and int8 units: oneDNN's matmul with x and W already bf16 "
        "(int8: x u8, W s8) and W in its own layout, nothing to widen or unpack; GFLOP/s or GOP/s (share of that "
        "unit's peak in this run)\n{:<58} {:>32} {:>32}\n",
        f32_products_kernels(), "product (tokens × out × in)", "oneDNN bf16", "oneDNN int8");
    for (const std::string& row : ceilings)
      fmt::print("{}\n", row);
  }
  return 0;
}

}  // namespace

Command bench_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("bench", std::string(BenchRequest::kHelp));
  auto described = std::make_shared<OperationFlags>(*app, describe_operation<BenchRequest>());
  auto json_output = std::make_shared<bool>(false);
  app->add_flag("--json", *json_output, "Machine-readable output");
  return {app, [described, json_output]() {
            const auto flags = std::make_shared<BenchFlags>();
            static_cast<BenchRequest&>(*flags) = read_flags<BenchRequest>(*described);
            flags->json = *json_output;
            // --threads: the OpenMP threads the kernels and the shared products use (model/threads.hpp)
            std::optional<ThreadBudget> budget;
            if (flags->threads > 0) budget.emplace(int(flags->threads));
            if (flags->products && (!flags->model.empty() || flags->train))
              fail("--products", "times the layers' products alone; leave out --model and --train");
            if (!flags->model.empty()) return flags->attribute ? bench_attribute(*flags) : bench_model(*flags);
            if (flags->attribute) fail("--attribute", "times a model's attribution; give --model too");
            if (flags->survey) fail("--survey", "times a model's survey pass; give --model too");
            if (flags->train) return bench_train(*flags);
            if (flags->products) return bench_products(*flags);
            const std::vector<BenchCase> cases = cases_from_flags(*flags);
            fmt::print(stderr, "measuring this machine's peaks...\n");
            const MachinePeaks peaks = measure_peaks(int(flags->threads));
            if (!flags->json) print_header(peaks);
            nlohmann::json results = nlohmann::json::array();
            for (std::size_t k = 0; k < cases.size(); ++k) {
              fmt::print(stderr, "[{}/{}] {}\n", k + 1, cases.size(), cases[k].name);
              const BenchResult r = run_bench_case(cases[k], peaks, flags->repeats);
              if (flags->json)
                results.push_back(result_json(r));
              else
                print_result(r);
            }
            if (flags->json) fmt::print("{}\n", kernels_json(peaks, results).dump(2));
            return 0;
          }};
}

}  // namespace attnlab::cli
