// The verdict on one prediction: every attribution measure beside the interventions, and
// how far each ranks sources and heads as the interventions do (attnlab/analysis/attribution.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/probe.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();

// Ranks from 1, ties sharing their mean rank.
std::vector<double> ranks(std::span<const double> x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]])
      ++j;
    for (std::size_t k = i; k <= j; ++k)
      r[order[k]] = double(i + j) / 2 + 1;
    i = j + 1;
  }
  return r;
}

std::vector<double> sizes(std::span<const double> x) {
  std::vector<double> out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), [](double v) { return std::abs(v); });
  return out;
}

double metric_of(std::span<const float> logits, int target, int contrast) {
  return double(logits[static_cast<std::size_t>(target)]) -
         (contrast >= 0 ? double(logits[static_cast<std::size_t>(contrast)]) : 0.0);
}

// Integrated gradients' baseline x' [n × d]: the input embeddings x with each token's own
// embedding (× the family's scale) replaced by the vocabulary's mean; learned positions stay.
std::vector<float> baseline_input(const Model& model, std::span<const int> ids, const std::vector<float>& x) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd, V = c.vocab_size;
  const float scale = float(c.embedding_scale);
  std::vector<double> mean(d, 0.0);
  std::vector<float> row(d);
  for (std::size_t t = 0; t < V; ++t) {
    model.wte.row(t, d, row.data());
    for (std::size_t k = 0; k < d; ++k)
      mean[k] += row[k] / double(V);
  }
  std::vector<float> out = x;
  for (std::size_t j = 0; j < ids.size(); ++j) {
    model.wte.row(static_cast<std::size_t>(ids[j]), d, row.data());
    for (std::size_t k = 0; k < d; ++k)
      out[j * d + k] += scale * (float(mean[k]) - row[k]);
  }
  return out;
}

}  // namespace

double spearman_rho(std::span<const double> a, std::span<const double> b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n < 2) return kUndefined;
  const std::vector<double> ra = ranks(a.first(n)), rb = ranks(b.first(n));
  const double mean = double(n + 1) / 2;
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < n; ++i)
    ab += (ra[i] - mean) * (rb[i] - mean), aa += (ra[i] - mean) * (ra[i] - mean), bb += (rb[i] - mean) * (rb[i] - mean);
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : kUndefined;
}

double verdict_flops(const ModelConfig& c, std::size_t n, std::size_t steps) {
  const double forwards = double(n) + double(c.n_head) * double(c.n_layer + 1) + 3.0 * double(steps + 1) + 2;
  return forwards * forward_flops(c, n);
}

Verdict verdict(const Model& model, std::span<const int> all_ids, const VerdictOptions& options) {
  const ModelConfig& c = model.config;
  const std::size_t L = c.n_layer, H = c.n_head, d = c.n_embd, hd = c.head_dim(), Z = c.attention_width();
  if (all_ids.empty()) fail("ids", "no tokens; give at least one");
  const std::size_t p = options.target.position.value_or(all_ids.size() - 1);
  if (p >= all_ids.size())
    fail("position", fmt::format("{} is past the last token ({} tokens, positions 0 to {})", p, all_ids.size(),
                                 all_ids.size() - 1));
  if (options.steps < 1 || options.steps > 256)
    fail("steps", fmt::format("{} integrated-gradient steps; give 1 to 256", options.steps));
  const std::span<const int> ids = all_ids.first(p + 1);  // nothing after the prediction reaches it
  const std::size_t n = ids.size();
  const double work = verdict_flops(c, n, options.steps);
  if (work > kMaxVerdictFlops)
    fail("ids", fmt::format("the verdict over {} tokens runs about {:.0f} forwards ({:.3g} FLOPs), more than the "
                            "{:.3g} attnlab does for one request; use fewer tokens",
                            n, work / forward_flops(c, n), work, kMaxVerdictFlops));

  const LogitAttribution dla = attribute_logit(model, ids, {p, options.target.target, options.target.contrast});
  ForwardOptions keep;
  keep.keep_stream = true;
  keep.logits = LogitRows::none;  // the reruns start from its stream; the metric is the attribution's
  const ForwardResult run = model_forward(model, ids, keep);
  Verdict v;
  v.n = n, v.position = p, v.layers = L, v.heads = H;
  v.target = dla.target, v.contrast = dla.contrast, v.metric = dla.logit;
  const auto rerun = [&](std::size_t layer, const ForwardOptions& o) {
    return metric_of(forward_from(model, layer, layer < L ? run.stream[layer].x_in : run.final_stream, o, p), v.target,
                     v.contrast) -
           v.metric;
  };

  // ---- the measures per source token ----
  const ContextMixing mixing = context_mixing(model, run, p);
  Scores attention{"attention", std::vector<double>(n, 0.0)}, value_norms{"value_norms", std::vector<double>(n, 0.0)};
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t h = 0; h < H; ++h)
        attention.values[j] += mixing.attention[(l * H + h) * n + j] / double(L * H);
      value_norms.values[j] += mixing.value_norms[l * n + j] / double(L);
    }
  const std::vector<float>& x = run.stream[0].x_in;  // the input embeddings [n × d]
  Scores gradient{"grad_x_input", std::vector<double>(n, 0.0)};
  const std::vector<float> at_x = stream_gradient(model, x, p, v.target, v.contrast).gradient;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t k = 0; k < d; ++k)
      gradient.values[j] += double(at_x[j * d + k]) * double(x[j * d + k]);
  // IG_j = ∫₀¹ ∂m/∂x_j(x' + α·(x − x')) · (x_j − x'_j) dα by the midpoint rule, from x' = every
  // token's embedding replaced by the vocabulary's mean (positions kept).
  const std::vector<float> from = baseline_input(model, ids, x);
  std::vector<float> difference(x.size());
  for (std::size_t k = 0; k < x.size(); ++k)
    difference[k] = x[k] - from[k];
  Scores integrated{"integrated_gradients", std::vector<double>(n, 0.0)};
  for (std::size_t s = 0; s < options.steps; ++s) {
    const float alpha = float((double(s) + 0.5) / double(options.steps));
    std::vector<float> point(x.size());
    for (std::size_t k = 0; k < x.size(); ++k)
      point[k] = from[k] + alpha * difference[k];
    const std::vector<float> g = stream_gradient(model, point, p, v.target, v.contrast).gradient;
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t k = 0; k < d; ++k)
        integrated.values[j] += double(g[j * d + k]) * double(difference[j * d + k]) / double(options.steps);
    if (options.progress) options.progress("gradients", s + 1, options.steps);
  }
  v.token_measures = {attention,
                      value_norms,
                      {"rollout", {mixing.rollout.begin(), mixing.rollout.begin() + std::ptrdiff_t(n)}},
                      {"alti", {mixing.alti.begin(), mixing.alti.begin() + std::ptrdiff_t(n)}},
                      {"dla", dla.by_source},
                      gradient,
                      integrated};
  // ---- erasure: each key hidden in every layer ----
  Scores erasure{"erasure", std::vector<double>(n, 0.0)};
  for (std::size_t j = 0; j < n; ++j) {
    ForwardOptions o;
    o.hidden_key = j;
    erasure.values[j] = rerun(0, o);
    if (options.progress) options.progress("erasure", j + 1, n);
  }
  v.token_interventions = {erasure};

  // ---- per head: DLA against zero and mean ablation ----
  v.head_measures = {{"dla", dla.heads}};
  Scores zero{"zero_ablation", std::vector<double>(L * H, 0.0)}, mean{"mean_ablation", std::vector<double>(L * H, 0.0)};
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t h = 0; h < H; ++h) {
      check_deadline();
      ForwardOptions zeroed;
      zeroed.ablate = {{l, h}};
      zero.values[l * H + h] = rerun(l, zeroed);
      std::vector<float> average(hd, 0.0f);  // the head's output averaged over the positions
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < hd; ++k)
          average[k] += run.stream[l].z[i * Z + h * hd + k] / float(n);
      ForwardOptions averaged;
      HeadReplacement& r = averaged.replace_heads.emplace_back(HeadReplacement{{l, h}, {}});
      for (std::size_t i = 0; i < n; ++i)
        r.z.insert(r.z.end(), average.begin(), average.end());
      mean.values[l * H + h] = rerun(l, averaged);
      if (options.progress) options.progress("heads", l * H + h + 1, L * H);
    }
  v.head_interventions = {zero, mean};

  // ---- the agreements ----
  const auto agree = [&](const std::vector<Scores>& measures, const std::vector<Scores>& interventions) {
    for (const Scores& m : measures)
      for (const Scores& e : interventions) {
        const std::vector<double> a = sizes(m.values), b = sizes(e.values);
        v.agreements.push_back({m.name, e.name, kendall_tau(a, b), spearman_rho(a, b)});
      }
  };
  agree(v.token_measures, v.token_interventions);
  agree(v.head_measures, v.head_interventions);
  return v;
}

std::vector<AgreementSpread> agreement_spread(const std::vector<Verdict>& verdicts) {
  std::vector<AgreementSpread> out;
  if (verdicts.empty()) return out;
  for (std::size_t k = 0; k < verdicts[0].agreements.size(); ++k) {
    AgreementSpread s{verdicts[0].agreements[k].measure, verdicts[0].agreements[k].intervention};
    std::vector<double> taus, rhos;
    for (const Verdict& v : verdicts) {
      const Agreement& a = v.agreements.at(k);
      if (std::isfinite(a.kendall)) taus.push_back(a.kendall);
      if (std::isfinite(a.spearman)) rhos.push_back(a.spearman);
    }
    const auto mean_sd = [](const std::vector<double>& x, double& mean, double& sd) {
      mean = sd = kUndefined;
      if (x.empty()) return;
      mean = std::accumulate(x.begin(), x.end(), 0.0) / double(x.size());
      double squares = 0;
      for (double e : x)
        squares += (e - mean) * (e - mean);
      sd = x.size() > 1 ? std::sqrt(squares / double(x.size() - 1)) : 0.0;
    };
    s.texts = taus.size();
    mean_sd(taus, s.kendall_mean, s.kendall_sd);
    mean_sd(rhos, s.spearman_mean, s.spearman_sd);
    out.push_back(s);
  }
  return out;
}

}  // namespace attnlab
