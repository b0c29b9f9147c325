// The probe: the measures set beside the attention weights (weight, value-weighted weight,
// erasure, gradient × input), their rank agreement, Serrano & Smith's flip test and
// Jain & Wallace's counterfactual weights. Every output comes from the engine: erasure
// runs the scenario again with the key knocked out, and the gradient walks back through
// the numbers of the engine's own trace.
#include "attnlab/analysis/probe.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/price.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// z = o · matrix, then a numerically stable softmax.
std::vector<double> class_probabilities(const Readout& r, std::span<const double> o) {
  std::vector<double> z(r.matrix.cols, 0.0);
  for (std::size_t k = 0; k < r.matrix.cols; ++k)
    for (std::size_t c = 0; c < o.size(); ++c)
      z[k] += o[c] * r.matrix(c, k);
  const double top = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (double& x : z)
    sum += (x = std::exp(x - top));
  for (double& x : z)
    x /= sum;
  return z;
}

std::vector<double> class_scores(const Readout& r, std::span<const double> o) {
  std::vector<double> z(r.matrix.cols, 0.0);
  for (std::size_t k = 0; k < r.matrix.cols; ++k)
    for (std::size_t c = 0; c < o.size(); ++c)
      z[k] += o[c] * r.matrix(c, k);
  return z;
}

Matrix transposed(const Matrix& a) {
  Matrix t(a.cols, a.rows);
  for (std::size_t r = 0; r < a.rows; ++r)
    for (std::size_t c = 0; c < a.cols; ++c)
      t(c, r) = a(r, c);
  return t;
}

// The backward of QK-norm's y = x̂ · γ, x̂ = x · r, r = 1/√(mean(x²) + ε), row by row: the
// gradient at x from the gradient dy at y, dx = r · (dx̂ − x̂ · mean(dx̂ ⊙ x̂)), dx̂ = dy ⊙ γ.
// x is the projection before the norm.
Matrix rms_norm_backward(const Matrix& x, const Matrix& dy, const std::vector<double>& gamma, double epsilon) {
  Matrix dx(x.rows, x.cols);
  const double d = static_cast<double>(x.cols);
  for (std::size_t i = 0; i < x.rows; ++i) {
    double squares = 0;
    for (double v : x.row(i))
      squares += v * v;
    const double r = 1.0 / std::sqrt(squares / d + epsilon);
    double mean = 0;  // of dx̂ ⊙ x̂
    for (std::size_t c = 0; c < x.cols; ++c)
      mean += dy(i, c) * gamma[c] * x(i, c) * r / d;
    for (std::size_t c = 0; c < x.cols; ++c)
      dx(i, c) = r * (dy(i, c) * gamma[c] - x(i, c) * r * mean);
  }
  return dx;
}

// x · W + b, the projection before QK-norm.
Matrix projected(const Matrix& x, const Matrix& w, const std::vector<double>& b) {
  Matrix y = matmul(x, w);
  if (!b.empty())
    for (std::size_t i = 0; i < y.rows; ++i)
      for (std::size_t c = 0; c < y.cols; ++c)
        y(i, c) += b[c];
  return y;
}

void add_into(Matrix& to, const Matrix& from) {
  for (std::size_t k = 0; k < to.data.size(); ++k)
    to.data[k] += from.data[k];
}

std::string in_quotes(const std::string& s) { return fmt::format("\"{}\"", s); }

}  // namespace

// ---- readouts ------------------------------------------------------------------------

double Readout::value(std::span<const double> o) const {
  switch (kind) {
    case Kind::coordinate: return o[coordinate];
    case Kind::direction: return dot(o, direction);
    case Kind::norm: return std::sqrt(dot(o, o));
    case Kind::class_probability: return class_probabilities(*this, o)[target];
  }
  return 0.0;
}

std::vector<double> Readout::gradient(std::span<const double> o) const {
  std::vector<double> g(o.size(), 0.0);
  switch (kind) {
    case Kind::coordinate: g[coordinate] = 1.0; break;
    case Kind::direction: g = direction; break;
    case Kind::norm: {
      const double norm = std::sqrt(dot(o, o));
      if (norm > 0)
        for (std::size_t c = 0; c < o.size(); ++c)
          g[c] = o[c] / norm;
      break;
    }
    case Kind::class_probability: {
      // p_t = softmax(z)_t, ∂p_t/∂z_k = p_t (δ_tk - p_k), ∂z_k/∂o_c = matrix(c, k).
      const std::vector<double> p = class_probabilities(*this, o);
      for (std::size_t k = 0; k < p.size(); ++k) {
        const double dz = p[target] * ((k == target ? 1.0 : 0.0) - p[k]);
        for (std::size_t c = 0; c < o.size(); ++c)
          g[c] += matrix(c, k) * dz;
      }
      break;
    }
  }
  return g;
}

std::optional<std::string> Readout::decision(std::span<const double> o) const {
  if (kind == Kind::norm) return std::nullopt;
  if (kind == Kind::class_probability) {
    const std::vector<double> z = class_scores(*this, o);
    return labels[std::max_element(z.begin(), z.end()) - z.begin()];
  }
  const double v = value(o);
  return v > 0 ? "positive" : v < 0 ? "negative" : "zero";
}

Readout parse_readout(std::string_view text, const Scenario& s, std::span<const double> output,
                      std::string_view field) {
  const std::size_t d_out = s.d_out();
  std::string_view kind = text, argument;
  bool has_argument = false;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    kind = text.substr(0, colon);
    argument = text.substr(colon + 1);
    has_argument = true;
  }
  if (kind.empty()) kind = s.readout ? "class" : "norm";
  const std::string forms = "norm, coordinate:C, direction:u1,u2,..., class or class:LABEL";

  Readout r;
  if (kind == "norm") {
    if (has_argument) fail(field, fmt::format("\"{}\": norm takes no argument; write norm", text));
    r.kind = Readout::Kind::norm;
    r.description = "‖output‖";
  } else if (kind == "coordinate") {
    const std::string a(argument);
    if (a.empty() || a.find_first_not_of("0123456789") != std::string::npos || a.size() > 9)
      fail(field,
           fmt::format("\"{}\": write coordinate:C with C a coordinate of the output, 0 to {}", text, d_out - 1));
    r.coordinate = std::stoul(a);
    if (r.coordinate >= d_out)
      fail(field, fmt::format("coordinate {} does not exist; the output has coordinates 0 to {} (d_out = {})",
                              r.coordinate, d_out - 1, d_out));
    r.kind = Readout::Kind::coordinate;
    r.description = fmt::format("output[{}]", r.coordinate);
  } else if (kind == "direction") {
    std::string item;
    std::istringstream in{std::string(argument)};
    while (std::getline(in, item, ',')) {
      const auto x = finite_number(item);
      if (!x)
        fail(field,
             fmt::format("\"{}\" is not a finite number; write direction:u1,u2,... with {} numbers", item, d_out));
      r.direction.push_back(*x);
    }
    if (r.direction.size() != d_out)
      fail(field, fmt::format(
                      "the direction has {} numbers but the output has {} coordinates (d_out); give one per coordinate",
                      r.direction.size(), d_out));
    if (std::all_of(r.direction.begin(), r.direction.end(), [](double x) { return x == 0.0; }))
      fail(field, "the direction is all zeros; give a non-zero vector");
    r.kind = Readout::Kind::direction;
    r.description = fmt::format("output · ({})", fmt::join(r.direction, ", "));
  } else if (kind == "class") {
    if (!s.readout)
      fail(field, fmt::format("{} has no readout matrix to give classes; add a \"readout\" field "
                              "(docs/scenario-format.md) or use norm, coordinate:C or direction:u1,u2,...",
                              s.name));
    r.kind = Readout::Kind::class_probability;
    r.matrix = s.readout->matrix;
    r.labels = s.readout->labels;
    if (has_argument) {
      const auto found = std::find(r.labels.begin(), r.labels.end(), argument);
      if (found == r.labels.end())
        fail(field, fmt::format("unknown class \"{}\"; the classes are: {}", argument, fmt::join(r.labels, ", ")));
      r.target = found - r.labels.begin();
    } else {
      const std::vector<double> z = class_scores(r, output);
      r.target = std::max_element(z.begin(), z.end()) - z.begin();
    }
    r.description = fmt::format("p({})", r.labels[r.target]);
  } else {
    fail(field, fmt::format("unknown readout \"{}\"; use {}", text, forms));
  }
  return r;
}

// ---- the gradient, by hand ---------------------------------------------------------

InputGradient output_gradient(const Scenario& s, const Trace& t, std::size_t query, std::span<const double> d_output) {
  const AttentionInput input = attention_input(s);
  const std::size_t n = input.queries_from.rows, m = input.keys_from.rows, d_in = input.queries_from.cols;
  InputGradient g{Matrix(n, d_in), Matrix(m, d_in)};

  // Back through W_O: output_i = concatenated_i · W_O, so ∂/∂concatenated_i = d_output · W_Oᵀ.
  std::vector<double> d_concat(t.concatenated.cols, 0.0);
  if (s.w_o) {
    for (std::size_t c = 0; c < d_concat.size(); ++c)
      d_concat[c] = dot(s.w_o->row(c), d_output);
  } else {
    std::copy(d_output.begin(), d_output.end(), d_concat.begin());
  }

  std::size_t offset = 0;
  for (std::size_t h = 0; h < t.heads.size(); ++h) {
    const HeadTrace& ht = t.heads[h];
    const HeadSpec& spec = s.heads[h];

    // Back through the scale and the ablation: output = scale · ablate(mixed).
    Matrix d_mixed(n, ht.d_v);
    if (ht.ablation != HeadAblation::zero)
      for (std::size_t c = 0; c < ht.d_v; ++c) {
        const double d = d_concat[offset + c] * ht.scale;
        if (ht.ablation == HeadAblation::mean)  // every query's mixed row feeds the mean
          for (std::size_t r = 0; r < n; ++r)
            d_mixed(r, c) = d / static_cast<double>(n);
        else
          d_mixed(query, c) = d;
      }
    offset += ht.d_v;

    // Back through the mix: mixed = weights · V.
    const Matrix d_weights = matmul_transposed(d_mixed, ht.values);   // [n × m]
    const Matrix d_values = matmul(transposed(ht.weights), d_mixed);  // [m × d_v]

    // Back through the softmax (uniform weights do not depend on the scores):
    // ∂/∂logit_rj = a_rj (∂/∂a_rj - Σ_k a_rk ∂/∂a_rk); then logits = scores / √d_k / T
    // (scores × score_scale / T with a model's own scale).
    Matrix d_scores(n, m);
    if (ht.ablation != HeadAblation::uniform) {
      const double step =
          (s.score_scale > 0 ? 1.0 / s.score_scale : std::sqrt(static_cast<double>(ht.d_k))) * s.temperature;
      for (std::size_t r = 0; r < n; ++r) {
        if (ht.fully_masked[r]) continue;
        const double mean = dot(ht.weights.row(r), d_weights.row(r));
        for (std::size_t j = 0; j < m; ++j)
          d_scores(r, j) = ht.weights(r, j) * (d_weights(r, j) - mean) / step;
      }
    }

    // Back through the scores: scores = Q · Kᵀ.
    Matrix d_q = matmul(d_scores, ht.keys);                 // [n × d_k]
    Matrix d_k = matmul(transposed(d_scores), ht.queries);  // [m × d_k]
    if (input.rope) {                                       // the scored q and k were rotated after projecting
      rotate_rope(d_q, *input.rope, true);                  // the rotation transposed carries the gradient back
      rotate_rope(d_k, *input.rope, true);
    }

    // Back through QK-norm, when the head has it: the scored q and k were RMS-normed.
    if (!spec.q_norm.empty()) {
      d_q = rms_norm_backward(projected(input.queries_from, spec.w_q, spec.b_q), d_q, spec.q_norm, spec.norm_epsilon);
      d_k = rms_norm_backward(projected(input.keys_from, spec.w_k, spec.b_k), d_k, spec.k_norm, spec.norm_epsilon);
    }

    // Back through the projections: q = x · W_Q, k = s · W_K, v = s · W_V.
    add_into(g.queries, matmul_transposed(d_q, spec.w_q));
    add_into(g.keys, matmul_transposed(d_k, spec.w_k));
    add_into(g.keys, matmul_transposed(d_values, spec.w_v));
  }
  return g;
}

// ---- rank agreement and divergence ------------------------------------------------------

double kendall_tau(std::span<const double> a, std::span<const double> b) {
  const std::size_t n = std::min(a.size(), b.size());
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0, pairs = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      pairs += 1;
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0) ties_a += 1;
      if (db == 0) ties_b += 1;
      if (da == 0 || db == 0) continue;
      ((da > 0) == (db > 0) ? concordant : discordant) += 1;
    }
  const double denominator = std::sqrt((pairs - ties_a) * (pairs - ties_b));
  return denominator > 0 ? (concordant - discordant) / denominator : kNaN;
}

double jensen_shannon(std::span<const double> p, std::span<const double> q) {
  double js = 0.0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double mid = 0.5 * (p[k] + q[k]);
    if (p[k] > 0) js += 0.5 * p[k] * std::log2(p[k] / mid);
    if (q[k] > 0) js += 0.5 * q[k] * std::log2(q[k] / mid);
  }
  return std::max(0.0, js);
}

// ---- the counterfactual ---------------------------------------------------------------

namespace {

// How one head's weight row for one query reaches the layer output: output(α) = base +
// Σ_j α_j P_j, affine in the row whatever the head's ablation and scale.
struct RowToOutput {
  std::vector<double> base;            // d_out
  std::vector<std::vector<double>> P;  // m rows of d_out
};

RowToOutput row_to_output(const Scenario& s, const Trace& t, std::size_t query, std::size_t head) {
  const HeadTrace& ht = t.heads[head];
  const std::size_t n = t.tokens.size(), m = ht.values.rows, d_out = t.output.cols;
  std::size_t offset = 0;
  for (std::size_t h = 0; h < head; ++h)
    offset += t.heads[h].d_v;
  // How much of mixed_i reaches output_i: scale, times 1/n under a mean ablation, 0 under zero.
  double coefficient = ht.scale;
  if (ht.ablation == HeadAblation::zero) coefficient = 0.0;
  if (ht.ablation == HeadAblation::mean) coefficient /= static_cast<double>(n);

  RowToOutput r{std::vector<double>(t.output.row(query).begin(), t.output.row(query).end()),
                std::vector<std::vector<double>>(m, std::vector<double>(d_out, 0.0))};
  for (std::size_t j = 0; j < m; ++j) {
    std::vector<double> concat(t.concatenated.cols, 0.0);
    for (std::size_t c = 0; c < ht.d_v; ++c)
      concat[offset + c] = coefficient * ht.values(j, c);
    for (std::size_t k = 0; k < d_out; ++k) {
      double x = 0.0;
      if (s.w_o)
        for (std::size_t c = 0; c < concat.size(); ++c)
          x += concat[c] * (*s.w_o)(c, k);
      else
        x = concat[k];
      r.P[j][k] = x;
    }
    for (std::size_t k = 0; k < d_out; ++k)
      r.base[k] -= ht.weights(query, j) * r.P[j][k];
  }
  return r;
}

std::vector<double> apply_row(const RowToOutput& map, std::span<const double> weights) {
  std::vector<double> o = map.base;
  for (std::size_t j = 0; j < weights.size(); ++j)
    if (weights[j] != 0)
      for (std::size_t k = 0; k < o.size(); ++k)
        o[k] += weights[j] * map.P[j][k];
  return o;
}

}  // namespace

std::vector<double> output_with_weights(const Scenario& s, const Trace& t, std::size_t query, std::size_t head,
                                        std::span<const double> weights) {
  return apply_row(row_to_output(s, t, query, head), weights);
}

namespace {

// The search for a counterfactual row: rows of weights over the k visible keys are tried
// along segments of the simplex, and the feasible one (readout within ε of the original)
// farthest from the original row in Jensen–Shannon divergence is kept.
class CounterfactualSearch {
 public:
  CounterfactualSearch(const RowToOutput& map, const std::vector<std::size_t>& visible, const Readout& readout,
                       const std::vector<double>& original, double r0, double epsilon)
      : map_(map),
        visible_(visible),
        readout_(readout),
        original_(original),
        best_(original),
        r0_(r0),
        epsilon_(epsilon),
        point_(visible.size()),
        o_(map.base.size()) {}

  const std::vector<double>& best() const { return best_; }

  // The segment A + t(B - A), t in [0, 1]: the output moves on the segment from oA to oB.
  // The divergence is convex along it, so its largest value on a feasible stretch is at an
  // end of that stretch; try the ends of every feasible stretch.
  void search_segment(const std::vector<double>& A, const std::vector<double>& B) {
    a_ = &A, b_ = &B;
    oA_ = output_of(A), oB_ = output_of(B);
    if (readout_.linear())
      search_linear();
    else
      search_sampled();
  }

 private:
  bool feasible(double r) const { return std::abs(r - r0_) <= epsilon_; }

  // The output a row of weights over the visible keys gives.
  std::vector<double> output_of(const std::vector<double>& alpha) const {
    std::vector<double> o = map_.base;
    for (std::size_t v = 0; v < alpha.size(); ++v)
      if (alpha[v] != 0)
        for (std::size_t d = 0; d < o.size(); ++d)
          o[d] += alpha[v] * map_.P[visible_[v]][d];
    return o;
  }

  double readout_at(double s) {
    for (std::size_t d = 0; d < o_.size(); ++d)
      o_[d] = oA_[d] + s * (oB_[d] - oA_[d]);
    return readout_.value(o_);
  }

  // Takes the point at s if, normalised to sum to 1, its readout is within ε.
  bool try_point(double s) {
    const std::vector<double>&A = *a_, &B = *b_;
    double total = 0.0;
    for (std::size_t v = 0; v < point_.size(); ++v)
      total += point_[v] = std::max(0.0, A[v] + s * (B[v] - A[v]));
    for (double& x : point_)
      x /= total;
    if (!feasible(readout_.value(output_of(point_)))) return false;
    const double divergence = jensen_shannon(point_, original_);
    if (divergence > best_divergence_) best_divergence_ = divergence, best_ = point_;
    return true;
  }

  // An end found by arithmetic can sit a hair outside ε: step towards `inside` until not.
  void settle(double end, double inside) {
    if (try_point(end)) return;
    for (double step = 1e-14; step < 1; step *= 4)
      if (try_point(end + (inside - end) * step)) return;
    try_point(inside);
  }

  // readout(s) = rA + s (rB - rA): the feasible stretch exactly.
  void search_linear() {
    const double rA = readout_at(0.0), slope = readout_at(1.0) - rA;
    double lo = 0.0, hi = 1.0;
    if (slope != 0) {
      const double t1 = (r0_ - epsilon_ - rA) / slope, t2 = (r0_ + epsilon_ - rA) / slope;
      lo = std::max(0.0, std::min(t1, t2));
      hi = std::min(1.0, std::max(t1, t2));
    } else if (!feasible(rA)) {
      return;
    }
    if (lo > hi) return;
    settle(lo, 0.5 * (lo + hi));
    settle(hi, 0.5 * (lo + hi));
  }

  // Any other readout: feasible stretches found by sampling, their ends refined by bisection.
  void search_sampled() {
    constexpr int kSamples = 48;
    std::vector<bool> ok(kSamples + 1);
    for (int q = 0; q <= kSamples; ++q)
      ok[q] = feasible(readout_at(static_cast<double>(q) / kSamples));
    // Moves the boundary between a feasible sample and an infeasible one closer.
    const auto refine = [&](double inside, double outside) {
      for (int it = 0; it < 40; ++it) {
        const double mid = 0.5 * (inside + outside);
        (feasible(readout_at(mid)) ? inside : outside) = mid;
      }
      return inside;
    };
    for (int q = 0; q <= kSamples; ++q) {
      if (!ok[q]) continue;
      const double here = static_cast<double>(q) / kSamples;
      const bool start = q == 0 || !ok[q - 1], end = q == kSamples || !ok[q + 1];
      if (start) settle(q == 0 ? 0.0 : refine(here, static_cast<double>(q - 1) / kSamples), here);
      if (end) settle(q == kSamples ? 1.0 : refine(here, static_cast<double>(q + 1) / kSamples), here);
    }
  }

  const RowToOutput& map_;
  const std::vector<std::size_t>& visible_;
  const Readout& readout_;
  const std::vector<double>& original_;  // the original row over the visible keys
  std::vector<double> best_;
  double best_divergence_ = 0.0;
  double r0_, epsilon_;
  const std::vector<double>*a_ = nullptr, *b_ = nullptr;  // the segment being searched
  std::vector<double> oA_, oB_, point_, o_;
};

constexpr std::size_t kAllPairsUpTo = 64;

// Keys the pair searches use: all of them when there are few; otherwise those whose
// contribution pushes the readout up or down the most, and those with the most weight.
std::vector<std::size_t> pair_search_keys(const RowToOutput& map, const std::vector<std::size_t>& visible,
                                          const std::vector<double>& a, const std::vector<double>& slope) {
  const std::size_t k = visible.size();
  std::vector<std::size_t> keys(k);
  std::iota(keys.begin(), keys.end(), 0);
  if (k <= kAllPairsUpTo) return keys;
  std::vector<double> push(k);
  for (std::size_t v = 0; v < k; ++v)
    push[v] = dot(map.P[visible[v]], slope);
  std::vector<std::size_t> by_push = keys, by_weight = keys;
  std::sort(by_push.begin(), by_push.end(), [&](auto x, auto y) { return push[x] < push[y]; });
  std::sort(by_weight.begin(), by_weight.end(), [&](auto x, auto y) { return a[x] > a[y]; });
  std::vector<bool> chosen(k, false);
  for (std::size_t q = 0; q < 16; ++q)
    chosen[by_push[q]] = chosen[by_push[k - 1 - q]] = chosen[by_weight[q]] = true;
  keys.clear();
  for (std::size_t v = 0; v < k; ++v)
    if (chosen[v]) keys.push_back(v);
  return keys;
}

}  // namespace

Counterfactual counterfactual(const Scenario& s, const Trace& t, std::size_t query, std::size_t head,
                              const Readout& readout, double epsilon) {
  const HeadTrace& ht = t.heads[head];
  const std::size_t m = ht.weights.cols;
  Counterfactual c;
  c.head = head;
  c.epsilon = epsilon;
  c.original.assign(ht.weights.row(query).begin(), ht.weights.row(query).end());
  c.found = c.original;
  c.output_after.assign(t.output.row(query).begin(), t.output.row(query).end());
  c.readout_before = c.readout_after = readout.value(c.output_after);
  c.decision_before = c.decision_after = readout.decision(c.output_after);

  std::vector<std::size_t> visible;
  for (std::size_t j = 0; j < m; ++j)
    if (std::isfinite(ht.logits(query, j))) visible.push_back(j);
  if (visible.size() < 2) {
    c.note = visible.empty() ? "every key is hidden from this query: there are no weights to change"
                             : "only one key is visible to this query: its weight is 1 in every distribution";
    return c;
  }

  const RowToOutput map = row_to_output(s, t, query, head);
  const std::size_t k = visible.size();
  std::vector<double> a(k);  // the original weights over the visible keys
  for (std::size_t v = 0; v < k; ++v)
    a[v] = c.original[visible[v]];
  CounterfactualSearch search(map, visible, readout, a, c.readout_before, epsilon);
  const std::vector<std::size_t> pair_keys = pair_search_keys(map, visible, a, readout.gradient(c.output_after));
  c.exact = readout.linear() && k <= kAllPairsUpTo;

  const auto vertex = [&](std::size_t v) {
    std::vector<double> e(k, 0.0);
    e[v] = 1.0;
    return e;
  };
  // 1. The edges of the simplex (and its corners): for a linear readout the maximum is at
  //    a corner of the simplex cut by the two planes readout = r0 ± ε, which lies on an edge.
  for (std::size_t x = 0; x < pair_keys.size(); ++x)
    for (std::size_t y = x + 1; y < pair_keys.size(); ++y)
      search.search_segment(vertex(pair_keys[x]), vertex(pair_keys[y]));
  // 2. From the original row towards each key, so a small ε still finds a small move.
  for (std::size_t v = 0; v < k; ++v)
    search.search_segment(a, vertex(v));
  // 3. From the original row, moving one key's weight onto another.
  for (std::size_t x : pair_keys)
    for (std::size_t y : pair_keys)
      if (x != y && a[y] > 0) {
        std::vector<double> moved = a;
        moved[x] += a[y];
        moved[y] = 0.0;
        search.search_segment(a, moved);
      }

  // The row found (normalised and checked within ε when it was taken), on all m keys.
  std::fill(c.found.begin(), c.found.end(), 0.0);
  for (std::size_t v = 0; v < k; ++v)
    c.found[visible[v]] = search.best()[v];
  c.output_after = apply_row(map, c.found);
  c.readout_after = readout.value(c.output_after);
  assert(std::abs(c.readout_after - c.readout_before) <= epsilon);
  c.decision_after = readout.decision(c.output_after);
  c.divergence = jensen_shannon(c.found, c.original);
  if (c.divergence == 0.0) c.note = "no other row on these keys keeps the readout within ε; try a larger --epsilon";
  return c;
}

// ---- the probe ---------------------------------------------------------------------------

namespace {

// The request's query, head and ε, and the probe's price (it runs the scenario once per key)
// against its limits, before any work.
void check_probe_request(const Scenario& s, const ProbeOptions& options, std::size_t query) {
  const std::size_t n = s.n(), m = s.m(), heads = s.heads.size();
  if (query >= n) fail("query", fmt::format("token {} does not exist; query indices run from 0 to {}", query, n - 1));
  if (options.head >= heads)
    fail("head", fmt::format("head {} does not exist; {} has heads 0 to {}", options.head, s.name, heads - 1));
  if (!std::isfinite(options.epsilon) || options.epsilon < 0)
    fail("epsilon", fmt::format("must be a finite number >= 0 (e.g. 0.01) but is {}", options.epsilon));
  if (m > kMaxProbeKeys)
    fail("scenario",
         fmt::format("{} key tokens is more than the probe's limit of {}: it runs the scenario once per key; "
                     "use a shorter sequence",
                     m, kMaxProbeKeys));
  if ((m + 1) * heads * n * m > kMaxProbeCells)
    fail("scenario",
         fmt::format("the probe runs the scenario {} times ({} heads × {} × {} tokens each), more than its limit "
                     "of {} score cells; use fewer heads or tokens",
                     m + 1, heads, n, m, kMaxProbeCells));
  check_work(s, kMaxProbeWorkBytes, "scenario", m + 1);  // the cells above, with their widths
}

// Every measure of key j for the query: its weights, weight·‖v‖, the erasure effect (the
// engine run again with the key hidden) and gradient × input.
TokenMeasures measure_key(const Scenario& s, const Trace& trace, const AttentionInput& input,
                          const InputGradient& gradient, const ProbeResult& r, std::size_t query, std::size_t j) {
  const std::size_t heads = s.heads.size();
  TokenMeasures t;
  t.index = j;
  t.token = trace.source_tokens[j];
  t.visible = std::isfinite(trace.heads[0].logits(query, j));
  for (const HeadTrace& h : trace.heads) {
    t.weights.push_back(h.weights(query, j));
    t.weight += h.weights(query, j) / static_cast<double>(heads);
    t.value_weighted +=
        h.weights(query, j) * std::sqrt(dot(h.values.row(j), h.values.row(j))) / static_cast<double>(heads);
  }
  // Erasure: the engine again, with key j hidden from every query.
  Scenario without = s;
  if (std::find(without.mask.hidden_keys.begin(), without.mask.hidden_keys.end(), j) == without.mask.hidden_keys.end())
    without.mask.hidden_keys.push_back(j);
  const Trace erased = run_scenario(without);
  t.readout_without = r.readout.value(erased.output.row(query));
  t.erasure = t.readout_without - r.readout_value;
  t.decision_without = r.readout.decision(erased.output.row(query));
  t.flips = t.decision_without != r.decision;
  // Gradient × input, with x_j the vector the heads read (positions applied).
  t.gradient.assign(gradient.keys.row(j).begin(), gradient.keys.row(j).end());
  if (!s.source)
    for (std::size_t c = 0; c < t.gradient.size(); ++c)
      t.gradient[c] += gradient.queries(j, c);
  t.grad_x_input = dot(t.gradient, input.keys_from.row(j));
  return t;
}

// Kendall's τ between the weights and each other measure, over the keys the query can see
// (hidden keys are 0 in every measure).
void rank_agreement(ProbeResult& r) {
  std::vector<double> w, vw, erasure, gxi;
  for (const TokenMeasures& t : r.tokens)
    if (t.visible) {
      w.push_back(t.weight);
      vw.push_back(t.value_weighted);
      erasure.push_back(std::abs(t.erasure));
      gxi.push_back(std::abs(t.grad_x_input));
    }
  r.tau_value_weighted = kendall_tau(w, vw);
  r.tau_erasure = kendall_tau(w, erasure);
  r.tau_grad_x_input = kendall_tau(w, gxi);
}

// Serrano & Smith's test: does removing the highest-weighted key flip the decision, and does
// removing another one? With the verdict in words.
void serrano_smith_test(ProbeResult& r) {
  const std::size_t m = r.tokens.size();
  SerranoSmith& ss = r.serrano_smith;
  for (std::size_t j = 0; j < m; ++j) {
    if (r.tokens[j].weight > r.tokens[ss.top_weight].weight) ss.top_weight = j;
    if (std::abs(r.tokens[j].erasure) > std::abs(r.tokens[ss.top_erasure].erasure)) ss.top_erasure = j;
  }
  ss.has_decision = r.decision.has_value();
  ss.top_flips = r.tokens[ss.top_weight].flips;
  for (std::size_t j = 0; j < m; ++j)
    if (j != ss.top_weight && r.tokens[j].flips) ss.others_flipping.push_back(j);
  const auto key = [&](std::size_t j) { return fmt::format("key {} {}", j, in_quotes(r.source_tokens[j])); };
  std::string flip;
  if (!ss.has_decision) {
    flip = fmt::format("The readout {} has no decision to flip (use a class, coordinate or direction readout).",
                       r.readout.description);
  } else if (ss.top_flips && ss.others_flipping.empty()) {
    flip = fmt::format(
        "Knocking out the highest-weighted {} flips the decision ({} → {}), and no other single knock-out "
        "does: here the largest weight points at what the decision depends on.",
        key(ss.top_weight), *r.decision, *r.tokens[ss.top_weight].decision_without);
  } else if (ss.top_flips) {
    flip = fmt::format(
        "Knocking out the highest-weighted {} flips the decision, and so does knocking out {} other "
        "key(s) (first: {}): the weight picks one of several tokens the decision rests on.",
        key(ss.top_weight), ss.others_flipping.size(), key(ss.others_flipping[0]));
  } else if (!ss.others_flipping.empty()) {
    flip = fmt::format(
        "Knocking out the highest-weighted {} (weight {:.2f}) leaves the decision {}, but knocking out {} "
        "(weight {:.2f}) flips it to {}: here the largest weight misleads.",
        key(ss.top_weight), r.tokens[ss.top_weight].weight, *r.decision, key(ss.others_flipping[0]),
        r.tokens[ss.others_flipping[0]].weight, *r.tokens[ss.others_flipping[0]].decision_without);
  } else {
    flip = fmt::format("No single knock-out flips the decision {}.", *r.decision);
  }
  const std::string largest =
      ss.top_erasure == ss.top_weight
          ? fmt::format(" The largest erasure effect is the highest-weighted key's (Δ = {:+.3g}).",
                        r.tokens[ss.top_erasure].erasure)
          : fmt::format(
                " The largest erasure effect is {}'s (Δ = {:+.3g}), not the highest-weighted key's (Δ = {:+.3g}).",
                key(ss.top_erasure), r.tokens[ss.top_erasure].erasure, r.tokens[ss.top_weight].erasure);
  ss.verdict = flip + largest;
}

}  // namespace

ProbeResult probe(const Scenario& s, const ProbeOptions& options) {
  const std::size_t n = s.n(), m = s.m();
  const std::size_t query = options.query.value_or(s.query.value_or(n - 1));
  check_probe_request(s, options, query);

  ProbeResult r;
  const Trace trace = run_scenario(s);
  r.scenario = s.name;
  r.query = query;
  r.query_token = s.tokens[query];
  r.source_tokens = trace.source_tokens;
  for (const HeadTrace& h : trace.heads)
    r.head_names.push_back(h.name);
  r.output.assign(trace.output.row(query).begin(), trace.output.row(query).end());
  r.readout = parse_readout(options.readout, s, r.output);
  r.readout_value = r.readout.value(r.output);
  r.decision = r.readout.decision(r.output);

  const InputGradient gradient = output_gradient(s, trace, query, r.readout.gradient(r.output));
  const AttentionInput input = attention_input(s);
  for (std::size_t j = 0; j < m; ++j)
    r.tokens.push_back(measure_key(s, trace, input, gradient, r, query, j));
  rank_agreement(r);
  serrano_smith_test(r);
  r.counterfactual = counterfactual(s, trace, query, options.head, r.readout, options.epsilon);
  return r;
}

}  // namespace attnlab
