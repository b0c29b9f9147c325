// cost and kv: one check, one entry and one reply for every face (operations/capacity.hpp).
#include "attnlab/operations/capacity.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnlab/analysis/capacity_json.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/report/plot.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

json optional_number(const std::optional<double>& x) { return x ? json(*x) : json(nullptr); }

}  // namespace

// ---- cost ----------------------------------------------------------------------------------

CostResult price_cost(const CostRequest& r, const MeasureLimits& limits) {
  if (!r.plot.empty()) require_plot_path(r.plot, "plot");
  validate_cost_shape(r.shape);
  CostResult result{r.shape, {}, std::nullopt};
  for (std::uint64_t n : r.tokens)
    result.rows.push_back(grid_cost(n, r.shape));  // refuses 0 and lengths whose counts overflow
  const MeasuredKernel& kernel = find_measured_kernel(r.kernel, "kernel");
  if (!r.measure) return result;
  const std::uint64_t longest = *std::max_element(r.tokens.begin(), r.tokens.end());
  if (longest > limits.max_tokens)
    fail("measure", fmt::format("{} measures up to {} tokens, not {}; {}", limits.who, limits.max_tokens,
                                format_count(longest), limits.elsewhere));
  CostMeasureOptions options{.max_tokens = longest, .d_k = r.shape.d_k(), .causal = r.causal};
  if (const std::uint64_t bytes = cost_measure_bytes(options, kernel); bytes > limits.max_bytes)
    fail("measure", fmt::format("timing the {} kernel at n = {} with d_k {} holds {}; {} measures within {}; "
                                "use fewer d_model per head, or {}",
                                kernel.name, format_count(longest), options.d_k, format_bytes(bytes), limits.who,
                                format_bytes(limits.max_bytes), limits.elsewhere));
  return result;
}

void measure_cost(const CostRequest& r, CostResult& result) {
  if (!r.measure) return;
  const CostMeasureOptions options{
      .max_tokens = *std::max_element(r.tokens.begin(), r.tokens.end()), .d_k = r.shape.d_k(), .causal = r.causal};
  result.measured = measure_attention_cost(options, find_measured_kernel(r.kernel, "kernel"));
}

json cost_json(const CostResult& result) {
  json rows = json::array();
  for (const GridCost& c : result.rows)
    rows.push_back(grid_cost_json(c));
  json reply = {{"shape", cost_shape_json(result.shape)}, {"rows", std::move(rows)}, {"measured", nullptr}};
  if (const std::optional<CostMeasurement>& m = result.measured) {
    json points = json::array();
    for (const CostPoint& p : m->points)
      points.push_back({{"n", p.n},
                        {"seconds", p.seconds},
                        {"runs", p.runs},
                        {"kernel_bytes", p.scratch_peak_bytes},
                        {"grid_formula_bytes", p.n * p.n * 4},
                        {"rss_peak_bytes", m->rss_peak_measured ? json(p.rss_peak_bytes) : json(nullptr)}});
    reply["measured"] = {{"kernel", m->kernel},
                         {"d_k", m->d_k},
                         {"causal", m->causal},
                         {"points", std::move(points)},
                         {"time_exponent", optional_number(m->time_exponent)},
                         {"memory_exponent", optional_number(m->memory_exponent)}};
  }
  return reply;
}

// ---- kv ------------------------------------------------------------------------------------

KvResult price_kv(const KvRequest& r, const MeasureLimits& limits) {
  if (!r.plot.empty()) require_plot_path(r.plot, "plot");
  if (r.measure_layers && !r.measure) fail("measure_layers", "only means something when measure is on");
  const ModelShape model = resolve_model_shape(r.model, r.shape);
  KvResult result{kv_report(model, r.dtype, r.context, r.budget.bytes), std::nullopt, std::nullopt};
  if (!r.measure) return result;
  KVMeasureOptions options;
  options.model = model;
  options.dtype = r.dtype;
  options.max_context = *std::max_element(r.context.begin(), r.context.end());
  options.extra_contexts = r.context;
  options.auto_layers_cap = std::min(options.auto_layers_cap, limits.max_bytes / 2);
  options.layers = r.measure_layers;
  // The cache, the random weights and the token table, before any is made.
  if (limits.max_bytes != std::numeric_limits<std::uint64_t>::max()) {
    const std::uint64_t layers = r.measure_layers.value_or(kv_measure_layers(options));
    options.layers = layers;
    if (layers <= model.layers && kv_measure_bytes(options, layers) > limits.max_bytes)
      fail("measure", fmt::format("{} measures within {}, and {} layers at {} tokens with their weights take "
                                  "{}; {}, or fewer measure_layers or a shorter context",
                                  limits.who, format_bytes(limits.max_bytes), layers, format_count(options.max_context),
                                  format_bytes(kv_measure_bytes(options, layers)), limits.elsewhere));
  }
  result.measure = options;
  return result;
}

void measure_kv(KvResult& result) {
  if (result.measure) result.measured = measure_kv_cache(*result.measure);
}

json kv_json(const KvResult& result) {
  json reply = kv_report_json(result.report);
  reply["measured"] = nullptr;
  if (const std::optional<KVMeasurement>& m = result.measured) {
    json points = json::array();
    for (const KVPoint& p : m->points)
      points.push_back({{"context", p.context},
                        {"formula_bytes", p.formula_bytes},
                        {"cache_bytes", p.cache_bytes},
                        {"allocator_bytes", p.allocator_bytes},
                        {"rss_bytes", p.rss_bytes},
                        {"decode_seconds", p.decode_seconds}});
    reply["measured"] = {{"layers", m->layers}, {"d_model", m->d_model}, {"points", std::move(points)}};
  }
  return reply;
}

}  // namespace attnlab
