// A Trace keeps every intermediate of one attention computation, per head, so the CLI,
// the server and the tests read the numbers the engine computed and nothing else.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "attnlab/core/matrix.hpp"

namespace attnlab {

// How a head is ablated, an intervention applied inside the engine (docs/interventions.md):
//   none:    the head as computed;
//   zero:    the head's output is 0 for every query;
//   mean:    every query's output is the head's mean output over the n queries;
//   uniform: each query's weights are replaced by a uniform row over the keys it may see
//            (the scores and softmax are still computed and shown; the mix uses 1/k).
enum class HeadAblation { none, zero, mean, uniform };

// One head, n queries against m keys. Shapes in brackets.
struct HeadTrace {
  std::string name;
  std::size_t d_k = 0, d_v = 0;
  Matrix queries;                              // [n × d_k]  q_i = x_i · W_Q (then rotated, with rope)
  Matrix keys;                                 // [m × d_k]  k_j = s_j · W_K (then rotated, with rope)
  Matrix values;                               // [m × d_v]  v_j = s_j · W_V
  Matrix queries_unrotated, keys_unrotated;    // [n × d_k], [m × d_k] before the rotation (rope only; else empty)
  Matrix scores;                               // [n × m]    q_i · k_j, every pair
  Matrix scaled;                               // [n × m]    scores / √d_k, every pair
  Matrix logits;                               // [n × m]    scaled / T where visible, -inf where masked
  std::vector<double> shifts;                  // [n] subtracted before exp: 0, or the row max if |max| > 60
  Matrix exponentials;                         // [n × m]    exp(logit - shift), 0 where masked
  std::vector<double> row_sums;                // [n] Σ_j exponentials
  Matrix weights;                              // [n × m]    exponentials / row_sum; each row sums to 1 (or is all 0);
                                               //            with a uniform ablation, 1/k over the k visible keys
  Matrix mixed;                                // [n × d_v]  Σ_j weights_ij · v_j
  Matrix output;                               // [n × d_v]  mixed, then ablated (zero, mean) and scaled; = mixed when
                                               //            the head is not intervened on
  std::vector<bool> fully_masked;              // [n] rows where every key was hidden
  HeadAblation ablation = HeadAblation::none;  // the interventions applied to this head
  double scale = 1.0;
};

struct Trace {
  std::vector<std::string> tokens;         // the n query tokens
  std::vector<std::string> source_tokens;  // the m key tokens (= tokens in self-attention)
  std::vector<HeadTrace> heads;
  Matrix concatenated;  // [n × Σ d_v] the heads' outputs side by side
  Matrix output;        // [n × d_out] concatenated · W_O, or concatenated when there is no W_O
};

}  // namespace attnlab
