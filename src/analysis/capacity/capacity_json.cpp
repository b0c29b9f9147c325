// The capacity figures as JSON (attnlab/analysis/capacity_json.hpp).
#include "attnlab/analysis/capacity_json.hpp"

#include "attnlab/core/dtype.hpp"

namespace attnlab {

using nlohmann::json;

json grid_cost_json(const GridCost& c) {
  return {{"n", c.n},
          {"dense_cells", c.dense_cells},
          {"causal_cells", c.causal_cells},
          {"window_cells", c.window_cells},
          {"strided_stride", c.strided_stride},
          {"strided_cells", c.strided_cells},
          {"flops_layer_dense", c.flops_layer_dense},
          {"flops_layer_causal", c.flops_layer_causal},
          {"flops_layer_window", c.flops_layer_window},
          {"flops_layer_strided", c.flops_layer_strided},
          {"flops_model_dense", c.flops_model_dense},
          {"flops_model_causal", c.flops_model_causal},
          {"grid_bytes_head", c.grid_bytes_head},
          {"grid_bytes_layer", c.grid_bytes_layer}};
}

json cost_shape_json(const CostShape& shape) {
  return {{"d_model", shape.d_model},
          {"heads", shape.heads},
          {"d_k", shape.d_k()},
          {"layers", shape.layers},
          {"dtype", dtype_name(shape.dtype)},
          {"dtype_bytes", dtype_bytes(shape.dtype)},
          {"window", shape.window},
          {"stride", shape.stride}};
}

json model_shape_json(const ModelShape& model) {
  return {{"name", model.name},         {"source", model.source},
          {"layers", model.layers},     {"d_model", model.d_model},
          {"heads", model.heads},       {"kv_heads", model.kv_heads},
          {"head_dim", model.head_dim}, {"parameters", model.parameters ? json(model.parameters) : json(nullptr)},
          {"note", model.note}};
}

json kv_report_json(const KVReport& r) {
  json rows = json::array();
  for (const KVRow& row : r.rows)
    rows.push_back({{"context", row.context},
                    {"cache_bytes", row.cache_bytes},
                    {"total_bytes", row.total_bytes},
                    {"cache_over_weights", r.weight_bytes ? json(row.cache_over_weights) : json(nullptr)},
                    {"cache_exceeds_weights", row.cache_exceeds_weights}});
  json out = {{"model", model_shape_json(r.model)},
              {"dtype", dtype_name(r.dtype)},
              {"dtype_bytes", dtype_bytes(r.dtype)},
              {"bytes_per_token", r.bytes_per_token},
              {"weight_bytes", r.weight_bytes ? json(r.weight_bytes) : json(nullptr)},
              {"crossover_context", r.crossover_context ? json(*r.crossover_context) : json(nullptr)},
              {"rows", std::move(rows)},
              {"budget", nullptr}};
  if (r.budget)
    out["budget"] = {{"budget_bytes", r.budget->budget_bytes},
                     {"weights_fit", r.budget->weights_fit},
                     {"left_for_cache", r.budget->left_for_cache},
                     {"max_context", r.budget->max_context}};
  return out;
}

}  // namespace attnlab
