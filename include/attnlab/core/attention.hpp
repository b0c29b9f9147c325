// The reference computation of scaled dot-product attention, step by step:
//
//   Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k / T) · V
//
// This is the specification every fast kernel is tested against; it is never optimised.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/core/mask.hpp"
#include "attnlab/core/matrix.hpp"
#include "attnlab/core/positions.hpp"
#include "attnlab/core/trace.hpp"

namespace attnlab {

struct HeadWeights {
  std::string name;
  Matrix w_q;  // [d_in × d_k]
  Matrix w_k;  // [d_in × d_k]
  Matrix w_v;  // [d_in × d_v]
  // Interventions on this head, applied at the mix step (trace.hpp says what each does):
  // output = scale · ablate(weights · V).
  HeadAblation ablation = HeadAblation::none;
  double scale = 1.0;
  // Biases added after projecting (a trained model's heads have them; hand-built ones do
  // not): q = x · W_Q + b_Q, k = s · W_K + b_K, v = s · W_V + b_V. Empty: no bias.
  std::vector<double> b_q, b_k, b_v;  // [d_k], [d_k], [d_v]
  // QK-norm (Qwen3, Gemma 3): each query and each key RMS-normed after projecting, before
  // any rotation, q ← q / √(mean(q²) + ε) · γ_q (k likewise with γ_k). Empty: none.
  std::vector<double> q_norm, k_norm;  // γ_q, γ_k [d_k]
  double norm_epsilon = 1e-6;          // ε
};

// One layer's attention problem, with positions already applied to the inputs.
struct AttentionInput {
  Matrix queries_from;       // [n × d_in] the query-side vectors X
  Matrix keys_from;          // [m × d_in] the key/value-side vectors S (= X in self-attention)
  std::optional<Rope> rope;  // rotate queries and keys by position after projecting
  std::vector<HeadWeights> heads;
  std::optional<Matrix> w_o;  // [Σ d_v × d_out]
  MaskSpec mask;
  double temperature = 1.0;  // T > 0
  // Step 3's factor: scaled = score × score_scale (Gemma 3's query_pre_attn_scalar^(−½));
  // 0: scaled = score / √d_k, as the formula above and every other model.
  double score_scale = 0.0;
};

// One softmax row: logits (-inf where masked) -> exponentials, their sum, the weights.
struct SoftmaxRow {
  double shift = 0.0;  // 0 when the largest logit is within [-60, 60], else that largest logit
  std::vector<double> exponentials;
  double sum = 0.0;
  std::vector<double> weights;  // all 0 when every logit is -inf
  bool fully_masked = false;
};
SoftmaxRow softmax(std::span<const double> logits);

// "none", "zero", "mean", "uniform", and back (nullopt for any other name).
std::string_view to_string(HeadAblation ablation);
std::optional<HeadAblation> head_ablation_named(std::string_view name);

// Runs every head on the input and fills a Trace (token names are left for the caller).
// The input must be valid (shapes chain, T > 0, mask indices in range): the scenario
// loader checks all of that at the boundary.
Trace attend(const AttentionInput& input);

// One head: project, score, scale, mask and temperature, softmax, mix (then the head's
// ablation and scale, when it has them).
HeadTrace attend_head(const AttentionInput& input, const HeadWeights& head);

// Step 1 alone: fills trace's name, d_k, d_v, queries, keys and values (rotated with rope).
// The tiled kernel shares it, so both kernels score the same q and k.
void project_head(const AttentionInput& input, const HeadWeights& head, HeadTrace& trace);

}  // namespace attnlab
