// Measuring, not claiming: runs attention in attnlab's own runtime and records what it
// took, to set beside the formulas of cost.hpp and kv_memory.hpp.
//
//   measure_attention_cost  times one head's attention at doubling lengths n, records the
//                           kernel's working memory (the peak of attnlab's counting
//                           operator new, memory.hpp) and the process's peak resident
//                           memory, and fits the exponent of time against n. The kernel is
//                           a parameter: the materialised grid, the tiled kernel, the same
//                           measure.
//   measure_kv_cache        decodes with random weights into a KVCache, raising the
//                           context step by step, and records the cache's bytes as the
//                           cache, malloc and the process's resident memory see them.
// Both refuse up front (InputError naming "measure") work that would not fit in the
// memory the machine has available.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/analysis/models.hpp"
#include "attnlab/core/dtype.hpp"

namespace attnlab {

// ---- the grid: one head's attention, timed ----------------------------------------

// One head's attention problem in f32, row-major: n queries against m keys, d_v = d_k.
struct HeadProblem {
  std::size_t n = 0, m = 0, d_k = 0;
  const float* q = nullptr;  // [n × d_k]
  const float* k = nullptr;  // [m × d_k]
  const float* v = nullptr;  // [m × d_k]
  bool causal = false;       // query i sees keys j <= i (n = m)
};

// A kernel to measure: out [n × d_k] = softmax(q·kᵀ / √d_k) · v. Its working memory is
// what it allocates with operator new during the call (counted by memory.hpp).
using AttentionKernel = std::function<void(const HeadProblem& problem, std::span<float> out)>;

struct MeasuredKernel {
  std::string name;
  std::string description;
  AttentionKernel run;
  // The working memory `run` takes for a problem, to refuse up front what would not fit.
  std::function<std::uint64_t(std::uint64_t n, std::uint64_t m, std::uint64_t d_k)> scratch_bytes;
};

// The materialised grid, like the reference kernel: allocates the n×m grid (f32), fills
// it with q·k/√d_k (-inf where causally hidden), turns each row into softmax weights in
// place, and mixes the values. Working memory: exactly the grid, n·m·4 bytes.
void grid_attention(const HeadProblem& problem, std::span<float> out);

// The kernels `attnlab cost --measure --kernel NAME` can run: "grid" (above) and "tiled"
// (flash_attention.hpp's online-softmax kernel on one thread, which never builds the grid).
const std::vector<MeasuredKernel>& measured_kernels();
// Throws InputError naming `field` and listing the kernels for an unknown name.
const MeasuredKernel& find_measured_kernel(std::string_view name, std::string_view field);

struct CostMeasureOptions {
  std::uint64_t max_tokens = 2048;  // the longest n; the others are max/2, max/4, ...
  std::uint64_t d_k = 128;
  bool causal = false;
  std::size_t points = 6;    // at most this many lengths, none below kMinMeasuredTokens
  double min_seconds = 0.1;  // each length runs until this much time has passed; the best run counts
  std::uint64_t seed = 1;
};
inline constexpr std::uint64_t kMinMeasuredTokens = 16;

struct CostPoint {
  std::uint64_t n = 0;
  double seconds = 0.0;  // the fastest run
  int runs = 0;
  std::uint64_t scratch_peak_bytes = 0;  // the kernel's working memory: peak operator new bytes during a run
  std::uint64_t rss_peak_bytes = 0;      // peak resident memory during the run, above the resident size before it
};

struct CostMeasurement {
  std::string kernel;
  std::uint64_t d_k = 0;
  bool causal = false;
  std::vector<CostPoint> points;  // ascending n
  // Least-squares slopes of log(seconds) and log(kernel memory) against log(n); absent
  // with fewer than two lengths (a largest n below 2·kMinMeasuredTokens).
  std::optional<double> time_exponent;
  std::optional<double> memory_exponent;
  bool rss_peak_measured = false;  // whether the peak could be reset before each run
};

// max, max/2, max/4, ... (at most `points` lengths, none below `smallest` unless max is),
// in ascending order.
std::vector<std::uint64_t> doubling_lengths(std::uint64_t max, std::size_t points, std::uint64_t smallest);

// The least-squares slope of log(y) against log(x) (the exponent b of y ≈ a·x^b). Needs at
// least two points with distinct x, all x, y > 0.
double fit_exponent(std::span<const double> x, std::span<const double> y);

// The most memory the measure holds at once: q, k, v and out at the longest n plus the
// kernel's working memory there.
std::uint64_t cost_measure_bytes(const CostMeasureOptions& options, const MeasuredKernel& kernel);

// Runs the kernel on random inputs at doubling lengths up to options.max_tokens. Throws
// InputError ("measure: ...") when cost_measure_bytes is more than the machine has.
CostMeasurement measure_attention_cost(const CostMeasureOptions& options, const MeasuredKernel& kernel);

// ---- the KV cache: decoded, measured --------------------------------------------------

struct KVMeasureOptions {
  ModelShape model;  // a valid shape (d_model 0 means heads × head_dim)
  DType dtype = DType::f16;
  std::uint64_t max_context = 4096;
  std::vector<std::uint64_t> extra_contexts;  // also measured (those <= max_context)
  std::optional<std::uint64_t> layers;        // layers to decode; default: as many as fit (kv_measure_layers)
  std::uint64_t auto_layers_cap = std::uint64_t{2} << 30;  // the default layers keep the cache within this
  std::size_t points = 6;                                  // doubling steps up to max_context
  std::uint64_t seed = 1;
};

struct KVPoint {
  std::uint64_t context = 0;
  std::uint64_t formula_bytes = 0;    // 2 × layers × H_kv × d_head × context × bytes
  std::uint64_t cache_bytes = 0;      // KVCache::bytes(), from its own allocations
  std::uint64_t allocator_bytes = 0;  // malloc's bytes in use, above what it held before the cache
  std::uint64_t rss_bytes = 0;        // resident memory, above what the process held before the cache
  double decode_seconds = 0.0;        // one decode step (one token through every decoded layer)
};

struct KVMeasurement {
  std::uint64_t layers = 0;  // layers decoded (the formula is for these)
  std::uint64_t d_model = 0;
  std::vector<KVPoint> points;  // ascending context
};

// The layers measure_kv_cache decodes by default: all of the model's, or as many as keep
// the cache at max_context within min(half the available memory, auto_layers_cap), at
// least 1.
std::uint64_t kv_measure_layers(const KVMeasureOptions& options);

// The most memory the measure holds at once with `layers` layers: the cache at
// max_context, the random weights and the token table.
std::uint64_t kv_measure_bytes(const KVMeasureOptions& options, std::uint64_t layers);

// Decodes, step by step, to each context of doubling_lengths(max_context) plus the extra
// contexts: tokens of a 64-word random vocabulary are appended through their projected
// keys and values (exactly x·W_K, x·W_V for that word), and the last token of each step
// goes through decode_step in every layer (project, append, attend over the whole cache).
// Each step first reserves the step's context, as a runtime sizes its cache for the
// context it serves. Throws InputError ("measure: ...") when it would not fit.
KVMeasurement measure_kv_cache(const KVMeasureOptions& options);

}  // namespace attnlab
