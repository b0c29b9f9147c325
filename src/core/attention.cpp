// The reference attention kernel, written as the maths. Each block below is one step.
#include "attnlab/core/attention.hpp"

#include <cassert>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnlab/core/deadline.hpp"
#include "attnlab/core/positions.hpp"

namespace attnlab {

namespace {
constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();
constexpr double kExpSafeRange = 60.0;  // e^±60 is far from overflow and underflow
}  // namespace

SoftmaxRow softmax(std::span<const double> logits) {
  SoftmaxRow row;
  row.exponentials.assign(logits.size(), 0.0);
  row.weights.assign(logits.size(), 0.0);

  const double largest = logits.empty() ? kMinusInfinity : *std::max_element(logits.begin(), logits.end());
  if (largest == kMinusInfinity) {  // every key hidden: zero weights, not 0/0
    row.fully_masked = true;
    return row;
  }
  // Softmax does not change when one constant is subtracted from every logit. Subtract
  // nothing when e^x is safe, so the numbers are the ones a calculator gives (docs/worked-example.md).
  row.shift = std::abs(largest) <= kExpSafeRange ? 0.0 : largest;
  for (std::size_t j = 0; j < logits.size(); ++j) {
    row.exponentials[j] = std::exp(logits[j] - row.shift);  // exp(-inf) = 0 exactly
    row.sum += row.exponentials[j];
  }
  for (std::size_t j = 0; j < logits.size(); ++j)
    row.weights[j] = row.exponentials[j] / row.sum;
  return row;
}

std::string_view to_string(HeadAblation ablation) {
  switch (ablation) {
    case HeadAblation::none: return "none";
    case HeadAblation::zero: return "zero";
    case HeadAblation::mean: return "mean";
    case HeadAblation::uniform: return "uniform";
  }
  return "none";
}

std::optional<HeadAblation> head_ablation_named(std::string_view name) {
  for (HeadAblation a : {HeadAblation::none, HeadAblation::zero, HeadAblation::mean, HeadAblation::uniform})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

namespace {
// m with `bias` added to every row (m unchanged when there is no bias).
Matrix add_bias(Matrix m, const std::vector<double>& bias) {
  if (bias.empty()) return m;
  assert(bias.size() == m.cols);
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t c = 0; c < m.cols; ++c)
      m(i, c) += bias[c];
  return m;
}

// Each row x of m as x / √(mean(x²) + ε) · γ (an RMSNorm); m unchanged when γ is empty.
Matrix rms_norm_rows(Matrix m, const std::vector<double>& gamma, double epsilon) {
  if (gamma.empty()) return m;
  assert(gamma.size() == m.cols);
  for (std::size_t i = 0; i < m.rows; ++i) {
    double squares = 0;
    for (double x : m.row(i))
      squares += x * x;
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(m.cols) + epsilon);
    for (std::size_t c = 0; c < m.cols; ++c)
      m(i, c) *= inv * gamma[c];
  }
  return m;
}
}  // namespace

void project_head(const AttentionInput& input, const HeadWeights& head, HeadTrace& trace) {
  trace.name = head.name;
  trace.d_k = head.w_q.cols;
  trace.d_v = head.w_v.cols;
  trace.queries =
      rms_norm_rows(add_bias(matmul(input.queries_from, head.w_q), head.b_q), head.q_norm, head.norm_epsilon);
  trace.keys = rms_norm_rows(add_bias(matmul(input.keys_from, head.w_k), head.b_k), head.k_norm, head.norm_epsilon);
  trace.values = add_bias(matmul(input.keys_from, head.w_v), head.b_v);
  if (input.rope) {  // kept as they were too: the lab shows q and k before and after
    trace.queries_unrotated = trace.queries;
    trace.keys_unrotated = trace.keys;
    rotate_rope(trace.queries, *input.rope);
    rotate_rope(trace.keys, *input.rope);
  }
}

HeadTrace attend_head(const AttentionInput& input, const HeadWeights& head) {
  const std::size_t n = input.queries_from.rows, m = input.keys_from.rows;
  HeadTrace t;

  // Step 1, project: q = x · W_Q + b_Q, k = s · W_K + b_K, v = s · W_V + b_V (biases when the
  // head has them), q and k RMS-normed with QK-norm, then rotated with rope.
  project_head(input, head, t);

  // Step 2, score: every query against every key, scores[i][j] = q_i · k_j.
  t.scores = matmul_transposed(t.queries, t.keys);

  // Step 3, scale: divide by √d_k (or multiply by the model's own factor, score_scale).
  t.scaled = t.scores;
  if (input.score_scale > 0) {
    for (double& s : t.scaled.data)
      s *= input.score_scale;
  } else {
    const double sqrt_d_k = std::sqrt(static_cast<double>(t.d_k));
    for (double& s : t.scaled.data)
      s /= sqrt_d_k;
  }

  // Step 4, mask and temperature: logits = scaled / T where visible, -inf where not.
  const Mask mask(input.mask, n, m);
  t.logits = Matrix(n, m);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j)
      t.logits(i, j) = mask.visible(i, j) ? t.scaled(i, j) / input.temperature : kMinusInfinity;

  // Step 5, softmax: each row of logits becomes weights that sum to 1.
  t.exponentials = Matrix(n, m);
  t.weights = Matrix(n, m);
  for (std::size_t i = 0; i < n; ++i) {
    const SoftmaxRow row = softmax(t.logits.row(i));
    std::copy(row.exponentials.begin(), row.exponentials.end(), t.exponentials.row(i).begin());
    std::copy(row.weights.begin(), row.weights.end(), t.weights.row(i).begin());
    t.shifts.push_back(row.shift);
    t.row_sums.push_back(row.sum);
    t.fully_masked.push_back(row.fully_masked);
  }

  // Intervention, uniform ablation: each row's weights become 1/k over its k visible keys
  // (the softmax above is kept in the trace, so the lab can show what was replaced).
  t.ablation = head.ablation;
  t.scale = head.scale;
  if (head.ablation == HeadAblation::uniform)
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t visible = 0;
      for (std::size_t j = 0; j < m; ++j)
        visible += mask.visible(i, j);
      for (std::size_t j = 0; j < m; ++j)
        t.weights(i, j) = mask.visible(i, j) ? 1.0 / visible : 0.0;
    }

  // Step 6, mix: mixed_i = Σ_j weights_ij · v_j.
  t.mixed = matmul(t.weights, t.values);

  // Intervention, zero or mean ablation, then scale: output = scale · ablate(mixed).
  t.output = t.mixed;
  if (head.ablation == HeadAblation::zero) {
    t.output = Matrix(n, t.d_v);
  } else if (head.ablation == HeadAblation::mean) {
    std::vector<double> mean(t.d_v, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < t.d_v; ++c)
        mean[c] += t.mixed(i, c) / static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i)
      std::copy(mean.begin(), mean.end(), t.output.row(i).begin());
  }
  if (head.scale != 1.0)
    for (double& x : t.output.data)
      x *= head.scale;
  return t;
}

Trace attend(const AttentionInput& input) {
  Trace trace;
  for (const HeadWeights& head : input.heads) {
    check_deadline();  // a server request's time budget (core/deadline.hpp): checked between heads
    trace.heads.push_back(attend_head(input, head));
  }

  // Concatenate the heads' outputs, then project with W_O when there is one.
  trace.concatenated = Matrix(input.queries_from.rows, 0);
  for (const HeadTrace& head : trace.heads)
    trace.concatenated = concat_columns(trace.concatenated, head.output);
  trace.output = input.w_o ? matmul(trace.concatenated, *input.w_o) : trace.concatenated;
  return trace;
}

}  // namespace attnlab
