// KV-cache eviction put to the test: a cache held to a budget of tokens by a policy, measured
// on the model's own next-token predictions against the full cache.
//
// Every text runs a token at a time (SelectiveDecoder). Before token t runs, the tokens 0..t−1
// still cached are the kept set; while it holds more than budget − 1 (the budget counts the
// token itself), the policy evicts one, and an evicted token never returns. The same tokens are
// kept in every layer and head. The policies, each choosing which kept token goes:
//   window    the oldest: the last budget − 1 tokens stay
//   sinks     StreamingLLM (Xiao et al. 2023): the oldest after the first `sinks` tokens, which
//             stay (the attention sinks), then a window
//   h2o       H2O (Zhang et al. 2023): the one with the least attention weight accumulated so far
//             (every query that saw it, summed over layers and heads), outside the
//             ⌈(budget − 1) / 2⌉ most recent, which stay; ties: the oldest
//   random    one drawn uniformly (splitmix64: index ⌊u · size⌋, u = the draw's uniform())
//   effect    the one whose removal moves this step's next-token distribution least: each kept
//             token tried out, KL(p with all kept ‖ p without it), the smallest goes (ties: the
//             oldest); budget + 2 forwards a step once the cache is full
//   full      none (the cache whole, in the chosen storage type)
// If attention weight were importance, h2o would match effect. The measures, over every
// predicted token (position t predicting t + 1) of every text: the mean loss in nats,
// perplexity e^loss, and agreement, the share of positions whose most probable next token
// is the full f32 cache's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "attnlab/model/model.hpp"
#include "attnlab/model/selective_decoder.hpp"

namespace attnlab {

enum class EvictionPolicy { full, window, sinks, h2o, random, effect };
std::string_view policy_name(EvictionPolicy policy);  // "full", "window", ...
// InputError naming `field` for a name not among them.
EvictionPolicy parse_policy(std::string_view text, std::string_view field);

struct EvictionOptions {
  std::vector<std::size_t> budgets = {64, 256, 1024};  // tokens the cache may hold, the newest included
  std::vector<EvictionPolicy> policies = {EvictionPolicy::full, EvictionPolicy::window, EvictionPolicy::sinks,
                                          EvictionPolicy::h2o,  EvictionPolicy::random, EvictionPolicy::effect};
  std::size_t sinks = 4;             // the sinks policy's first tokens kept
  std::uint64_t seed = 0;            // the random policy's
  CacheType cache = CacheType::f32;  // how the policies' caches store keys and values
  bool list_kept = false;            // each run's kept set after each text's last token
};

struct EvictionMeasure {
  EvictionPolicy policy = EvictionPolicy::full;
  std::size_t budget = 0;                      // tokens; full: the longest text's length
  double loss = 0;                             // nats per predicted token
  double perplexity = 0;                       // e^loss
  double agreement = 0;                        // share of positions whose top token is the full f32 cache's
  std::size_t kept_bytes = 0;                  // the cache at its largest: min(budget, longest text) tokens
  std::size_t evictions = 0;                   // tokens evicted, over every text
  std::vector<std::vector<std::size_t>> kept;  // [text] the positions cached after its last token (list_kept)
};

struct EvictionResult {
  EvictionMeasure full;                              // the full cache in f32: the reference
  std::vector<EvictionMeasure> results;              // each policy at each budget (full once), in the options' order
  std::size_t texts = 0, tokens = 0, predicted = 0;  // predicted: Σ (length − 1)
};

// Single-token forwards `evict` runs: the reference's, and each policy's at each budget (effect:
// budget + 2 a step once the cache is full).
double eviction_steps(std::span<const std::vector<int>> texts, const EvictionOptions& options);

// The measures; `progress(done, total)` counts eviction_steps. InputError naming "texts" for a
// text of fewer than 2 tokens, "budgets" for a budget of 0.
EvictionResult evict(const Model& model, std::span<const std::vector<int>> texts, const EvictionOptions& options,
                     const std::function<void(double, double)>& progress = {});

}  // namespace attnlab
