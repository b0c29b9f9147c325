// The trace as JSON: the contract between the engine and every face (run --json, the API,
// the page). Masked logits are null; numbers keep full double precision.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/core/json.hpp"
#include "attnlab/core/trace.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// How a trace is written: which heads keep every intermediate (the others keep what a
// heatmap needs: "name", "d_k", "d_v", "weights", "output", "fully_masked", "ablation",
// "scale"), and how a matrix is written (a list of rows, or a reference into a packed
// reply: PackedArrays::add in attnlab/report/packed_reply.hpp).
struct TraceJsonOptions {
  std::optional<std::vector<std::size_t>> detail_heads;  // nullopt: every head in full
  std::function<nlohmann::json(const Matrix&)> write_matrix = matrix_to_json;
};

// {"scenario", "tokens", "source_tokens", "causal", "window", "mask_tokens",
//  "temperature", "positions", "heads": [{"name", "d_k", "d_v", "queries", "keys",
//  "values", "scores", "scaled", "logits", "shifts", "exponentials", "row_sums",
//  "weights", "mixed", "output", "fully_masked", "ablation", "scale"}], "concatenated",
//  "output"}; "ablation" is null or "zero", "mean", "uniform" (output = scale · ablate(mixed)).
nlohmann::json trace_to_json(const Scenario& scenario, const Trace& trace, const TraceJsonOptions& options = {});

}  // namespace attnlab
