// The KV cache of a loaded model, measured: a seeded prompt of each context length run
// through the model's decoder, and the cache it leaves weighed three ways, beside the
// formula every KV estimate uses,
//
//   bytes = layers × 2 × H_kv × tokens × row bytes   (a row: head_dim × bytes per number;
//                                                      q8_0: ⌈head_dim / 32⌉ blocks of 34 bytes)
//
// (keys and values, per layer, per KV head: grouped-query attention divides it by H / H_kv).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attnlab/core/kv_cache.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

struct ModelKvPoint {
  std::size_t tokens = 0;
  std::uint64_t formula_bytes = 0;   // the formula above
  std::uint64_t used_bytes = 0;      // what the cache's tokens occupy (KVCache::used_bytes)
  std::uint64_t reserved_bytes = 0;  // what the cache's arrays were allocated (KVCache::bytes)
  std::uint64_t resident_bytes = 0;  // the process's resident memory while the cache lives, above before (0: unknown)
};

// The cache at each context (each 1 to the model's positions; at most 16 of them), in the
// order given. InputError naming "context" for a context the model cannot hold or memory the
// machine does not have (checked before any run).
std::vector<ModelKvPoint> measure_model_kv(const Model& model, std::span<const std::uint64_t> contexts, CacheType type,
                                           std::uint64_t seed = 0);

}  // namespace attnlab
