// model evict: one check, one entry and one reply for every face (operations/evict.hpp).
#include "attnlab/operations/evict.hpp"

#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/operations/corpus.hpp"

namespace attnlab {

using nlohmann::json;

EvictResult price_evict(const ModelDir& m, const EvictRequest& r, const EvictLimits& limits) {
  const ModelConfig& c = m.model.config;
  EvictResult out;
  if (int(r.text.given()) + int(r.texts.has_value()) + int(!r.sequences.empty()) != 1)
    fail("text", "give one of: a text (or ids), a file of texts, sequences of token ids");
  const std::size_t max_tokens = r.max_tokens ? std::min<std::size_t>(*r.max_tokens, c.n_positions) : c.n_positions;
  if (r.text.given()) {
    std::vector<int> ids = r.text.text ? encode_text(m, *r.text.text) : *r.text.ids;
    if (ids.size() > max_tokens) ids.resize(max_tokens);
    out.texts.push_back(token_ids(m, TokenInput{{}, ids}, "text"));
  } else if (!r.sequences.empty()) {
    for (std::size_t k = 0; k < r.sequences.size(); ++k) {
      std::vector<int> ids = r.sequences[k];
      if (ids.size() > max_tokens) ids.resize(max_tokens);
      if (ids.size() < 2)
        fail(fmt::format("sequences[{}]", k), "has fewer than 2 tokens; eviction is measured on predictions");
      for (std::size_t j = 0; j < ids.size(); ++j)
        check_token_id(c, ids[j], fmt::format("sequences[{}][{}]", k, j));
      out.texts.push_back(std::move(ids));
    }
  } else {
    for (CorpusDocument& doc : read_corpus(m, *r.texts, "texts")) {
      if (doc.ids.size() > max_tokens) doc.ids.resize(max_tokens);
      if (doc.ids.size() < 2)
        fail("texts", fmt::format("{} line {}: one token; eviction is measured on predictions, which need 2 or more",
                                  *r.texts, doc.line));
      out.texts.push_back(std::move(doc.ids));
    }
  }
  if (out.texts.front().size() < 2)
    fail("text", "has one token; eviction is measured on predictions, which need 2 or more");
  EvictionOptions& o = out.options;
  if (r.budget.empty()) fail("budget", "give at least one budget, in tokens");
  o.budgets.assign(r.budget.begin(), r.budget.end());
  if (r.policy.empty()) fail("policy", "give at least one policy");
  o.policies.clear();
  for (const std::string& p : r.policy)
    o.policies.push_back(parse_policy(p, "policy"));
  o.sinks = r.sinks;
  o.seed = r.seed;
  o.cache = r.cache;
  o.list_kept = r.kept;
  out.token_bytes = cache_token_bytes(c, o.cache);
  out.flops = eviction_steps(out.texts, o) * forward_flops(c, 1);
  if (out.flops > limits.max_flops)
    fail(r.texts ? "texts" : "text",
         fmt::format(
             "the policies' {:.3g} single-token forwards take {:.3g} FLOPs, more than the {:.3g} allowed here; {}",
             eviction_steps(out.texts, o), out.flops, limits.max_flops, limits.elsewhere));
  return out;
}

void run_evict(const ModelDir& m, EvictResult& r, const std::function<void(double, double)>& progress) {
  r.result = evict(m.model, r.texts, r.options, progress);
}

namespace {

json measure_json(const EvictionMeasure& e) {
  json out = {{"policy", policy_name(e.policy)}, {"budget", e.budget},       {"loss", e.loss},
              {"perplexity", e.perplexity},      {"agreement", e.agreement}, {"kept_bytes", e.kept_bytes},
              {"evictions", e.evictions}};
  return out;
}

}  // namespace

json evict_json(const EvictResult& r) {
  const EvictionResult& e = r.result;
  json full = measure_json(e.full);
  full.erase("policy");
  full.erase("evictions");
  json results = json::array();
  for (const EvictionMeasure& m : e.results) {
    json one = measure_json(m);
    if (r.options.list_kept) one["kept"] = m.kept;
    results.push_back(std::move(one));
  }
  return {{"texts", e.texts},
          {"tokens", e.tokens},
          {"predicted", e.predicted},
          {"cache", cache_type_name(r.options.cache)},
          {"token_bytes", r.token_bytes},
          {"full", std::move(full)},
          {"results", std::move(results)}};
}

}  // namespace attnlab
