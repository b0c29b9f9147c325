// Serialises a Trace following the contract in docs/api.md (and issue 2's `run --json`).
#include "attnlab/trace_json.hpp"

#include <cmath>

#include "attnlab/attention.hpp"

namespace attnlab {

using nlohmann::json;

namespace {
json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }
}  // namespace

json matrix_to_json(const Matrix& m) {
  json rows = json::array();
  for (std::size_t i = 0; i < m.rows; ++i) {
    json row = json::array();
    for (double x : m.row(i)) row.push_back(number_or_null(x));
    rows.push_back(std::move(row));
  }
  return rows;
}

json trace_to_json(const Scenario& scenario, const Trace& trace) {
  json heads = json::array();
  for (const HeadTrace& h : trace.heads) {
    json fully_masked = json::array();
    for (bool b : h.fully_masked) fully_masked.push_back(b);
    heads.push_back({{"name", h.name},
                     {"d_k", h.d_k},
                     {"d_v", h.d_v},
                     {"queries", matrix_to_json(h.queries)},
                     {"keys", matrix_to_json(h.keys)},
                     {"values", matrix_to_json(h.values)},
                     {"scores", matrix_to_json(h.scores)},
                     {"scaled", matrix_to_json(h.scaled)},
                     {"logits", matrix_to_json(h.logits)},
                     {"shifts", h.shifts},
                     {"exponentials", matrix_to_json(h.exponentials)},
                     {"row_sums", h.row_sums},
                     {"weights", matrix_to_json(h.weights)},
                     {"mixed", matrix_to_json(h.mixed)},
                     {"output", matrix_to_json(h.output)},
                     {"fully_masked", fully_masked},
                     {"ablation", h.ablation == HeadAblation::none ? json(nullptr) : json(std::string(to_string(h.ablation)))},
                     {"scale", h.scale}});
  }
  return {{"scenario", scenario.name},
          {"tokens", trace.tokens},
          {"source_tokens", trace.source_tokens},
          {"causal", scenario.mask.causal},
          {"window", scenario.mask.window ? json(*scenario.mask.window) : json(nullptr)},
          {"mask_tokens", scenario.mask.hidden_keys},
          {"temperature", scenario.temperature},
          {"positions", describe(scenario.positions)},
          {"heads", heads},
          {"concatenated", matrix_to_json(trace.concatenated)},
          {"output", matrix_to_json(trace.output)}};
}

}  // namespace attnlab
