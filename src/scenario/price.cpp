// Pricing a scenario's work from its shapes (attnlab/scenario/price.hpp). Every count fits
// 64 bits: tokens, widths and heads are limited (kMaxTokens, kMaxWidth, kMaxHeads) first.
#include "attnlab/scenario/price.hpp"

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

namespace attnlab {

std::uint64_t head_weight_numbers(std::size_t d_in, std::size_t d_k, std::size_t d_v) {
  return std::uint64_t{d_in} * (2 * std::uint64_t{d_k} + d_v);
}

ScenarioNumbers count_numbers(const Scenario& s) {
  const std::uint64_t n = s.n(), m = s.m();
  ScenarioNumbers c;
  c.inputs = (n + m) * (s.d_model() + s.d_in());
  std::uint64_t total_d_v = 0;
  for (const HeadSpec& h : s.heads) {
    const std::uint64_t d_k = h.w_q.cols, d_v = h.w_v.cols;
    c.weights += h.w_q.data.size() + h.w_k.data.size() + h.w_v.data.size() + h.b_q.size() + h.b_k.size() + h.b_v.size();
    c.trace += (n + m) * d_k + m * d_v + 5 * n * m + 2 * n * d_v + 2 * n;
    total_d_v += d_v;
  }
  if (s.w_o) c.weights += s.w_o->data.size();
  if (s.readout) c.weights += s.readout->matrix.data.size();
  c.trace += n * total_d_v + n * s.d_out();
  return c;
}

void check_work(const Scenario& s, std::uint64_t limit, std::string_view field, std::uint64_t runs) {
  const std::uint64_t bytes = count_numbers(s).bytes();
  if (bytes <= limit / runs) return;
  fail(field, fmt::format("{} heads over {} × {} tokens (d_model {}) take {} bytes of work{} (inputs, weights and "
                          "every intermediate, as doubles), more than the limit of {}; use fewer tokens, fewer "
                          "heads or narrower ones",
                          s.heads.size(), s.n(), s.m(), s.d_model(), bytes,
                          runs > 1 ? fmt::format(" a run, × {} runs", runs) : "", limit));
}

void check_weights_to_draw(std::uint64_t drawn_numbers, std::uint64_t weight_numbers, std::uint64_t limit,
                           std::string_view field) {
  const std::uint64_t bytes = (drawn_numbers + weight_numbers) * sizeof(double);
  if (bytes <= limit) return;
  fail(field, fmt::format("drawing this head's {} weights (d_in × (2·d_k + d_v)) would bring the heads' weights to "
                          "{} bytes, more than the limit of {} for the whole run; give it a smaller d_k and d_v",
                          weight_numbers, bytes, limit));
}

}  // namespace attnlab
