// The residual stream taken apart: what each component of the model wrote into it, and the
// logit as a linear function of it with the final norm's scale frozen (direct logit
// attribution, analysis/attribution.hpp, reads these).
//
//   x_L[p] = embedding + position (learned positions) + Σ_l ( Σ_h head_{l,h} + b_O + mlp_l )
//   head_{l,h}[p] = z_h[p] · W_O[rows of head h]         z_h[p] = Σ_j a_h[p, j] · v_h[j]
//
// Sandwich-norm families (Gemma 3) norm the attention's output before it joins the stream;
// with that norm's 1/rms frozen from the run, the norm is linear and each head's part is
// (z_h[p] · W_O_h) ⊙ γ_post · rstd_post[p]. The parts add up to the stream the model computed
// (to float rounding).
//
// The final norm with its 1/σ (and LayerNorm's mean) frozen at x = x_L[p] is linear too:
//   (u_t − u_c) · norm_f(x) = r · x + β · (u_t − u_c),  r = rstd · (γ ⊙ u − mean(γ ⊙ u))   (LayerNorm)
//                                                          r = rstd · γ ⊙ u                 (RMSNorm)
// so part · r is the part's contribution to the logit (or the target − contrast difference).
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

enum class PartKind { embedding, position, head, attention_bias, mlp };
const char* part_kind_name(PartKind kind);  // "embedding", "position", "head", "attention_bias", "mlp"

struct StreamPart {
  PartKind kind = PartKind::embedding;
  std::size_t layer = kNotInABlock, head = kNotInABlock;  // a block's part; a head's
  std::vector<float> vector;                              // [d] what it wrote at the position
};

// Every part of the stream at `position` after the last block, in stream order (embedding,
// position, then per layer its heads, b_O, the MLP). `result` is a forward over `ids` with
// keep_stream; InputError naming "position" past the tokens.
std::vector<StreamPart> stream_parts(const Model& model, std::span<const int> ids, const ForwardResult& result,
                                     std::size_t position);

// Head L.H's part of the stream at every position [n × d] (z_h · W_O_h, sandwich-scaled): what
// stream_parts gives for it, position by position.
std::vector<float> head_output(const Model& model, const ForwardResult& result, HeadRef head);

// Head L.H's part at `position` per source token j: a_h[p, j] · (v_h[j] · W_O_h) (the OV path,
// sandwich-scaled), [n × d] rows j, zero past the position. The rows add up to the head's part.
std::vector<float> head_source_parts(const Model& model, const ForwardResult& result, HeadRef head,
                                     std::size_t position);

// The logit of `target` (minus `contrast`'s when contrast ≥ 0) at stream row x [d] as r · x + bias,
// the final norm's scale frozen at x. InputError naming "target" / "contrast" outside the vocabulary.
struct LogitDirection {
  std::vector<double> r;  // [d]
  double bias = 0;        // β · (u_t − u_c): the final norm's bias (LayerNorm)
};
LogitDirection logit_direction(const Model& model, std::span<const float> x, int target, int contrast = -1);

}  // namespace attnlab
