// An intervention's result for people (a before/after table) and for the API (JSON).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/analysis/intervene.hpp"

namespace attnlab {

// The before/after table as text: one line per token with both outputs, Δ and ‖Δ‖.
std::string format_intervention(const InterventionResult& result, int precision);

// {"applied": [...], "tokens": [...], "after_row": [...], "before": [[...]],
//  "after": [[...]], "delta": [[...]], "delta_norm": [...]}  (docs/api.md)
nlohmann::json intervention_to_json(const InterventionResult& result);

}  // namespace attnlab
