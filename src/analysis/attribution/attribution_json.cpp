// The attribution results as JSON (attnlab/analysis/attribution_json.hpp).
#include "attnlab/analysis/attribution_json.hpp"

#include "attnlab/core/json.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace attnlab {

using nlohmann::json;

namespace {

// values [rows × width] as rows of `width`.
json rows_of(const std::vector<double>& values, std::size_t width) {
  json rows = json::array();
  for (std::size_t start = 0; width && start + width <= values.size(); start += width)
    rows.push_back(
        std::vector<double>(values.begin() + std::ptrdiff_t(start), values.begin() + std::ptrdiff_t(start + width)));
  return rows;
}

json scores_json(const std::vector<Scores>& list) {
  json out = json::object();
  for (const Scores& s : list)
    out[s.name] = s.values;
  return out;
}

json contrast_of(int contrast) { return contrast >= 0 ? json(contrast) : json(); }

}  // namespace

const char* measure_meaning(std::string_view name) {
  static constexpr std::pair<std::string_view, const char*> kMeanings[] = {
      {"attention", "where the heads looked: a similarity of query and key, not what was carried or used"},
      {"value_norms", "the weight times the size of what the source sends; one layer at a time, no residual"},
      {"rollout",
       "the weights multiplied through the layers, the residual as half of each; assumes mixing is the weights"},
      {"alti",
       "each source's share of each layer's output, the residual counted, rolled out; linearised, MLPs left out"},
      {"dla", "what the OV paths write along the answer; the direct effect only, not what later layers made of it"},
      {"grad_x_input", "the first-order change were the input scaled away; local, blind where the model saturates"},
      {"integrated_gradients",
       "the gradient along the path from average tokens; adds up to m(x) − m(x'), so it depends on x'"},
      {"erasure", "what the attention took from the token: an intervention, the model's own answer"},
      {"zero_ablation", "what the head's output is worth: an intervention, though zero is off the usual range"},
      {"mean_ablation", "what the head's information is worth, its typical output kept: an intervention"},
  };
  for (const auto& [measure, meaning] : kMeanings)
    if (measure == name) return meaning;
  return "";
}

std::string lens_row_name(std::size_t row) { return row == 0 ? "embedding" : fmt::format("after {}", row - 1); }

std::string patching_row_name(std::size_t row, std::size_t rows) {
  return row + 1 < rows ? fmt::format("into {}", row) : std::string("after the last");
}

json attribution_json(const LogitAttribution& a, std::size_t heads, const TokenText& token) {
  json parts = json::array(), sources = json::array();
  for (const PartContribution& p : a.parts)
    parts.push_back({{"kind", part_kind_name(p.kind)},
                     {"layer", p.layer == kNotInABlock ? json() : json(p.layer)},
                     {"head", p.head == kNotInABlock ? json() : json(p.head)},
                     {"logit", p.logit}});
  for (const json& layer : rows_of(a.sources, heads * a.n)) {
    json per_head = json::array();
    for (std::size_t h = 0; h < heads; ++h)
      per_head.push_back(json(
          std::vector<double>(layer.begin() + std::ptrdiff_t(h * a.n), layer.begin() + std::ptrdiff_t((h + 1) * a.n))));
    sources.push_back(std::move(per_head));
  }
  return {{"position", a.position},
          {"target", a.target},
          {"target_token", token(a.target)},
          {"contrast", contrast_of(a.contrast)},
          {"logit", a.logit},
          {"final_bias", a.final_bias},
          {"parts", parts},
          {"heads", rows_of(a.heads, heads)},
          {"sources", sources},
          {"by_source", a.by_source}};
}

json lens_json(const LogitLens& l, const TokenText& token) {
  json rows = json::array();
  for (std::size_t r = 0; r < l.rows; ++r) {
    json row = json::array();
    for (std::size_t i = 0; i < l.n; ++i) {
      const LensCell& cell = l.cells[r * l.n + i];
      row.push_back({{"top", cell.top},
                     {"top_token", token(cell.top)},
                     {"top_probability", cell.top_probability},
                     {"target_probability", cell.target_probability},
                     {"target_rank", cell.target_rank}});
    }
    rows.push_back({{"layer", lens_row_name(r)}, {"cells", std::move(row)}});
  }
  return {{"target", l.target}, {"target_token", token(l.target)}, {"rows", rows}};
}

json patching_json(const ResidualPatching& p, const TokenText& token) {
  json paths = json::array();
  for (std::size_t k = 0; k < p.paths.size(); ++k)
    paths.push_back({{"path", to_string(p.paths[k])}, {"restored", p.paths_restored[k]}});
  json rows = json::array();
  for (std::size_t r = 0; r < p.rows; ++r)
    rows.push_back({{"layer", patching_row_name(r, p.rows)},
                    {"restored", std::vector<double>(p.restored.begin() + std::ptrdiff_t(r * p.n),
                                                     p.restored.begin() + std::ptrdiff_t((r + 1) * p.n))}});
  return {{"target", p.target},
          {"target_token", token(p.target)},
          {"contrast", p.contrast},
          {"contrast_token", token(p.contrast)},
          {"clean_metric", p.clean},
          {"corrupt_metric", p.corrupt},
          {"rows", rows},
          {"heads", rows_of(p.heads_restored, p.heads)},
          {"mlps", p.mlps_restored},
          {"paths", paths}};
}

json mixing_json(const ContextMixing& m) {
  json attention = json::array();
  for (const json& layer : rows_of(m.attention, m.heads * m.n))
    attention.push_back(rows_of(layer.get<std::vector<double>>(), m.n));
  return {{"position", m.position},
          {"attention", attention},
          {"value_norms", rows_of(m.value_norms, m.n)},
          {"rollout", m.rollout},
          {"alti", m.alti},
          {"attention_map", rows_of(m.attention_map, m.n)},
          {"rollout_map", rows_of(m.rollout_map, m.n)},
          {"alti_map", rows_of(m.alti_map, m.n)}};
}

json verdict_json(const Verdict& v, const TokenText& token) {
  json meanings = json::object();
  for (const std::vector<Scores>* list :
       {&v.token_measures, &v.token_interventions, &v.head_measures, &v.head_interventions})
    for (const Scores& s : *list)
      meanings[s.name] = measure_meaning(s.name);
  json agreements = json::array();
  for (const Agreement& a : v.agreements)
    agreements.push_back({{"measure", a.measure},
                          {"intervention", a.intervention},
                          {"kendall", number_or_null(a.kendall)},
                          {"spearman", number_or_null(a.spearman)}});
  return {{"position", v.position},
          {"layers", v.layers},
          {"heads", v.heads},
          {"target", v.target},
          {"target_token", token(v.target)},
          {"contrast", contrast_of(v.contrast)},
          {"metric", v.metric},
          {"tokens_measured", scores_json(v.token_measures)},
          {"tokens_intervened", scores_json(v.token_interventions)},
          {"heads_measured", scores_json(v.head_measures)},
          {"heads_intervened", scores_json(v.head_interventions)},
          {"agreements", agreements},
          {"meanings", meanings}};
}

json spread_json(const std::vector<AgreementSpread>& spread) {
  json out = json::array();
  for (const AgreementSpread& s : spread)
    out.push_back({{"measure", s.measure},
                   {"intervention", s.intervention},
                   {"texts", s.texts},
                   {"kendall_mean", number_or_null(s.kendall_mean)},
                   {"kendall_sd", number_or_null(s.kendall_sd)},
                   {"spearman_mean", number_or_null(s.spearman_mean)},
                   {"spearman_sd", number_or_null(s.spearman_sd)}});
  return out;
}

}  // namespace attnlab
