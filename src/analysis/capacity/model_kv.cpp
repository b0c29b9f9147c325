// A loaded model's KV cache, measured (attnlab/analysis/model_kv.hpp).
#include "attnlab/analysis/model_kv.hpp"

#include <fmt/format.h>

#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/analysis/memory.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/selective_decoder.hpp"

namespace attnlab {

std::vector<ModelKvPoint> measure_model_kv(const Model& model, std::span<const std::uint64_t> contexts, CacheType type,
                                           std::uint64_t seed) {
  const ModelConfig& c = model.config;
  constexpr std::size_t kMaxContexts = 16;
  if (contexts.empty() || contexts.size() > kMaxContexts)
    fail("context", fmt::format("give 1 to {} context lengths, e.g. 16,64,256", kMaxContexts));
  const std::uint64_t per_token = cache_token_bytes(c, type);
  for (std::uint64_t tokens : contexts) {
    if (tokens < 1 || tokens > c.n_positions)
      fail("context",
           fmt::format("{} tokens: the model has {} positions; give 1 to {}", tokens, c.n_positions, c.n_positions));
    // The cache, and the prompt's activations while it runs: a batch's rows (the decoder takes
    // a prompt kPrefillBatch tokens at a time) and the last token's logits.
    const std::uint64_t activations = decoder_buffer_bytes(c, tokens);
    require_available_memory(per_token * tokens + activations, "context",
                             fmt::format("a KV cache of {} tokens", tokens), "use a shorter context");
  }
  std::vector<ModelKvPoint> out;
  SplitMix64 rng(seed);
  for (std::uint64_t tokens : contexts) {
    std::vector<int> ids(tokens);
    for (int& id : ids)
      id = static_cast<int>(rng.next() % c.vocab_size);
    // The resident memory the cache alone holds: the same prompt run once first and freed, so
    // that everything else the run touches stays resident before the measure as after it (the
    // weights' pages, the threads, OpenBLAS's buffers, the heap's high-water mark), then the
    // resident bytes with the cache alive, its activations freed, above that.
    { Decoder(model, type).step(ids); }
    release_free_heap();
    const std::size_t before = memory::resident_bytes();
    Decoder decoder(model, type);
    decoder.step(ids);  // the prompt, all at once: every layer's keys and values join the cache
    release_free_heap();
    const std::size_t after = memory::resident_bytes();
    ModelKvPoint p;
    p.tokens = tokens;
    p.formula_bytes = per_token * tokens;
    p.used_bytes = decoder.cache().used_bytes();
    p.reserved_bytes = decoder.cache().bytes();
    p.resident_bytes = before && after > before ? after - before : 0;
    out.push_back(p);
  }
  return out;
}

}  // namespace attnlab
