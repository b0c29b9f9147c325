// A Scenario written back as a scenario document (docs/scenario-format.md).
#include <nlohmann/json.hpp>

#include "attnlab/core/json.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

using nlohmann::json;

json scenario_to_json(const Scenario& s) {
  json positions = describe(s.positions);
  if (s.positions.kind == PositionKind::sincos_pair)
    positions = {{"kind", "sincos-pair"}, {"omega", s.positions.omega}};
  else if (s.positions.kind == PositionKind::sinusoidal)
    positions = "sinusoidal";
  else if (s.positions.kind == PositionKind::rope && s.positions.rope != Rope{}) {
    positions = {{"kind", "rope"}, {"pairs", s.positions.rope.split_half ? "split-half" : "interleaved"}};
    if (!s.positions.rope.frequencies.empty()) positions["frequencies"] = s.positions.rope.frequencies;
  }

  json heads = json::array();
  for (const HeadSpec& h : s.heads) {
    if (h.random_seed)
      heads.push_back({{"name", h.name}, {"random", *h.random_seed}, {"d_k", h.w_q.cols}, {"d_v", h.w_v.cols}});
    else
      heads.push_back({{"name", h.name},
                       {"w_q", matrix_to_json(h.w_q)},
                       {"w_k", matrix_to_json(h.w_k)},
                       {"w_v", matrix_to_json(h.w_v)}});
    if (h.ablation != HeadAblation::none) heads.back()["ablation"] = std::string(to_string(h.ablation));
    if (h.scale != 1.0) heads.back()["scale"] = h.scale;
    for (const auto& [key, row] :
         {std::pair{"b_q", &h.b_q}, {"b_k", &h.b_k}, {"b_v", &h.b_v}, {"q_norm", &h.q_norm}, {"k_norm", &h.k_norm}})
      if (!row->empty()) heads.back()[key] = *row;
    if (!h.q_norm.empty() || !h.k_norm.empty()) heads.back()["norm_epsilon"] = h.norm_epsilon;
  }
  json doc = {
      {"format", kScenarioFormat},
      {"name", s.name},
      {"description", s.description},
      {"tokens", s.tokens},
      {"embeddings", matrix_to_json(s.embeddings)},
      {"positions", positions},
      {"heads", heads},
      {"w_o", s.w_o ? matrix_to_json(*s.w_o) : json(nullptr)},
      {"source", s.source ? json{{"tokens", s.source->tokens}, {"embeddings", matrix_to_json(s.source->embeddings)}}
                          : json(nullptr)},
      {"causal", s.mask.causal},
      {"window", s.mask.window ? json(*s.mask.window) : json(nullptr)},
      {"mask_tokens", s.mask.hidden_keys},
      {"temperature", s.temperature},
      {"precision", s.precision}};
  if (!s.notes.empty()) doc["notes"] = s.notes;
  if (s.score_scale > 0) doc["score_scale"] = s.score_scale;
  if (s.query) doc["query"] = *s.query;
  if (s.readout) doc["readout"] = {{"matrix", matrix_to_json(s.readout->matrix)}, {"labels", s.readout->labels}};
  return doc;
}

}  // namespace attnlab
