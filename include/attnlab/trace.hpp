// A Trace keeps every intermediate of one attention computation, per head, so the CLI,
// the server and the tests read the numbers the engine computed and nothing else.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "attnlab/matrix.hpp"

namespace attnlab {

// One head, n queries against m keys. Shapes in brackets.
struct HeadTrace {
  std::string name;
  std::size_t d_k = 0, d_v = 0;
  Matrix queries;       // [n × d_k]  q_i = x_i · W_Q (then rotated, with rope)
  Matrix keys;          // [m × d_k]  k_j = s_j · W_K (then rotated, with rope)
  Matrix values;        // [m × d_v]  v_j = s_j · W_V
  Matrix scores;        // [n × m]    q_i · k_j, every pair
  Matrix scaled;        // [n × m]    scores / √d_k, every pair
  Matrix logits;        // [n × m]    scaled / T where visible, -inf where masked
  std::vector<double> shifts;    // [n] subtracted before exp: 0, or the row max if |max| > 60
  Matrix exponentials;  // [n × m]    exp(logit - shift), 0 where masked
  std::vector<double> row_sums;  // [n] Σ_j exponentials
  Matrix weights;       // [n × m]    exponentials / row_sum; each row sums to 1 (or is all 0)
  Matrix output;        // [n × d_v]  Σ_j weights_ij · v_j
  std::vector<bool> fully_masked;  // [n] rows where every key was hidden
};

struct Trace {
  std::vector<std::string> tokens;         // the n query tokens
  std::vector<std::string> source_tokens;  // the m key tokens (= tokens in self-attention)
  std::vector<HeadTrace> heads;
  Matrix concatenated;  // [n × Σ d_v] the heads' outputs side by side
  Matrix output;        // [n × d_out] concatenated · W_O, or concatenated when there is no W_O
};

}  // namespace attnlab
