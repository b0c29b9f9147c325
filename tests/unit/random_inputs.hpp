// Random inputs for property tests (attention inputs, rows of floats), drawn with attnlab's
// seeded generator.
#pragma once
#include <vector>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/rng.hpp"

namespace attnlab::test {

inline Matrix random_matrix(SplitMix64& rng, std::size_t rows, std::size_t cols, double scale = 1.0) {
  Matrix m(rows, cols);
  for (double& x : m.data)
    x = rng.normal() * scale;
  return m;
}

// `count` floats drawn from a standard normal (rows of activations, weights to store).
inline std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(count);
  for (float& x : v)
    x = static_cast<float>(rng.normal());
  return v;
}

// n tokens of width d_in, H heads with the given d_k and d_v, self-attention.
inline AttentionInput random_input(std::uint64_t seed, std::size_t n, std::size_t d_in, std::size_t heads,
                                   std::size_t d_k, std::size_t d_v) {
  SplitMix64 rng(seed);
  AttentionInput input;
  input.queries_from = random_matrix(rng, n, d_in);
  input.keys_from = input.queries_from;
  for (std::size_t h = 0; h < heads; ++h)
    input.heads.push_back(
        {"h", random_matrix(rng, d_in, d_k), random_matrix(rng, d_in, d_k), random_matrix(rng, d_in, d_v)});
  return input;
}

}  // namespace attnlab::test
