// The measures of include/attnlab/analysis/measure.hpp: the materialised grid kernel, the timing
// loop around any kernel, and the KV cache decoded step by step.
#include "attnlab/analysis/measure.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/analysis/memory.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/decode.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/kv_cache.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<float> random_floats(SplitMix64& rng, std::size_t count) {
  std::vector<float> out(count);
  for (float& x : out)
    x = static_cast<float>(rng.normal());
  return out;
}

std::uint64_t add_bytes(std::uint64_t a, std::uint64_t b) {
  if (const auto s = checked_add(a, b)) return *s;
  fail("measure", "the memory the measure needs overflows 64 bits; measure a smaller size");
}

std::uint64_t mul_bytes(std::uint64_t a, std::uint64_t b) {
  if (const auto p = checked_mul(a, b)) return *p;
  fail("measure", "the memory the measure needs overflows 64 bits; measure a smaller size");
}

}  // namespace

// ---- the grid kernel ------------------------------------------------------------------

void grid_attention(const HeadProblem& p, std::span<float> out) {
  const std::size_t n = p.n, m = p.m, d = p.d_k;
  std::vector<float> grid(n * m);  // [n × m] the grid: scores, then logits, then weights
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

  for (std::size_t i = 0; i < n; ++i) {
    float* row = grid.data() + i * m;
    const std::size_t visible = p.causal ? std::min(m, i + 1) : m;
    // Steps 2 and 3, score and scale: row_j = (q_i · k_j) / √d_k.
    for (std::size_t j = 0; j < visible; ++j)
      row[j] = dot_f32(p.q + i * d, p.k + j * d, d) * scale;
    // Step 4, mask: keys after i are -inf with a causal mask.
    for (std::size_t j = visible; j < m; ++j)
      row[j] = kMinusInfinity;
    // Step 5, softmax in place: exp(row - max) / Σ.
    const float largest = *std::max_element(row, row + visible);
    float sum = 0.0f;
    for (std::size_t j = 0; j < visible; ++j)
      sum += (row[j] = std::exp(row[j] - largest));
    const float inverse = 1.0f / sum;
    for (std::size_t j = 0; j < m; ++j)
      row[j] = j < visible ? row[j] * inverse : 0.0f;
    // Step 6, mix: out_i = Σ_j w_ij · v_j.
    float* o = out.data() + i * d;
    std::fill(o, o + d, 0.0f);
    for (std::size_t j = 0; j < visible; ++j) {
      const float w = row[j];
      const float* v = p.v + j * d;
      for (std::size_t c = 0; c < d; ++c)
        o[c] += w * v[c];
    }
  }
}

const std::vector<MeasuredKernel>& measured_kernels() {
  static const std::vector<MeasuredKernel> kernels{
      {"grid", "the materialised n×m grid, like the reference kernel (f32)", grid_attention,
       [](std::uint64_t n, std::uint64_t m, std::uint64_t d_k) {
         (void)d_k;
         return mul_bytes(mul_bytes(n, m), 4);
       }},
      {"tiled", "the tiled online-softmax kernel (flash_attention.hpp), one thread: no n×m grid",
       [](const HeadProblem& p, std::span<float> out) {
         AttentionShape shape;
         shape.n = p.n, shape.m = p.m, shape.d_k = p.d_k, shape.d_v = p.d_k;
         AttentionOptions options;
         options.causal = p.causal;
         options.threads = 1;
         flash_attention(p.q, p.k, p.v, out.data(), shape, options);
       },
       [](std::uint64_t, std::uint64_t, std::uint64_t d_k) {
         return mul_bytes(mul_bytes(d_k, 1024), 64);  // a few tiles: far below this bound
       }},
  };
  return kernels;
}

const MeasuredKernel& find_measured_kernel(std::string_view name, std::string_view field) {
  std::vector<std::string> names;
  for (const MeasuredKernel& k : measured_kernels()) {
    if (k.name == name) return k;
    names.push_back(k.name);
  }
  fail(field, fmt::format("unknown kernel \"{}\"; the kernels are: {}", name, fmt::join(names, ", ")));
}

// ---- timing any kernel ------------------------------------------------------------------

std::vector<std::uint64_t> doubling_lengths(std::uint64_t max, std::size_t points, std::uint64_t smallest) {
  std::vector<std::uint64_t> lengths{max};
  while (lengths.size() < points && lengths.back() / 2 >= std::max<std::uint64_t>(smallest, 1))
    lengths.push_back(lengths.back() / 2);
  std::reverse(lengths.begin(), lengths.end());
  return lengths;
}

double fit_exponent(std::span<const double> x, std::span<const double> y) {
  const std::size_t k = std::min(x.size(), y.size());
  double mean_x = 0, mean_y = 0;
  for (std::size_t i = 0; i < k; ++i)
    mean_x += std::log(x[i]), mean_y += std::log(y[i]);
  mean_x /= static_cast<double>(k);
  mean_y /= static_cast<double>(k);
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const double dx = std::log(x[i]) - mean_x;
    sxy += dx * (std::log(y[i]) - mean_y);
    sxx += dx * dx;
  }
  return sxx > 0 ? sxy / sxx : 0.0;
}

std::uint64_t cost_measure_bytes(const CostMeasureOptions& o, const MeasuredKernel& kernel) {
  const std::uint64_t inputs = mul_bytes(mul_bytes(mul_bytes(4, o.max_tokens), o.d_k), 4);  // q, k, v, out
  return add_bytes(inputs, kernel.scratch_bytes(o.max_tokens, o.max_tokens, o.d_k));
}

CostMeasurement measure_attention_cost(const CostMeasureOptions& o, const MeasuredKernel& kernel) {
  if (o.max_tokens == 0 || o.d_k == 0) fail("tokens", "measure at least 1 token of width d_k >= 1");
  const std::uint64_t available = available_memory();
  if (available && cost_measure_bytes(o, kernel) > available) {
    // The longest n whose measure would fit, for the message.
    std::uint64_t lo = 0, hi = o.max_tokens;
    while (lo < hi) {
      CostMeasureOptions probe = o;
      probe.max_tokens = lo + (hi - lo + 1) / 2;
      if (cost_measure_bytes(probe, kernel) <= available)
        lo = probe.max_tokens;
      else
        hi = probe.max_tokens - 1;
    }
    require_available_memory(
        cost_measure_bytes(o, kernel), "measure",
        fmt::format("timing the {} kernel at n = {} (d_k {})", kernel.name, format_count(o.max_tokens), o.d_k),
        fmt::format("measure up to fewer tokens (at most about {} here)", format_count(lo)));
  }
  CostMeasurement result{kernel.name, o.d_k, o.causal, {}, std::nullopt, std::nullopt, true};
  SplitMix64 rng(o.seed);
  for (const std::uint64_t n : doubling_lengths(o.max_tokens, o.points, kMinMeasuredTokens)) {
    check_deadline();  // a server request's time budget (core/deadline.hpp): checked between lengths
    const std::vector<float> q = random_floats(rng, n * o.d_k), k = random_floats(rng, n * o.d_k),
                             v = random_floats(rng, n * o.d_k);
    std::vector<float> out(n * o.d_k);
    const HeadProblem problem{n, n, o.d_k, q.data(), k.data(), v.data(), o.causal};
    CostPoint point{n, std::numeric_limits<double>::infinity(), 0, 0, 0};
    const Clock::time_point first = Clock::now();
    do {
      release_free_heap();
      const bool reset = reset_peak_rss();
      result.rss_peak_measured = result.rss_peak_measured && reset;
      const std::uint64_t rss_before = memory::resident_bytes();
      memory::reset_peak();
      const std::uint64_t heap_before = memory::current_bytes();
      const Clock::time_point start = Clock::now();
      kernel.run(problem, out);
      point.seconds = std::min(point.seconds, seconds_since(start));
      const std::uint64_t heap_peak = memory::peak_bytes(), rss_peak = memory::resident_peak_bytes();
      point.scratch_peak_bytes = std::max<std::uint64_t>(point.scratch_peak_bytes, heap_peak - heap_before);
      point.rss_peak_bytes = std::max(point.rss_peak_bytes, rss_peak > rss_before ? rss_peak - rss_before : 0);
      ++point.runs;
    } while (seconds_since(first) < o.min_seconds && point.runs < 1000);
    for (float x : out)
      if (!std::isfinite(x))
        throw std::runtime_error(fmt::format("kernel {} gave a non-finite output at n = {}", kernel.name, n));
    result.points.push_back(point);
  }
  std::vector<double> ns, times, memory;
  for (const CostPoint& p : result.points) {
    ns.push_back(static_cast<double>(p.n));
    times.push_back(std::max(p.seconds, 1e-9));
    memory.push_back(static_cast<double>(std::max<std::uint64_t>(p.scratch_peak_bytes, 1)));
  }
  if (ns.size() >= 2) {
    result.time_exponent = fit_exponent(ns, times);
    result.memory_exponent = fit_exponent(ns, memory);
  }
  return result;
}

// ---- the KV cache, decoded --------------------------------------------------------------

namespace {

constexpr std::size_t kVocabulary = 64;

std::uint64_t measured_d_model(const ModelShape& m) { return m.d_model ? m.d_model : m.heads * m.head_dim; }

ModelShape with_layers(ModelShape m, std::uint64_t layers) {
  m.layers = layers;
  return m;
}

}  // namespace

std::uint64_t kv_measure_layers(const KVMeasureOptions& o) {
  const std::uint64_t per_layer = kv_cache_bytes(with_layers(o.model, 1), o.dtype, o.max_context);
  const std::uint64_t available = available_memory();
  const std::uint64_t cap = std::min<std::uint64_t>(available ? available / 2 : UINT64_MAX, o.auto_layers_cap);
  return std::clamp<std::uint64_t>(cap / std::max<std::uint64_t>(per_layer, 1), 1, o.model.layers);
}

std::uint64_t kv_measure_bytes(const KVMeasureOptions& o, std::uint64_t layers) {
  const ModelShape& m = o.model;
  const std::uint64_t d_model = measured_d_model(m);
  const std::uint64_t q_cols = m.heads * m.head_dim, kv_cols = m.kv_heads * m.head_dim;
  std::uint64_t bytes = kv_cache_bytes(with_layers(m, layers), o.dtype, o.max_context);
  bytes = add_bytes(bytes, mul_bytes(mul_bytes(d_model, q_cols + 2 * kv_cols), 4));        // weights
  bytes = add_bytes(bytes, mul_bytes(mul_bytes(kVocabulary, d_model + 2 * kv_cols), 4));   // token table
  bytes = add_bytes(bytes, mul_bytes(mul_bytes(m.heads / m.kv_heads, o.max_context), 4));  // decode scores
  return bytes;
}

KVMeasurement measure_kv_cache(const KVMeasureOptions& o) {
  validate_model_shape(o.model);
  if (o.max_context == 0) fail("context", "measure at least 1 token");
  const ModelShape& m = o.model;
  const std::uint64_t layers = o.layers.value_or(kv_measure_layers(o));
  if (layers < 1 || layers > m.layers)
    fail("measure_layers", fmt::format("{} is outside 1..{} (the model's layers)", layers, m.layers));
  require_available_memory(
      kv_measure_bytes(o, layers), "measure",
      fmt::format("decoding {} layer{} to {} tokens", layers, layers == 1 ? "" : "s", format_count(o.max_context)),
      "measure fewer layers or a shorter context");

  std::set<std::uint64_t> contexts;
  for (std::uint64_t c : doubling_lengths(o.max_context, o.points, 1))
    contexts.insert(c);
  for (std::uint64_t c : o.extra_contexts)
    if (c >= 1 && c <= o.max_context) contexts.insert(c);

  const std::size_t d_model = measured_d_model(m), kv_cols = m.kv_heads * m.head_dim;
  const AttentionLayerWeights weights = random_attention_weights(d_model, m.heads, m.kv_heads, m.head_dim, o.seed);
  // The vocabulary: random token vectors and their keys and values through the weights.
  SplitMix64 rng(o.seed + 1);
  const std::vector<float> embeddings = random_floats(rng, kVocabulary * d_model);
  std::vector<float> keys(kVocabulary * kv_cols), values(kVocabulary * kv_cols);
  for (std::size_t w = 0; w < kVocabulary; ++w) {
    const std::span<const float> x(embeddings.data() + w * d_model, d_model);
    project_row(x, weights.w_k, kv_cols, {keys.data() + w * kv_cols, kv_cols});
    project_row(x, weights.w_v, kv_cols, {values.data() + w * kv_cols, kv_cols});
  }
  std::vector<float> out(m.heads * m.head_dim);

  KVMeasurement result{layers, d_model, {}};
  release_free_heap();
  const std::uint64_t heap_before = heap_bytes_in_use();
  const std::uint64_t rss_before = memory::resident_bytes();
  KVCache cache(layers, m.kv_heads, m.head_dim, o.dtype);
  for (const std::uint64_t context : contexts) {
    check_deadline();
    cache.reserve(context);
    for (std::size_t l = 0; l < layers; ++l)
      while (cache.length(l) + 1 < context) {
        const std::size_t w = rng.next() % kVocabulary;
        cache.append(l, {keys.data() + w * kv_cols, kv_cols}, {values.data() + w * kv_cols, kv_cols});
      }
    const std::size_t w = rng.next() % kVocabulary;
    const Clock::time_point start = Clock::now();
    for (std::size_t l = 0; l < layers; ++l)
      decode_step(weights, cache, l, {embeddings.data() + w * d_model, d_model}, out);
    const double seconds = seconds_since(start);
    for (float x : out)
      if (!std::isfinite(x))
        throw std::runtime_error(fmt::format("decode gave a non-finite output at context {}", context));
    release_free_heap();  // the decode step's scratch is not the cache
    const std::uint64_t heap = heap_bytes_in_use(), rss = memory::resident_bytes();
    result.points.push_back({context, kv_cache_bytes(with_layers(m, layers), o.dtype, context), cache.bytes(),
                             heap > heap_before ? heap - heap_before : 0, rss > rss_before ? rss - rss_before : 0,
                             seconds});
  }
  return result;
}

}  // namespace attnlab
