// A head of a real model as a scenario, so everything attnlab does to a hand-built head
// (explain, the maths panel, interventions, the probe) it does to a trained one unchanged.
#pragma once
#include <string>
#include <vector>

#include "attnlab/model/forward.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// Head L.H of `model` on the tokens of `result` (a forward pass): the tokens as the model
// sees them, the block's LN'd residual stream as the embeddings (positions are already in
// it), the head's W_Q, W_K, W_V slices of c_attn with their biases, causal. The layer output
// of this scenario is the head's own output (before c_proj).
Scenario model_head_scenario(const Model& model, const ForwardResult& result, const std::vector<std::string>& tokens,
                             HeadRef head);

}  // namespace attnlab
