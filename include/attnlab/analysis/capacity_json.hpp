// The capacity figures as JSON (docs/api.md's POST /api/cost and /api/kv): the server's
// replies and the Python module's cost() and kv() are made of these.
#pragma once
#include <nlohmann/json.hpp>

#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/kv_memory.hpp"

namespace attnlab {

// One n's grid: {"n", "dense_cells", "causal_cells", ..., "grid_bytes_layer"}.
nlohmann::json grid_cost_json(const GridCost& cost);
// {"d_model", "heads", "d_k", "layers", "dtype", "dtype_bytes", "window"}.
nlohmann::json cost_shape_json(const CostShape& shape);
// {"name", "source", "layers", "d_model", "heads", "kv_heads", "head_dim", "parameters" (null
// when unknown), "note"}.
nlohmann::json model_shape_json(const ModelShape& model);
// {"model", "dtype", "dtype_bytes", "bytes_per_token", "weight_bytes" (null when unknown),
// "crossover_context", "rows": [{"context", "cache_bytes", "total_bytes",
// "cache_over_weights", "cache_exceeds_weights"}], "budget" (null without one)}.
nlohmann::json kv_report_json(const KVReport& report);

}  // namespace attnlab
