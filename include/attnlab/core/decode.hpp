// Decoding: attention for the newest token(s) only, against a KV cache, as a generating
// model runs it. The reference decode: a straightforward loop over the cache, in f32 with
// the softmax in f64; fast kernels (split-K) are checked against it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attnlab/core/kv_cache.hpp"

namespace attnlab {

// Attention of the newest `n_new` tokens of `layer` against everything the cache holds for
// that layer. The new tokens' keys and values must already be appended; new token t
// (0-based) sits at position p = length(layer) - n_new + t and sees keys 0..p (causal).
//   queries  [n_new × heads × head_dim]  token t, head h at (t·heads + h)·head_dim
//   out      [n_new × heads × head_dim]  the same layout: softmax(q·Kᵀ/√d_head)·V per head
// `heads` is H, a multiple of the cache's H_kv; query head h reads KV head h / (H / H_kv).
void decode_attention(const KVCache& cache, std::size_t layer, std::size_t heads, std::span<const float> queries,
                      std::size_t n_new, std::span<float> out);

// q · k over d floats, with 16 independent partial sums so the compiler can vectorise it
// (the f32 loops of the reference decode and the measured grid kernel share it).
float dot_f32(const float* a, const float* b, std::size_t d);

// One layer's attention projections in f32 (row-vector convention: q = x · W_Q):
//   w_q [d_model × heads·head_dim]     query head h is columns h·head_dim ..
//   w_k [d_model × kv_heads·head_dim]  KV head g is columns g·head_dim ..
//   w_v [d_model × kv_heads·head_dim]
struct AttentionLayerWeights {
  std::size_t d_model = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::vector<float> w_q, w_k, w_v;
};

// Weights drawn N(0, 1/d_model) from attnlab's seeded generator (so q, k, v have entries
// of about unit size for inputs of unit-size entries).
AttentionLayerWeights random_attention_weights(std::size_t d_model, std::size_t heads, std::size_t kv_heads,
                                               std::size_t head_dim, std::uint64_t seed);

// x · W for one row x [d_model] and W [d_model × cols] -> out [cols].
void project_row(std::span<const float> x, const std::vector<float>& w, std::size_t cols, std::span<float> out);

// One decode step for one layer: projects the token x [d_model] to q [H·d_head], k and v
// [H_kv·d_head], appends k and v to the cache's `layer`, and attends q against the whole
// layer. out: [heads × head_dim], the heads' outputs side by side (before W_O).
void decode_step(const AttentionLayerWeights& weights, KVCache& cache, std::size_t layer, std::span<const float> x,
                 std::span<float> out);

}  // namespace attnlab
