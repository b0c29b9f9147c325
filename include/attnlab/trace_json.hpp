// The trace as JSON: the contract between the engine and every face (run --json, the API,
// the page). Masked logits are null; numbers keep full double precision.
#pragma once
#include <nlohmann/json.hpp>

#include "attnlab/scenario.hpp"
#include "attnlab/trace.hpp"

namespace attnlab {

// {"scenario", "tokens", "source_tokens", "causal", "window", "mask_tokens",
//  "temperature", "positions", "heads": [{"name", "d_k", "d_v", "queries", "keys",
//  "values", "scores", "scaled", "logits", "shifts", "exponentials", "row_sums",
//  "weights", "mixed", "output", "fully_masked", "ablation", "scale"}], "concatenated",
//  "output"}; "ablation" is null or "zero", "mean", "uniform" (output = scale · ablate(mixed)).
nlohmann::json trace_to_json(const Scenario& scenario, const Trace& trace);

// A matrix as a list of rows; non-finite entries (masked logits) become null.
nlohmann::json matrix_to_json(const Matrix& m);

}  // namespace attnlab
