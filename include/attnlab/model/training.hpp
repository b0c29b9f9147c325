// Training any family the model layer runs (GPT-2; Llama-style RMSNorm, rotary positions,
// grouped-query attention, SwiGLU or GeGLU; QK-norm, sandwich norms, windows): the loss,
// the gradient of every parameter written by hand (each layer's backward beside its
// forward, as the forward pass shows its work), and AdamW.
//
// The parameters live in one flat vector, tensor after tensor in the order of the
// parameter table (parameter_tensors, model.hpp), so a training run saves as an ordinary
// checkpoint. The code is written once for float (training) and double (the tests check
// every gradient against central finite differences in double, where the differences are
// exact enough to compare).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attnlab/model/model.hpp"

namespace attnlab {

// The flat vector's length: config.parameters(), the parameter table's sum.
std::size_t parameter_count(const ModelConfig& config);

// The MLP's weights and biases (what attention-only training keeps at zero).
inline bool is_mlp_tensor(const ParameterTensor& t) {
  return t.slot == TensorSlot::mlp_fc_weight || t.slot == TensorSlot::mlp_fc_bias ||
         t.slot == TensorSlot::mlp_proj_weight || t.slot == TensorSlot::mlp_proj_bias;
}

// A norm's weight (γ): the block's two, QK-norm's, the sandwich norms', the final one.
inline bool is_norm_weight(const ParameterTensor& t) {
  using S = TensorSlot;
  return t.slot == S::ln_1_weight || t.slot == S::ln_2_weight || t.slot == S::ln_f_weight ||
         t.slot == S::q_norm_weight || t.slot == S::k_norm_weight || t.slot == S::post_attn_norm_weight ||
         t.slot == S::post_mlp_norm_weight;
}

template <class T>
std::vector<T> flatten(const Model& model);
Model unflatten(const ModelConfig& config, std::span<const float> parameters);

// Sequences of token ids, each predicting its own next token: position t's input is
// ids[t], its target ids[t + 1] (n ids give n − 1 predictions).
using Batch = std::vector<std::vector<int>>;

struct TrainingOptions {
  bool attention_only = false;  // no MLPs: their weights stay zero and are not run
  // Threads the batch's sequences are split over (0: this thread's budget, budget_threads()
  // in attnlab/model/threads.hpp; at most one per sequence). Each adds its sequences' gradients into its own buffer and
  // the buffers are summed in thread order, so a thread count always gives the same result.
  std::size_t threads = 0;
  // The forward's and the backward's products in bf16 with f32 sums (attnlab/model/blas.hpp's
  // Bf16Products: AVX-512 BF16, or AMX tiles where the CPU has them), on every thread the
  // batch is split over; the parameters, the gradients' sums and the optimizer stay f32.
  bool bf16 = false;
};

// The mean next-token cross-entropy (nats) over every prediction of the batch, and its
// gradient with respect to every parameter, written into `gradients` (same layout).
template <class T>
T loss_and_gradients(const ModelConfig& config, std::span<const T> parameters, const Batch& batch,
                     std::span<T> gradients, const TrainingOptions& options = {});

// FLOPs of one training step on one sequence of n positions: the forward's
// (forward_flops, without the MLPs when attention_only) three times over, since the
// backward pass does two multiply-adds for each of the forward's (one for the input's
// gradient, one for the weights'). For the linear layers that is 6 × parameters × tokens.
double training_flops(const ModelConfig& config, std::size_t n, bool attention_only);

// AdamW (Loshchilov & Hutter): m, v the running moments, decoupled weight decay, step t from 1.
struct AdamW {
  double learning_rate = 1e-3, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weight_decay = 0.0;
  std::vector<float> m, v;
  std::size_t t = 0;

  // One update of `parameters` by `gradients`, with the learning rate `rate` for this step.
  // Where `learns` is given (a flag per parameter), a parameter whose flag is 0 stays as it
  // is, and so do its moments.
  void step(std::span<float> parameters, std::span<const float> gradients, double rate,
            std::span<const std::uint8_t> learns = {});
};

// Scales the gradients so their norm is at most `max_norm`; returns the norm before.
double clip_gradients(std::span<float> gradients, double max_norm);

}  // namespace attnlab
