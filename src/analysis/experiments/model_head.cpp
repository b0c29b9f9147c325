// A model's head as a scenario (attnlab/analysis/model_head.hpp).
#include "attnlab/analysis/model_head.hpp"

#include <fmt/format.h>

namespace attnlab {

Scenario model_head_scenario(const Model& model, const ForwardResult& result, const std::vector<std::string>& tokens,
                             HeadRef head) {
  const AttentionInput input = head_attention_input(model, result, head);
  const HeadWeights& w = input.heads[0];
  Scenario s;
  s.name = fmt::format("head {}", to_string(head));
  s.description = fmt::format("head {} of a {}-layer, {}-head {} model: its input is block {}'s normed residual stream",
                              to_string(head), model.config.n_layer, model.config.n_head,
                              family_name(model.config.family), head.layer);
  s.tokens = tokens;
  s.embeddings = input.queries_from;
  s.heads.push_back(HeadSpec{w.name, std::nullopt, w.w_q, w.w_k, w.w_v, HeadAblation::none, 1.0, w.b_q, w.b_k, w.b_v,
                             w.q_norm, w.k_norm, w.norm_epsilon});
  s.score_scale = input.score_scale;  // Gemma 3's query_pre_attn_scalar^(−½); 0: 1/√d_k
  s.mask = input.mask;                // causal, and the layer's sliding window
  if (input.rope) {                   // a rotary model: q and k turn by position after projecting
    s.positions.kind = PositionKind::rope;
    s.positions.rope = *input.rope;
  }
  s.precision = 3;
  validate(s);
  return s;
}

}  // namespace attnlab
