// Why head L.H's query i weighs key j: its score taken apart into where the query and the key
// came from (docs/circuits.md).
//
// The head reads the residual stream, a sum of parts (model/stream.hpp): the token embedding,
// the learned positions (GPT-2), each earlier head's output, each earlier MLP's output, the
// earlier layers' output biases:  x = Σ_a x_a. With the head's input norm's scale frozen at
// this run's value (as direct logit attribution freezes the final norm), the norm is linear:
//
//   LayerNorm:  LN(x) = Σ_a (x_a − mean(x_a)) · rstd · γ + β      rstd = 1/√(var(x) + ε)
//   RMSNorm:    N(x)  = Σ_a x_a · rstd · γ                        rstd = 1/√(mean(x²) + ε)
//
// so q = Σ_a q_a with q_a = N(x_a) · W_Q, and the constant β · W_Q + b_Q (with the earlier
// output biases) is the part called "bias"; k likewise. QK-norm (Qwen3, Gemma 3) with its
// scale frozen at the run's q and k is a scaling, and a rotary head's rotation by the
// position is linear, so each part is normed and rotated alone. The score is then a sum of
// pairs:
//
//   s_ij = (q_i · k_j) · c = Σ_{a,b} (q_{i,a} · k_{j,b}) · c        c = 1/√d_k (Gemma 3: its scalar)
//
// which add up to the score the model computed, to float rounding. For a rotary head each
// pair is given unrotated too (q_{i,a} · k_{j,b} with neither rotated): what the score would
// be were position not part of it.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

struct QkPair {
  std::string query_side, key_side;  // "embedding", "positions", "L.H", "mlp L", "bias"
  double score = 0;                  // this pair's part of the scaled score
  double unrotated = 0;              // the same without the rotation (a rotary head; else = score)
};

struct QkSide {
  std::string name;
  double score = 0;  // the side's part: its pairs with every part of the other side
};

struct QkDecomposition {
  HeadRef head;
  std::size_t query = 0, key = 0;
  double score = 0;   // the model's own scaled score (q_i · k_j) · c
  double weight = 0;  // a[i, j], the head's weight
  bool rotary = false;
  std::vector<QkPair> pairs;                   // every pair, the largest |score| first; they add up to `score`
  std::vector<QkSide> query_sides, key_sides;  // the marginals, in stream order
};

// Head `head`'s score of query `query` on key `key` taken apart. `run` is a forward over
// `ids` that kept the attention and the stream; InputError naming "query" or "key" for a
// position past the tokens or a key the query cannot see.
QkDecomposition qk_decomposition(const Model& model, std::span<const int> ids, const ForwardResult& run, HeadRef head,
                                 std::size_t query, std::size_t key);

// A scenario's head taken apart the same way: its inputs are the token embeddings with the
// positions applied, added or appended (apply_positions is linear in the embeddings, so the
// positions' part is what zero embeddings get), so the pairs are (embedding | positions |
// bias) × (embedding | positions | bias); a rotary scenario's rotation shows in the unrotated
// values. `head` indexes the scenario's heads; InputError naming "head", "query" or "key".
QkDecomposition scenario_qk(const Scenario& scenario, std::size_t head, std::size_t query, std::size_t key);

}  // namespace attnlab
