// Every head's QK and OV circuits, and how much each earlier head composes into each later one
// (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"; docs/circuits.md).
// Row vectors, as everywhere in attnlab: a head's output at a position is x · W_OV summed over
// keys, its score x_i · W_QK · x_jᵀ.
//
//   W_QK = W̃_Q W̃_Kᵀ   [d × d], rank ≤ d_k        (without the 1/√d_k, which scales every score alike)
//   W_OV = W̃_V W_O    [d × d], rank ≤ d_k        (a grouped-query head: its KV head's W_K and W_V)
//   W̃ = F W: the head's input norm folded in, F = (I − 11ᵀ/d) diag(γ) for LayerNorm (its centring
//   and scale), diag(γ) for RMSNorm (1 + γ for Gemma); the norm's 1/σ, which depends on the
//   input, is left out, as it is from every circuit analysis. Gemma 3's norm of the attention's
//   output folds its γ into W_O. QK-norm and the rotation depend on the input and on the
//   position, so for such heads W_QK is the circuit of the unnormed, unrotated query and key.
//
// Composition of head a into a later head b (a's layer below b's): how much of b's circuit
// reads what a writes,
//   Q: ‖W_OV^a W_QK^b‖_F / (‖W_OV^a‖_F ‖W_QK^b‖_F)      b's query reads a's output
//   K: ‖W_OV^a (W_QK^b)ᵀ‖_F / (‖W_OV^a‖_F ‖W_QK^b‖_F)   b's key reads it
//   V: ‖W_OV^a W_OV^b‖_F / (‖W_OV^a‖_F ‖W_OV^b‖_F)      b's value reads it
// beside the same score for Gaussian matrices of the same shapes (the baseline: what
// composition between unrelated heads looks like).
//
// The OV circuit on tokens, W_E W_OV W_Uᵀ [V × V] (the final norm's γ folded into W_U): what
// attending to token s makes the head write for token t. Its copying score is Σλ / Σ|λ| over
// its eigenvalues, 1 for a head that copies what it attends to, −1 for one that suppresses it.
// The QK circuit on tokens, W_E W_QK W_Eᵀ [V × V]: which query token matches which key token
// most through this head's weights alone (the token_pairs largest entries of it, when asked).
// Every computation is on the small side: a product of factors d × d_k is taken through d_k ×
// d_k matrices (QR factors, Gram matrices), never formed at d × d or V × V.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

struct TokenPair {
  int query = 0, key = 0;  // token ids
  double score = 0;        // e_query · W_QK · e_keyᵀ
};

struct Circuits {
  std::vector<HeadRef> heads;                    // layer by layer
  std::vector<std::vector<double>> qk_singular;  // per head, largest first (d_k of them)
  std::vector<std::vector<double>> ov_singular;
  std::vector<double> ov_copying;                         // per head, in [−1, 1]
  std::vector<std::vector<double>> q, k, v;               // [a][b]: a into b; NaN unless a's layer is below b's
  double baseline_q = 0, baseline_k = 0, baseline_v = 0;  // mean over Gaussian draws of the same shapes
  std::vector<std::vector<TokenPair>> qk_token_pairs;     // per head, the largest first (empty: not asked)
};

// The multiply-adds model_circuits does for this config: the compositions' products, the
// unembedding's W_Uᵀ W_E for the copying scores, and with token pairs every head's V × V × d_k.
double circuits_work(const ModelConfig& config, std::size_t token_pairs = 0);
// The bytes it holds at once: every head's factors and their small-side forms, in double.
double circuits_bytes(const ModelConfig& config);

// Every head's circuits and every pair's composition, and each head's `token_pairs` largest
// entries of its QK circuit on tokens (0: none); `progress(done, total)` after each pair of
// layers. `seed` draws the baseline's matrices.
Circuits model_circuits(const Model& model, std::uint64_t seed = 0, std::size_t token_pairs = 0,
                        const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace attnlab
