// `model evict`, described once (operations/request.hpp): KV-cache eviction policies measured
// on the model's own next-token predictions (analysis/eviction.hpp). The command, Python's
// Model.evict() and POST /api/model/evict read this request, price it, run it and write
// evict_json().
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/analysis/eviction.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/model.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

struct EvictRequest {
  static constexpr std::string_view kName = "model evict";
  static constexpr std::string_view kHelp =
      "KV-cache eviction put to the test: policies (a window, attention sinks, H2O's heavy hitters, random, by "
      "effect) at cache budgets, measured by the model's next-token loss and agreement with the full cache";
  static constexpr std::string_view kPolicies[] = {"full", "window", "sinks", "h2o", "random", "effect"};

  TokenInput text;
  std::optional<std::string> texts;  // a file of texts (operations/corpus.hpp)
  IdSequences sequences;
  std::vector<std::uint64_t> budget = {64, 256, 1024};
  std::vector<std::string> policy = {"full", "window", "sinks", "h2o", "random", "effect"};
  std::uint64_t sinks = 4;
  CacheType cache = CacheType::f32;
  std::optional<std::uint64_t> max_tokens;
  std::uint64_t seed = 0;
  bool kept = false;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text", .help = "The text (ids: token ids instead); or texts, or sequences"});
    field(texts, {.name = "texts",
                  .help = "A file of texts: a document a line, or JSON Lines of {\"text\": ...} or {\"ids\": [...]}",
                  .faces = kCommandLine | kPython});
    field(sequences, {.name = "sequences",
                      .help = "Several texts as token-id sequences, measured together",
                      .faces = kHttpApi | kPython});
    field(budget, {.name = "budget",
                   .help = "Cache budgets: tokens the cache may hold, the newest included",
                   .unit = "tokens",
                   .range = {1, 1u << 20},
                   .max_items = 16});
    field(policy, {.name = "policy", .help = "The policies", .choices = kPolicies});
    field(sinks, {.name = "sinks", .help = "The sinks policy's first tokens, always kept", .range = {0, 1024}});
    field(cache, {.name = "cache", .help = "How the policies' caches store keys and values (the reference stays f32)"});
    field(max_tokens, {.name = "max_tokens",
                       .help = "Each text cut to its first N tokens (default: the model's positions)",
                       .unit = "tokens",
                       .range = {2, 1u << 20}});
    field(seed, {.name = "seed", .help = "Seed of the random policy"});
    field(kept, {.name = "kept", .help = "List each run's cached positions after each text's last prediction"});
  }
};

struct EvictLimits {
  double max_flops = 1e15;  // the single-token forwards' FLOPs (eviction_steps × a token's)
  std::string_view elsewhere = "use fewer or shorter texts, smaller budgets or fewer policies (effect costs most)";
};

struct EvictResult {
  std::vector<std::vector<int>> texts;
  EvictionOptions options;
  double flops = 0;
  std::size_t token_bytes = 0;  // a token's keys and values in every layer, stored as options.cache
  EvictionResult result;
};
EvictResult price_evict(const ModelDir& model, const EvictRequest& request, const EvictLimits& limits = {});
void run_evict(const ModelDir& model, EvictResult& result, const std::function<void(double, double)>& progress = {});
// {"texts", "tokens", "predicted", "cache", "token_bytes", "full": {"loss", "perplexity", "agreement",
//  "kept_bytes", "budget"}, "results": [{"policy", "budget", "loss", "perplexity", "agreement",
//  "kept_bytes", "evictions"[, "kept": [[positions] per text]]}]}
nlohmann::json evict_json(const EvictResult& result);

}  // namespace attnlab
