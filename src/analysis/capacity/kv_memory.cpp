// The KV-cache formula, the weights beside it, and the longest context a budget allows.
#include "attnlab/analysis/kv_memory.hpp"

#include <fmt/format.h>

#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

void validate_model_shape(const ModelShape& m) {
  require_in_range("layers", m.layers, kMaxModelLayers);
  require_in_range("heads", m.heads, kMaxModelHeads);
  require_in_range("kv_heads", m.kv_heads, kMaxModelHeads);
  require_in_range("head_dim", m.head_dim, kMaxHeadDim);
  if (m.heads % m.kv_heads != 0)
    fail("kv_heads", fmt::format("{} KV heads do not divide {} query heads; each KV head serves H / H_kv "
                                 "query heads, so give a divisor of {} (H_kv = H without grouped-query attention)",
                                 m.kv_heads, m.heads, m.heads));
}

ModelShape resolve_model_shape(const std::optional<std::string>& model, const ShapeOverrides& o) {
  const bool shape_given = o.layers || o.heads || o.kv_heads || o.head_dim || o.d_model;
  ModelShape m;
  if (model) {
    m = find_model(*model, "model");
    if (shape_given) {
      m.name += " (shape changed)";
      m.parameters = 0;
      m.note.clear();
    }
  } else {
    if (!shape_given && !o.parameters)
      fail("model", fmt::format("give a model (one of: {}) or a shape: layers, KV heads and head dim", model_names()));
    for (const auto& [field, value] :
         {std::pair{"layers", o.layers}, {"kv_heads", o.kv_heads}, {"head_dim", o.head_dim}})
      if (!value)
        fail(field, fmt::format("missing; a shape without a model needs layers, KV heads and head dim "
                                "(or give a model: {})",
                                model_names()));
    m.name = "custom";
    m.source = "given by hand";
  }
  if (o.layers) m.layers = *o.layers;
  if (o.kv_heads) m.kv_heads = *o.kv_heads;
  if (o.head_dim) m.head_dim = *o.head_dim;
  if (o.heads)
    m.heads = *o.heads;
  else if (!model)
    m.heads = m.kv_heads;
  if (o.parameters) m.parameters = *o.parameters;
  validate_model_shape(m);
  if (o.d_model)
    m.d_model = *o.d_model;
  else if (!model || !m.d_model)
    m.d_model = m.heads * m.head_dim;
  if (m.d_model < 1 || m.d_model > kMaxModelHeads * kMaxHeadDim)
    fail("d_model", fmt::format("{} is outside 1..{}", m.d_model, format_count(kMaxModelHeads * kMaxHeadDim)));
  return m;
}

std::uint64_t kv_bytes_per_token(const ModelShape& m, DType dtype) {
  // ≤ 2 · 2^16 · 2^16 · 2^16 · 4 = 2^51 within the limits: no overflow.
  return 2 * m.layers * m.kv_heads * m.head_dim * dtype_bytes(dtype);
}

std::uint64_t kv_cache_bytes(const ModelShape& m, DType dtype, std::uint64_t context) {
  const std::uint64_t per_token = kv_bytes_per_token(m, dtype);
  if (const auto bytes = checked_mul(per_token, context)) return *bytes;
  fail("context", fmt::format("{} tokens × {} bytes per token overflows 64 bits; the largest context "
                              "this shape can count is {}",
                              format_count(context), format_count(per_token), format_count(UINT64_MAX / per_token)));
}

std::uint64_t weight_bytes(const ModelShape& m, DType dtype) {
  if (const auto bytes = checked_mul(m.parameters, dtype_bytes(dtype))) return *bytes;
  fail("params",
       fmt::format("{} parameters × {} bytes overflows 64 bits", format_count(m.parameters), dtype_bytes(dtype)));
}

KVReport kv_report(const ModelShape& model, DType dtype, std::span<const std::uint64_t> contexts,
                   std::optional<std::uint64_t> budget_bytes) {
  validate_model_shape(model);
  KVReport r;
  r.model = model;
  r.dtype = dtype;
  r.bytes_per_token = kv_bytes_per_token(model, dtype);
  r.weight_bytes = weight_bytes(model, dtype);
  if (r.weight_bytes > 0) r.crossover_context = r.weight_bytes / r.bytes_per_token + 1;
  for (const std::uint64_t context : contexts) {
    if (context == 0) fail("context", "0 tokens has no cache; give context lengths >= 1");
    KVRow row;
    row.context = context;
    row.cache_bytes = kv_cache_bytes(model, dtype, context);
    const auto total = checked_add(row.cache_bytes, r.weight_bytes);
    if (!total) fail("context", fmt::format("{} tokens: cache plus weights overflows 64 bits", format_count(context)));
    row.total_bytes = *total;
    if (r.weight_bytes > 0) {
      row.cache_over_weights = static_cast<double>(row.cache_bytes) / static_cast<double>(r.weight_bytes);
      row.cache_exceeds_weights = row.cache_bytes > r.weight_bytes;
    }
    r.rows.push_back(row);
  }
  if (budget_bytes) {
    KVBudget b;
    b.budget_bytes = *budget_bytes;
    b.weights_fit = r.weight_bytes <= *budget_bytes;
    b.left_for_cache = b.weights_fit ? *budget_bytes - r.weight_bytes : 0;
    b.max_context = b.left_for_cache / r.bytes_per_token;
    r.budget = b;
  }
  return r;
}

}  // namespace attnlab
