// Generation through the KV cache (attnlab/model/generate.hpp).
#include "attnlab/model/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/core/error.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

namespace {

// The token's probability under softmax(logits) (T = 1).
double probability_of(std::span<const float> logits, int id) {
  return std::exp(static_cast<double>(logits[static_cast<std::size_t>(id)]) - log_sum_exp(logits));
}

}  // namespace

int next_token(std::span<const float> logits, double temperature, std::size_t k, double top_p, SplitMix64& rng) {
  if (temperature == 0) return top_k(logits, 1)[0].id;
  // (logit − the largest) / T: at a tiny T the others go to −inf and the largest stays 0,
  // where logit / T would overflow every one of them to ±inf.
  const double largest = *std::max_element(logits.begin(), logits.end());
  std::vector<float> scaled(logits.size());
  for (std::size_t v = 0; v < logits.size(); ++v)
    scaled[v] = static_cast<float>((double(logits[v]) - largest) / temperature);
  std::vector<TokenProbability> candidates = top_k(scaled, k == 0 ? scaled.size() : k);  // most probable first
  double total = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    total += candidates[i].probability;
    if (top_p < 1 && total >= top_p) {  // the nucleus: the fewest whose probabilities reach p
      candidates.resize(i + 1);
      break;
    }
  }
  double u = rng.uniform() * total;
  for (const TokenProbability& t : candidates)
    if ((u -= t.probability) <= 0) return t.id;
  return candidates.back().id;
}

double trace_numbers(const ModelConfig& c, std::size_t prompt_tokens, std::size_t new_tokens) {
  // Σ_{k < new} (prompt + k) cached tokens, each weighed by every head of every layer.
  const double cached = double(new_tokens) * double(prompt_tokens) + double(new_tokens) * double(new_tokens - 1) / 2;
  return double(c.n_layer) * double(c.n_head) * cached;
}

void check_generate(const ModelConfig& c, std::size_t prompt_tokens, const GenerateOptions& o) {
  if (!(o.temperature >= 0) || o.temperature > 100) fail("temperature", "must be 0 (greedy) to 100");
  if (!(o.top_p > 0) || o.top_p > 1) fail("top_p", "must be more than 0 and at most 1 (1: every token)");
  if (o.tokens < 1 || prompt_tokens + o.tokens > c.n_positions)
    fail("tokens", fmt::format("the prompt's {} tokens plus {} new ones must fit the model's {} positions",
                               prompt_tokens, o.tokens, c.n_positions));
  if (o.bf16) check_bf16_products("bf16");
}

std::vector<GeneratedToken> generate(const Model& model, std::span<const int> prompt, const GenerateOptions& o,
                                     const std::function<void(const GeneratedToken&)>& each) {
  check_generate(model.config, prompt.size(), o);
  if (prompt.empty()) fail("prompt", "is empty; give at least one token");
  Decoder decoder(model, o.cache);
  decoder.reserve(prompt.size() + o.tokens);
  decoder.keep_weights(o.trace);
  SplitMix64 rng(o.seed);
  std::vector<float> logits;
  {
    const Bf16Products bf16(o.bf16);
    logits = decoder.step(prompt);  // the prompt, all at once
  }
  std::vector<GeneratedToken> out;
  for (std::size_t step = 0; step < o.tokens; ++step) {
    GeneratedToken t;
    t.id = next_token(logits, o.temperature, o.top_k, o.top_p, rng);
    t.probability = probability_of(logits, t.id);
    if (o.trace) {
      t.position = decoder.length() - 1;
      t.alternatives = top_k(logits, o.alternatives);
      for (const std::vector<float>& layer : decoder.last_weights())
        t.attention.insert(t.attention.end(), layer.begin(), layer.end());
    }
    logits = decoder.step(std::vector<int>{t.id});
    t.cache_tokens = decoder.length();
    t.cache_bytes = decoder.cache().used_bytes();
    out.push_back(t);
    if (each) each(t);
  }
  return out;
}

}  // namespace attnlab
