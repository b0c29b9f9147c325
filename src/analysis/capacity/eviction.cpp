// KV-cache eviction measured on the model's predictions (attnlab/analysis/eviction.hpp).
#include "attnlab/analysis/eviction.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

namespace {

constexpr std::string_view kPolicyNames[] = {"full", "window", "sinks", "h2o", "random", "effect"};

// KL(p ‖ q) of the softmaxes of two logit rows, in nats.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  const double lse_p = log_sum_exp(p_logits), lse_q = log_sum_exp(q_logits);
  double kl = 0;
  for (std::size_t v = 0; v < p_logits.size(); ++v) {
    const double log_p = p_logits[v] - lse_p, log_q = q_logits[v] - lse_q;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);
}

// One text through one policy at one budget: each predicted position's loss and top token.
struct TextRun {
  std::vector<double> losses;
  std::vector<int> top;
  std::size_t evictions = 0;
  std::vector<std::size_t> kept;  // cached after the last step: the kept set and the step's own token
};

class PolicyRun {
 public:
  PolicyRun(const Model& model, EvictionPolicy policy, std::size_t budget, const EvictionOptions& o, CacheType type)
      : decoder_(model, type), policy_(policy), slots_(budget - 1), sinks_(o.sinks), rng_(o.seed), model_(model) {}

  TextRun run(std::span<const int> ids, const std::function<void()>& step_done) {
    TextRun out;
    score_.assign(ids.size(), 0.0);
    for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
      check_deadline();
      if (t > 0) kept_.push_back(t - 1);
      while (policy_ != EvictionPolicy::full && kept_.size() > slots_) {
        kept_.erase(kept_.begin() + std::ptrdiff_t(victim(ids[t], step_done)));
        ++out.evictions;
      }
      const SelectiveDecoder::Step s = decoder_.step(ids[t], kept_);
      step_done();
      if (policy_ == EvictionPolicy::h2o) accumulate(s.weights, t);
      out.losses.push_back(log_sum_exp(s.logits) - s.logits[static_cast<std::size_t>(ids[t + 1])]);
      out.top.push_back(top_k(s.logits, 1)[0].id);
    }
    out.kept = kept_;
    out.kept.push_back(ids.size() - 2);
    return out;
  }

 private:
  // The index in kept_ of the token to evict (kept_ holds slots_ + 1).
  std::size_t victim(int id, const std::function<void()>& step_done) {
    switch (policy_) {
      case EvictionPolicy::full:
      case EvictionPolicy::window: return 0;
      case EvictionPolicy::sinks: return std::min(sinks_, slots_);
      case EvictionPolicy::random: {
        const double u = rng_.uniform();
        return std::min(kept_.size() - 1, static_cast<std::size_t>(u * double(kept_.size())));
      }
      case EvictionPolicy::h2o: {
        const std::size_t recent = slots_ - slots_ / 2, candidates = kept_.size() - recent;
        std::size_t best = 0;
        for (std::size_t i = 1; i < candidates; ++i)
          if (score_[kept_[i]] < score_[kept_[best]]) best = i;
        return best;
      }
      case EvictionPolicy::effect: {
        const SelectiveDecoder::Step all = decoder_.step(id, kept_, false);
        step_done();
        std::size_t best = 0;
        double least = INFINITY;
        std::vector<std::size_t> without(kept_.size() - 1);
        for (std::size_t i = 0; i < kept_.size(); ++i) {
          std::copy(kept_.begin(), kept_.begin() + std::ptrdiff_t(i), without.begin());
          std::copy(kept_.begin() + std::ptrdiff_t(i + 1), kept_.end(), without.begin() + std::ptrdiff_t(i));
          const double moved = kl_divergence(all.logits, decoder_.step(id, without, false).logits);
          step_done();
          if (moved < least) least = moved, best = i;
        }
        return best;
      }
    }
    return 0;
  }

  // H2O's scores: the weight every head of every layer put on each token this step.
  void accumulate(std::span<const float> weights, std::size_t t) {
    const std::size_t seen = kept_.size() + 1, rows = model_.config.n_layer * model_.config.n_head;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < seen; ++j)
        score_[j < kept_.size() ? kept_[j] : t] += weights[r * seen + j];
  }

  SelectiveDecoder decoder_;
  EvictionPolicy policy_;
  std::size_t slots_, sinks_;  // slots_: earlier tokens the cache may hold beside the step's own
  SplitMix64 rng_;
  const Model& model_;
  std::vector<std::size_t> kept_;
  std::vector<double> score_;
};

std::size_t longest(std::span<const std::vector<int>> texts) {
  std::size_t n = 0;
  for (const std::vector<int>& ids : texts)
    n = std::max(n, ids.size());
  return n;
}

// The runs asked for: each policy at each budget, full once (at the longest text's length).
std::vector<std::pair<EvictionPolicy, std::size_t>> runs_of(std::span<const std::vector<int>> texts,
                                                            const EvictionOptions& o) {
  std::vector<std::pair<EvictionPolicy, std::size_t>> runs;
  for (EvictionPolicy p : o.policies) {
    if (p == EvictionPolicy::full)
      runs.emplace_back(p, longest(texts));
    else
      for (std::size_t b : o.budgets)
        runs.emplace_back(p, b);
  }
  return runs;
}

}  // namespace

std::string_view policy_name(EvictionPolicy policy) { return kPolicyNames[static_cast<int>(policy)]; }

EvictionPolicy parse_policy(std::string_view text, std::string_view field) {
  for (std::size_t i = 0; i < std::size(kPolicyNames); ++i)
    if (text == kPolicyNames[i]) return static_cast<EvictionPolicy>(i);
  fail(field,
       fmt::format("\"{}\" is not a policy; use full, window, sinks, h2o, random or effect", text.substr(0, 32)));
}

double eviction_steps(std::span<const std::vector<int>> texts, const EvictionOptions& o) {
  double steps = 0;
  for (const std::vector<int>& ids : texts) {
    const double predicted = ids.size() < 2 ? 0.0 : double(ids.size() - 1);
    steps += predicted;  // the reference
    for (const auto& [policy, budget] : runs_of(texts, o)) {
      steps += predicted;
      if (policy == EvictionPolicy::effect) steps += double(budget + 1) * std::max(0.0, predicted - double(budget));
    }
  }
  return steps;
}

EvictionResult evict(const Model& model, std::span<const std::vector<int>> texts, const EvictionOptions& o,
                     const std::function<void(double, double)>& progress) {
  if (texts.empty()) fail("texts", "none given; give at least one text");
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (texts[i].size() < 2)
      fail("texts", fmt::format("text {} has {} token(s); eviction is measured on predictions, which need 2 or more",
                                i + 1, texts[i].size()));
  if (o.policies.empty()) fail("policies", "none given; use full, window, sinks, h2o, random or effect");
  for (std::size_t b : o.budgets)
    if (b == 0) fail("budgets", "a budget of 0 tokens keeps nothing, not even the token itself; use 1 or more");
  const double total = eviction_steps(texts, o);
  double done = 0;
  const std::function<void()> step_done = [&] {
    if (progress) progress(++done, total);
  };
  EvictionResult result;
  result.texts = texts.size();
  for (const std::vector<int>& ids : texts)
    result.tokens += ids.size(), result.predicted += ids.size() - 1;
  const std::size_t n_max = longest(texts);

  // The reference: every token kept, in f32.
  std::vector<std::vector<int>> reference_top;
  double reference_loss = 0;
  for (const std::vector<int>& ids : texts) {
    TextRun r = PolicyRun(model, EvictionPolicy::full, n_max, o, CacheType::f32).run(ids, step_done);
    for (double loss : r.losses)
      reference_loss += loss;
    reference_top.push_back(std::move(r.top));
  }
  const auto measure = [&](EvictionPolicy policy, std::size_t budget, CacheType type, double loss_sum,
                           std::size_t agreeing) {
    EvictionMeasure m;
    m.policy = policy;
    m.budget = budget;
    m.loss = loss_sum / double(result.predicted);
    m.perplexity = std::exp(m.loss);
    m.agreement = double(agreeing) / double(result.predicted);
    m.kept_bytes = std::min(budget, n_max) * cache_token_bytes(model.config, type);
    return m;
  };
  result.full = measure(EvictionPolicy::full, n_max, CacheType::f32, reference_loss, result.predicted);

  for (const auto& [policy, budget] : runs_of(texts, o)) {
    double loss = 0;
    std::size_t agreeing = 0, evictions = 0;
    std::vector<std::vector<std::size_t>> kept;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      TextRun r = PolicyRun(model, policy, budget, o, o.cache).run(texts[i], step_done);
      for (std::size_t t = 0; t < r.losses.size(); ++t) {
        loss += r.losses[t];
        agreeing += r.top[t] == reference_top[i][t];
      }
      evictions += r.evictions;
      if (o.list_kept) kept.push_back(std::move(r.kept));
    }
    result.results.push_back(measure(policy, budget, o.cache, loss, agreeing));
    result.results.back().evictions = evictions;
    result.results.back().kept = std::move(kept);
  }
  return result;
}

}  // namespace attnlab
