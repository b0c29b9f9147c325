// What a scenario costs to run, counted from its shapes before the work is done, so that
// every face refuses work over its limit (attnlab/core/limits.hpp) before allocating it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// The doubles one reference run of a scenario holds.
struct ScenarioNumbers {
  std::uint64_t inputs = 0;   // embeddings (n + m)·d_model and the inputs with positions (n + m)·d_in
  std::uint64_t weights = 0;  // every head's W_Q, W_K, W_V and biases, W_O, the readout
  std::uint64_t trace = 0;    // per head (n + m)·d_k + m·d_v + 5·n·m + 2·n·d_v + 2·n; then n·Σd_v + n·d_out

  std::uint64_t total() const { return inputs + weights + trace; }
  std::uint64_t bytes() const { return total() * sizeof(double); }
};
ScenarioNumbers count_numbers(const Scenario& scenario);

// A head's W_Q, W_K and W_V: d_in × (2·d_k + d_v) numbers (what a random head draws).
std::uint64_t head_weight_numbers(std::size_t d_in, std::size_t d_k, std::size_t d_v);

// Throws InputError naming `field` when the scenario's work (count_numbers(...).bytes(),
// times `runs`) is more than `limit` bytes: the message gives the shape, the price and the
// limit.
void check_work(const Scenario& scenario, std::uint64_t limit, std::string_view field, std::uint64_t runs = 1);

// Throws InputError naming `field` when drawing a head of `weight_numbers` more, on top of
// `drawn_numbers` already held, would pass `limit` bytes: random heads are priced before
// they are drawn.
void check_weights_to_draw(std::uint64_t drawn_numbers, std::uint64_t weight_numbers, std::uint64_t limit,
                           std::string_view field);

}  // namespace attnlab
