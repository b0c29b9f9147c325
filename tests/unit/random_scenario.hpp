// Random scenarios for the intervention and probe tests: several heads, W_O, a readout,
// any position kind, causal or not, drawn with attnlab's seeded generator.
#pragma once
#include <fmt/format.h>

#include <cmath>

#include "attnlab/core/rng.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "random_inputs.hpp"

namespace attnlab::test {

struct RandomScenarioShape {
  std::size_t n = 5, d_model = 4, heads = 3, d_k = 2, d_v = 3;
  Positions positions{};
  bool causal = false;
  bool w_o = true;               // an output projection to d_out = d_model
  std::size_t classes = 3;       // a readout with this many classes (0: none)
  std::optional<std::size_t> m;  // cross-attention with m source tokens
  double temperature = 0.8;
  bool biases = false;  // query, key and value biases on every head
};

inline Scenario random_scenario(std::uint64_t seed, const RandomScenarioShape& shape) {
  SplitMix64 rng(seed);
  Scenario s;
  s.name = fmt::format("random-{}", seed);
  for (std::size_t i = 0; i < shape.n; ++i)
    s.tokens.push_back(fmt::format("x{}", i));
  s.embeddings = random_matrix(rng, shape.n, shape.d_model);
  s.positions = shape.positions;
  if (shape.m) {
    SourceSequence source;
    for (std::size_t j = 0; j < *shape.m; ++j)
      source.tokens.push_back(fmt::format("s{}", j));
    source.embeddings = random_matrix(rng, *shape.m, shape.d_model);
    s.source = source;
  }
  const std::size_t d_in = s.d_in();
  // Weights of scale 1/√d_in keep scores moderate, so the softmax is not saturated and
  // every gradient is far from zero.
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_in));
  for (std::size_t h = 0; h < shape.heads; ++h)
    s.heads.push_back({fmt::format("h{}", h), std::nullopt, random_matrix(rng, d_in, shape.d_k, 2 * scale),
                       random_matrix(rng, d_in, shape.d_k, 2 * scale), random_matrix(rng, d_in, shape.d_v, 2 * scale)});
  if (shape.biases)
    for (HeadSpec& head : s.heads) {
      head.b_q = random_matrix(rng, 1, shape.d_k, 0.5).data;
      head.b_k = random_matrix(rng, 1, shape.d_k, 0.5).data;
      head.b_v = random_matrix(rng, 1, shape.d_v, 0.5).data;
    }
  if (shape.w_o) s.w_o = random_matrix(rng, shape.heads * shape.d_v, shape.d_model, 0.5);
  if (shape.classes > 0) {
    ReadoutSpec r{random_matrix(rng, s.d_out(), shape.classes, 0.3), {}};  // p far from 0 and 1
    for (std::size_t k = 0; k < shape.classes; ++k)
      r.labels.push_back(fmt::format("c{}", k));
    s.readout = r;
  }
  s.mask.causal = shape.causal;
  s.temperature = shape.temperature;
  validate(s);
  return s;
}

}  // namespace attnlab::test
