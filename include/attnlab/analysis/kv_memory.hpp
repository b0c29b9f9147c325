// How much memory a KV cache takes, from the formula, beside the model's weights:
//
//   KV cache bytes = 2 × L × H_kv × d_head × context × bytes per value
//
// (2: one key and one value row per token, per layer and KV head). And the reverse
// question: the longest context that fits in a memory budget beside the weights.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnlab/analysis/models.hpp"
#include "attnlab/core/dtype.hpp"

namespace attnlab {

// Limits on a shape given by hand, so that only the context can make a count overflow.
inline constexpr std::uint64_t kMaxModelLayers = 1u << 16;
inline constexpr std::uint64_t kMaxModelHeads = 1u << 16;
inline constexpr std::uint64_t kMaxHeadDim = 1u << 16;

// A shape given by hand, in full or over a preset (`attnlab kv --layers ...`).
struct ShapeOverrides {
  std::optional<std::uint64_t> layers, heads, kv_heads, head_dim, d_model, parameters;
};

// The preset called `model` with the overrides applied, or, without a model, the shape the
// overrides give: layers, kv_heads and head_dim are then required, heads defaults to
// kv_heads, d_model to heads × head_dim, parameters to 0 (unknown). A preset whose shape is
// overridden loses its parameter count (it no longer describes that checkpoint) unless
// parameters is given too. Throws InputError naming "model", or the missing field, and
// validates the result (validate_model_shape).
ModelShape resolve_model_shape(const std::optional<std::string>& model, const ShapeOverrides& overrides);

// Checks layers, heads, kv_heads, head_dim >= 1 and within the limits, and that kv_heads
// divides heads (each KV head serves heads / kv_heads query heads). Throws InputError
// naming the field (layers, heads, kv_heads, head_dim).
void validate_model_shape(const ModelShape& model);

// 2 × L × H_kv × d_head × bytes: what one token adds to the cache.
std::uint64_t kv_bytes_per_token(const ModelShape& model, DType dtype);

// The formula at `context` tokens. Throws InputError naming "context" on 64-bit overflow.
std::uint64_t kv_cache_bytes(const ModelShape& model, DType dtype, std::uint64_t context);

// parameters × bytes: the weights in the same dtype (0 when the parameter count is unknown).
std::uint64_t weight_bytes(const ModelShape& model, DType dtype);

struct KVRow {
  std::uint64_t context = 0;
  std::uint64_t cache_bytes = 0;
  std::uint64_t total_bytes = 0;    // cache + weights
  double cache_over_weights = 0.0;  // 0 when the weights are unknown
  bool cache_exceeds_weights = false;
};

struct KVBudget {
  std::uint64_t budget_bytes = 0;
  std::uint64_t left_for_cache = 0;  // budget - weights, or 0 when the weights do not fit
  bool weights_fit = false;
  std::uint64_t max_context = 0;  // ⌊left / bytes per token⌋
};

struct KVReport {
  ModelShape model;
  DType dtype = DType::f16;
  std::uint64_t bytes_per_token = 0;
  std::uint64_t weight_bytes = 0;                  // 0 when unknown
  std::optional<std::uint64_t> crossover_context;  // the first context whose cache exceeds the weights
  std::vector<KVRow> rows;
  std::optional<KVBudget> budget;
};

// The table `attnlab kv` prints and POST /api/kv returns. Validates the shape and each
// context (>= 1; "context" named on overflow).
KVReport kv_report(const ModelShape& model, DType dtype, std::span<const std::uint64_t> contexts,
                   std::optional<std::uint64_t> budget_bytes);

}  // namespace attnlab
