// Serialises a Trace following the contract in docs/api.md (and `attnlab run --json`).
#include "attnlab/report/trace_json.hpp"

#include <algorithm>
#include <cmath>

#include "attnlab/core/attention.hpp"

namespace attnlab {

using nlohmann::json;

json trace_to_json(const Scenario& scenario, const Trace& trace, const TraceJsonOptions& options) {
  const auto& write = options.write_matrix;
  json heads = json::array();
  for (std::size_t h = 0; h < trace.heads.size(); ++h) {
    const HeadTrace& head = trace.heads[h];
    json fully_masked = json::array();
    for (bool b : head.fully_masked)
      fully_masked.push_back(b);
    json out = {
        {"name", head.name},
        {"d_k", head.d_k},
        {"d_v", head.d_v},
        {"weights", write(head.weights)},
        {"output", write(head.output)},
        {"fully_masked", fully_masked},
        {"ablation", head.ablation == HeadAblation::none ? json(nullptr) : json(std::string(to_string(head.ablation)))},
        {"scale", head.scale}};
    const auto& keep = options.detail_heads;
    if (!keep || std::find(keep->begin(), keep->end(), h) != keep->end()) {
      out["queries"] = write(head.queries);
      out["keys"] = write(head.keys);
      if (!head.queries_unrotated.data.empty()) {
        out["queries_unrotated"] = write(head.queries_unrotated);
        out["keys_unrotated"] = write(head.keys_unrotated);
      }
      out["values"] = write(head.values);
      out["scores"] = write(head.scores);
      out["scaled"] = write(head.scaled);
      out["logits"] = write(head.logits);
      out["shifts"] = head.shifts;
      out["exponentials"] = write(head.exponentials);
      out["row_sums"] = head.row_sums;
      out["mixed"] = write(head.mixed);
    }
    heads.push_back(std::move(out));
  }
  // Rotary positions: the pairs and every pair's frequency (the default's written out), so
  // the lab can show a score as a function of the offset between query and key.
  json rope = nullptr;
  if (scenario.positions.kind == PositionKind::rope && !trace.heads.empty()) {
    const Rope& r = scenario.positions.rope;
    rope = {{"pairs", r.split_half ? "split-half" : "interleaved"},
            {"frequencies", r.pair_frequencies(trace.heads[0].d_k)}};
  }
  return {{"scenario", scenario.name},
          {"tokens", trace.tokens},
          {"source_tokens", trace.source_tokens},
          {"causal", scenario.mask.causal},
          {"window", scenario.mask.window ? json(*scenario.mask.window) : json(nullptr)},
          {"mask_tokens", scenario.mask.hidden_keys},
          {"temperature", scenario.temperature},
          {"score_scale", scenario.score_scale},  // 0: scaled = score / √d_k
          {"positions", describe(scenario.positions)},
          {"rope", rope},
          {"heads", heads},
          {"concatenated", write(trace.concatenated)},
          {"output", write(trace.output)}};
}

}  // namespace attnlab
