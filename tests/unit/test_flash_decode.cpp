// Split-K decoding against the reference decode (decode_attention), reading the same cache,
// so the only differences are f32 rounding and the polynomial 2^x:
// |fast - reference| <= 2e-5 + 2e-4·|reference|.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <span>
#include <vector>

#include "attnlab/core/decode.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_decode.hpp"
#include "compare.hpp"
#include "runnable_isas.hpp"

using namespace attnlab;

namespace {

KVCache random_cache(std::size_t kv_heads, std::size_t d, std::size_t m, CacheType type, std::uint64_t seed) {
  KVCache cache(1, kv_heads, d, type);
  SplitMix64 rng(seed);
  std::vector<float> k(kv_heads * d), v(kv_heads * d);
  for (std::size_t t = 0; t < m; ++t) {
    for (float& x : k)
      x = static_cast<float>(rng.normal());
    for (float& x : v)
      x = static_cast<float>(rng.normal());
    cache.append(0, k, v);
  }
  return cache;
}

}  // namespace

TEST(FlashDecode, MatchesTheReferenceDecodeOverShapesStorageTypesChunksThreadsAndInstructionSets) {
  const std::pair<std::size_t, std::size_t> groups[] = {{1, 1}, {4, 1}, {8, 2}, {32, 8}};
  const CacheType types[] = {CacheType::f32, CacheType::f16, CacheType::bf16, CacheType::q8_0};
  const std::size_t chunks[] = {64, 100, 1024};
  const std::vector<Isa> isas = test::runnable_isas();
  std::size_t counter = 0;
  for (std::size_t m : {1, 3, 75, 1000, 3000})
    for (std::size_t d : {8, 72, 128}) {
      const auto [heads, kv_heads] = groups[counter % 4];
      const CacheType type = types[(counter / 2) % 4];
      const std::size_t n_new = std::min<std::size_t>(m, counter % 3 == 0 ? 1 : counter % 3 == 1 ? 3 : 8);
      DecodeOptions options;
      options.chunk = chunks[counter % 3];
      options.threads = 1 + counter % 2;
      options.isa = isas[counter % isas.size()];
      SCOPED_TRACE(fmt::format("H={} H_kv={} d={} m={} n_new={} cache={} chunk={} threads={} isa={}", heads, kv_heads,
                               d, m, n_new, cache_type_name(type), options.chunk, options.threads,
                               to_string(*options.isa)));
      ++counter;
      const KVCache cache = random_cache(kv_heads, d, m, type, m + d);
      SplitMix64 rng(counter);
      std::vector<float> q(n_new * heads * d);
      for (float& x : q)
        x = static_cast<float>(rng.normal());
      std::vector<float> fast(q.size()), slow(q.size());
      flash_decode(cache, 0, heads, q, n_new, fast, options);
      decode_attention(cache, 0, heads, q, n_new, slow);
      EXPECT_TRUE(test::all_close(fast, slow, {2e-5, 2e-4}));
    }
}

// A decode shape: query heads, KV heads, new tokens, cached tokens, head width, chunk.
namespace {

struct DecodeCase {
  std::size_t heads, kv_heads, n_new, m, d, chunk;
};

// Each case on every storage type (q8_0 read back to f32 before the kernel) and every instruction set this CPU runs,
// threads alternating 1 and 2, queries drawn with twice the usual spread (sharper weights: the running max moves more),
// against the reference decode. `seed` keeps each test's draws its own.
void expect_matches_reference(std::span<const DecodeCase> cases, std::size_t seed) {
  const std::vector<Isa> isas = test::runnable_isas();
  std::size_t counter = 0;
  for (const DecodeCase& c : cases)
    for (CacheType type : {CacheType::f32, CacheType::f16, CacheType::bf16, CacheType::q8_0})
      for (Isa isa : isas) {
        DecodeOptions options;
        options.chunk = c.chunk;
        options.threads = 1 + counter % 2;
        options.isa = isa;
        SCOPED_TRACE(fmt::format("H={} H_kv={} n_new={} m={} d={} chunk={} cache={} isa={}", c.heads, c.kv_heads,
                                 c.n_new, c.m, c.d, c.chunk, cache_type_name(type), to_string(isa)));
        const KVCache cache = random_cache(c.kv_heads, c.d, c.m, type, ++counter + seed);
        SplitMix64 rng(counter + seed + 1000);
        std::vector<float> q(c.n_new * c.heads * c.d);
        for (float& x : q)
          x = static_cast<float>(2.0 * rng.normal());
        std::vector<float> fast(q.size()), slow(q.size());
        flash_decode(cache, 0, c.heads, q, c.n_new, fast, options);
        decode_attention(cache, 0, c.heads, q, c.n_new, slow);
        EXPECT_TRUE(test::all_close(fast, slow, {2e-5, 2e-4}));
      }
}

}  // namespace

// The decode loop works on 16 cached rows at a time, scores up to four keys and mixes up to
// four queries together, and has a separate path for head widths that are not whole
// vectors of 16: cache lengths and chunks around those edges, every remainder of queries
// (1 to 9 queries per KV head, from several new tokens too), and widths with and without a
// tail, on every dtype and instruction set.
TEST(FlashDecode, BlockEdgesQueryRemaindersAndWidthTailsOnEveryDtypeAndInstructionSet) {
  const DecodeCase cases[] = {{1, 1, 1, 1, 16, 64},   {3, 1, 1, 15, 20, 64},  {5, 1, 1, 17, 128, 16},
                              {2, 2, 3, 33, 8, 48},   {9, 1, 1, 47, 136, 32}, {6, 2, 3, 64, 72, 1024},
                              {4, 4, 2, 100, 64, 17}, {8, 1, 4, 129, 96, 64}, {7, 7, 1, 1025, 40, 1000}};
  expect_matches_reference(cases, 0);
}

// From 16 queries per KV head on, AVX-512 scores and mixes with the queries in the vector
// lanes (decode_run_lanes): whole and partial groups of 16 (16, 17, 31, 32, 40 queries),
// new tokens whose last visible key falls inside a block or before a run (chunks of 1, 5
// and 16 rows put some runs wholly after some queries' last key), widths with and without a
// tail, every dtype, against the reference. Below 16 queries, and on the other instruction
// sets, the same cases go through the key-major loop.
TEST(FlashDecode, QueriesInLanesWholeAndPartialGroupsCausalEdgesAndTails) {
  const DecodeCase cases[] = {{16, 1, 1, 37, 128, 1024}, {16, 2, 2, 50, 72, 16},  {17, 1, 1, 33, 20, 5},
                              {31, 1, 1, 16, 8, 1},      {8, 1, 4, 129, 128, 64}, {8, 1, 5, 21, 136, 5},
                              {10, 1, 4, 300, 64, 100},  {32, 8, 4, 48, 96, 16}};
  expect_matches_reference(cases, 500);
}

// Many new tokens at once (a prompt through the cache) go in blocks whose partial states stay
// within DecodeOptions::partial_bytes, here 40,000: with chunks of 16 keys, 8 heads of 16
// sharing one KV head, each token's states over 200 cached keys take 13 chunks × 8 queries ×
// (16 + 2) floats, 7,488 bytes, so 100 new tokens go in 20 blocks of 5, each reading the keys
// up to its last token only, and a whole prompt of 203 tokens in 40 blocks of 5 and one of 3,
// the first from position 0. Against the reference, which takes them all at once.
TEST(FlashDecode, AManyTokenStepGoesInBlocksOfBoundedPartialStates) {
  const std::vector<Isa> isas = test::runnable_isas();
  for (const std::size_t n_new : {100, 203})
    for (CacheType type : {CacheType::f32, CacheType::q8_0})
      for (Isa isa : isas) {
        SCOPED_TRACE(fmt::format("n_new={} cache={} isa={}", n_new, cache_type_name(type), to_string(isa)));
        DecodeOptions options;
        options.chunk = 16;
        options.partial_bytes = 40'000;
        options.isa = isa;
        const KVCache cache = random_cache(1, 16, n_new == 100 ? 200 : 203, type, n_new);
        SplitMix64 rng(n_new + 1);
        std::vector<float> q(n_new * 8 * 16);
        for (float& x : q)
          x = static_cast<float>(2.0 * rng.normal());
        std::vector<float> fast(q.size()), slow(q.size());
        flash_decode(cache, 0, 8, q, n_new, fast, options);
        decode_attention(cache, 0, 8, q, n_new, slow);
        EXPECT_TRUE(test::all_close(fast, slow, {2e-5, 2e-4}));
      }
}
