// Generation: a prompt, then one new token at a time through the KV cache (Decoder), each
// the most probable (temperature 0) or drawn from softmax(logits / T) over the top k.
// `attnlab model generate` and the Python module's Model.generate both go through it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "attnlab/core/rng.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

struct GenerateOptions {
  std::size_t tokens = 20;           // new tokens
  double temperature = 0;            // 0: greedy; up to 100
  std::size_t top_k = 0;             // sample among the k most probable (0: all)
  double top_p = 1;                  // then among the most probable whose probabilities reach p (nucleus; 1: all)
  std::uint64_t seed = 0;            // of the sampling (splitmix64)
  bool bf16 = false;                 // the prompt's products in bf16 (attnlab/model/blas.hpp's Bf16Products)
  bool trace = false;                // each step's alternatives and every head's weights over the cache
  std::size_t alternatives = 5;      // with trace: the most probable tokens listed each step
  CacheType cache = CacheType::f32;  // how the cache stores keys and values (core/kv_cache.hpp)
};

struct GeneratedToken {
  int id = 0;
  double probability = 0;                         // under softmax(logits), T = 1, whatever the sampling used
  std::size_t cache_tokens = 0, cache_bytes = 0;  // the KV cache after the token went in
  // With trace: the query the token was chosen after (the last token cached before it, at
  // `position`), the most probable tokens there (T = 1), and its weights over the cache
  // [L × H × (position + 1)]: layer l, head h's row at (l·H + h)·(position + 1).
  std::size_t position = 0;
  std::vector<TokenProbability> alternatives;
  std::vector<float> attention;
};

// The numbers a traced generation keeps: L × H × Σ (cache before each new token).
double trace_numbers(const ModelConfig& config, std::size_t prompt_tokens, std::size_t new_tokens);

// Throws InputError naming "temperature" (outside 0 to 100), "top_p" (outside (0, 1]), "tokens" (none, or more than
// the model's positions leave after the prompt) or "bf16" (asked where the CPU has no bf16 units).
void check_generate(const ModelConfig& config, std::size_t prompt_tokens, const GenerateOptions& options);

// The prompt (all at once), then options.tokens new tokens; `each` sees every one as it is
// made. Checked first (check_generate).
std::vector<GeneratedToken> generate(const Model& model, std::span<const int> prompt, const GenerateOptions& options,
                                     const std::function<void(const GeneratedToken&)>& each = {});

// The next token from a position's logits: the most probable at temperature 0, else drawn
// by `rng` from softmax(logits / T) over the top k (all when k is 0), cut to the fewest most
// probable whose probabilities sum to at least top_p (Holtzman et al. 2020; 1: no cut).
int next_token(std::span<const float> logits, double temperature, std::size_t k, double top_p, SplitMix64& rng);

}  // namespace attnlab
