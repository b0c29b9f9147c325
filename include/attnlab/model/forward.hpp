// GPT-2's forward pass, showing its work.
//
//   x = wte[ids] + wpe[0..n)                                  the residual stream [n × d]
//   per block:  a = LN_1(x);  x += Attention(a) · W_proj + b   (each head causal, softmax(q·kᵀ/√d_head)·v)
//               x += GELU(LN_2(x) · W_fc + b_fc) · W_mlp + b_mlp
//   logits = LN_f(x) · wteᵀ                                    [n × vocab]
//
// Every head of a model becomes the engine's own attention problem (head_attention_input):
// its input is the block's LN'd residual stream `a`, its W_Q, W_K, W_V the head's slices of
// c_attn with their biases, causal. So explain, the maths panel, interventions and the
// probe work on a trained head as they do on a hand-built one.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "attnlab/core/attention.hpp"
#include "attnlab/model/gpt2.hpp"

namespace attnlab {

// A head of a model, written L.H (0-based), as TransformerLens and the literature write it.
struct HeadRef {
  std::size_t layer = 0, head = 0;
  bool operator==(const HeadRef&) const = default;
};
std::string to_string(HeadRef head);                                    // "5.1"
HeadRef parse_head_ref(std::string_view text, std::string_view field);  // "5.1"; InputError otherwise

struct ForwardOptions {
  bool keep_attention = false;  // every head's weights, [L][H × n × n]
  std::vector<HeadRef> ablate;  // heads whose output is zeroed before c_proj
};

struct ForwardResult {
  std::size_t n = 0;
  std::vector<float> logits;                     // [n × vocab]
  std::vector<std::vector<float>> block_inputs;  // [L][n × d] LN_1(x): what each block's heads read
  std::vector<std::vector<float>> attention;     // [L][H × n × n] weights, when kept
};

// Runs the model on token ids (each < vocab_size, at most n_positions of them; InputError
// naming "ids" otherwise).
ForwardResult gpt2_forward(const Gpt2Model& model, std::span<const int> ids, const ForwardOptions& options = {});

// The next-token distribution at a position: the k most probable ids, softmax of the logits.
struct TokenProbability {
  int id = 0;
  double probability = 0;
};
std::vector<TokenProbability> top_k(std::span<const float> logits, std::size_t k);

// Mean next-token cross-entropy (nats) of positions [first, last) predicting ids[i + 1].
double next_token_loss(const ForwardResult& result, std::span<const int> ids, std::size_t vocab, std::size_t first,
                       std::size_t last);

// Head L.H as the engine's attention problem, from a forward pass's block inputs.
AttentionInput head_attention_input(const Gpt2Model& model, const ForwardResult& result, HeadRef head);

}  // namespace attnlab
