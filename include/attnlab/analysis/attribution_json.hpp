// The attribution results as JSON, the same in every face (`attnlab model attribute | lens |
// patch | verdict --json` and the server's POST api/model/attribute and api/model/analysis,
// docs/api.md): what the CLI prints is what the lab draws. A token's text comes from the
// caller (`token`: the model's tokenizer, or "#id" without one); NaN becomes null.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/analysis/attribution.hpp"

namespace attnlab {

using TokenText = std::function<std::string(int id)>;

// {"position", "target", "target_token", "contrast", "logit", "final_bias", "parts": [{"kind",
// "layer", "head", "logit"}], "heads" [L][H], "sources" [L][H][n], "by_source" [n]}
nlohmann::json attribution_json(const LogitAttribution& a, std::size_t heads, const TokenText& token);

// {"target", "target_token", "rows": [{"layer": "embedding" | "after L", "cells": [{"top",
// "top_token", "top_probability", "target_probability", "target_rank"}]}]}
nlohmann::json lens_json(const LogitLens& lens, const TokenText& token);

// {"target", "target_token", "contrast", "contrast_token", "clean_metric", "corrupt_metric",
// "rows": [{"layer": "into L" | "after the last", "restored" [n]}], "heads" [L][H], "mlps" [L]}
nlohmann::json patching_json(const ResidualPatching& p, const TokenText& token);

// {"position", "attention" [L][H][n], "value_norms" [L][n], "rollout" [n], "alti" [n],
//  "attention_map", "rollout_map", "alti_map" [n][n]}
nlohmann::json mixing_json(const ContextMixing& m);

// {"position", "layers", "heads", "target", "target_token", "contrast", "metric", "tokens_measured": {name: [n]},
// "tokens_intervened": {"erasure": [n]}, "heads_measured": {"dla": [L·H]}, "heads_intervened":
// {"zero_ablation", "mean_ablation"}, "agreements": [{"measure", "intervention", "kendall", "spearman"}],
// "meanings": {name: what it can and cannot establish}}
nlohmann::json verdict_json(const Verdict& v, const TokenText& token);

// What a measure or an intervention of the verdict can and cannot establish, in one line
// (plausible vs faithful, as the probe says it for toy heads); "" for a name it does not know.
const char* measure_meaning(std::string_view name);

// [{"measure", "intervention", "texts", "kendall_mean", "kendall_sd", "spearman_mean", "spearman_sd"}]
nlohmann::json spread_json(const std::vector<AgreementSpread>& spread);

// The lens's and patching's row names: "embedding" / "after L"; "into L" / "after the last".
std::string lens_row_name(std::size_t row);
std::string patching_row_name(std::size_t row, std::size_t rows);

}  // namespace attnlab
