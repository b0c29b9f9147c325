// KV-cache eviction (analysis/eviction.hpp) and the decoder it runs on
// (model/selective_decoder.hpp). The decoder with every token kept is the full forward; a
// budget the text fits in is the full cache for every policy; q8_0 rounds as llama.cpp's
// block does. The policies' kept sets and losses against an independent NumPy
// implementation are in tests/python/test_evict.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <vector>

#include "attnlab/analysis/eviction.hpp"
#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/selective_decoder.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;

const fs::path kEvictionFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

TEST(SelectiveDecoder, EveryTokenKeptIsTheFullForwardAndItsWeights) {
  // GPT-2 (learned positions), Llama (GQA, rope), Mistral (a sliding window), Gemma 3 (local
  // and global layers), Qwen3 (QK-norm).
  for (const char* fixture : {"tiny-f32", "llama-f32", "mistral-f32", "gemma3-f32", "qwen3-f32-sharded"}) {
    SCOPED_TRACE(fixture);
    const Model model = load_model((kEvictionFixtures / fixture).string());
    const ModelConfig& c = model.config;
    const std::vector<int> ids = {1, 5, 9, 2, 5, 9, 30, 4, 11, 5, 9, 2};
    const ForwardResult full = model_forward(model, ids, {.keep_attention = true});
    SelectiveDecoder decoder(model);
    std::vector<std::size_t> kept;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      const SelectiveDecoder::Step s = decoder.step(ids[t], kept);
      const std::span<const float> expected = full.logits_at(t);
      for (std::size_t v = 0; v < c.vocab_size; ++v)
        ASSERT_NEAR(s.logits[v], expected[v], 2e-4) << "t " << t;
      for (std::size_t l = 0; l < c.n_layer; ++l)
        for (std::size_t h = 0; h < c.n_head; ++h)
          for (std::size_t j = 0; j <= t; ++j)
            ASSERT_NEAR(s.weights[(l * c.n_head + h) * (t + 1) + j],
                        full.attention[l][(h * ids.size() + t) * ids.size() + j], 1e-5)
                << "layer " << l << " head " << h << " t " << t << " key " << j;
      kept.push_back(t);
    }
    EXPECT_EQ(decoder.length(), ids.size());
  }
}

// The generating decoder's cache in each storage type against the selective decoder, which
// rounds its rows through the same store and load: every token kept, the same logits.
TEST(SelectiveDecoder, EveryTokenKeptIsTheDecoderInEachCacheType) {
  for (const char* fixture : {"llama-f32", "gemma3-f32"}) {
    const Model model = load_model((kEvictionFixtures / fixture).string());
    const std::vector<int> ids = {1, 5, 9, 2, 5, 9, 30, 4, 11, 5, 9, 2};
    for (CacheType type : {CacheType::f32, CacheType::f16, CacheType::bf16, CacheType::q8_0}) {
      SCOPED_TRACE(std::string(fixture) + " " + std::string(cache_type_name(type)));
      Decoder decoder(model, type);
      SelectiveDecoder selective(model, type);
      // Both decoders round the same keys, computed in a different order: q8_0's int8 can round
      // a value the other way at a tie (one step, max|x| / 127), which moves a logit by ~1e-3.
      const double tolerance = type == CacheType::q8_0 ? 2e-3 : 2e-4;
      Decoder exact(model);
      std::vector<std::size_t> kept;
      double from_exact = 0;  // the largest change the storage makes to a logit
      for (std::size_t t = 0; t < ids.size(); ++t) {
        const std::vector<float> logits = decoder.step(std::span(ids).subspan(t, 1)),
                                 exact_logits = exact.step(std::span(ids).subspan(t, 1));
        const SelectiveDecoder::Step s = selective.step(ids[t], kept);
        for (std::size_t v = 0; v < logits.size(); ++v) {
          ASSERT_NEAR(logits[v], s.logits[v], tolerance) << "t " << t;
          from_exact = std::max(from_exact, double(std::abs(logits[v] - exact_logits[v])));
        }
        kept.push_back(t);
      }
      // The storage is really used: it moves the logits by more than the two decoders differ
      // (measured: f16 5e-4 to 3e-3, bf16 6e-3 to 3e-2, q8_0 3e-2 to 8e-2).
      if (type != CacheType::f32) EXPECT_GT(from_exact, tolerance);
      EXPECT_EQ(decoder.cache().used_bytes(), ids.size() * cache_token_bytes(model.config, type));
    }
  }
}

TEST(SelectiveDecoder, ATrialStepLeavesTheCacheAsItWas) {
  const Model model = load_model((kEvictionFixtures / "llama-f32").string());
  SelectiveDecoder a(model), b(model);
  const std::vector<std::size_t> none, first = {0};
  a.step(3, none);
  b.step(3, none);
  a.step(7, none, false);  // a trial that sees nothing but itself
  const std::vector<float> after_trial = a.step(7, first).logits, plain = b.step(7, first).logits;
  EXPECT_EQ(after_trial, plain);
  EXPECT_EQ(a.length(), 2u);
}

TEST(SelectiveDecoder, KeptPositionsMustAscendBelowTheStep) {
  const Model model = load_model((kEvictionFixtures / "tiny-f32").string());
  SelectiveDecoder d(model);
  d.step(1, {});
  const std::vector<std::size_t> ahead = {1};
  EXPECT_THROW(d.step(2, ahead), InputError);
}

TEST(CacheTypes, Q8_0RoundsAsLlamaCppsBlock) {
  // 40 values: a block of 32 (largest |x| 3.1 -> d = 3.1/127) and a short block of 8.
  std::vector<float> row(40);
  for (std::size_t i = 0; i < row.size(); ++i)
    row[i] = std::sin(float(i)) * (i == 7 ? 3.1f : 1.0f);
  std::vector<float> rounded = row;
  round_cache_row(CacheType::q8_0, rounded);
  for (std::size_t first : {std::size_t(0), std::size_t(32)}) {
    const std::size_t end = std::min<std::size_t>(first + 32, row.size());
    float largest = 0;
    for (std::size_t i = first; i < end; ++i)
      largest = std::max(largest, std::abs(row[i]));
    const float d = largest / 127, stored = f16_to_f32(f32_to_f16(d));
    for (std::size_t i = first; i < end; ++i) {
      const float q = std::round(row[i] / d);
      EXPECT_LE(std::abs(q), 127.0f);
      EXPECT_EQ(rounded[i], q * stored) << i;
      EXPECT_NEAR(rounded[i], row[i], 0.51 * largest / 127 + 1e-3 * largest) << i;
    }
  }
  EXPECT_EQ(cache_row_bytes(CacheType::q8_0, 64), 68u);
  EXPECT_EQ(cache_row_bytes(CacheType::q8_0, 40), 68u);
  EXPECT_EQ(cache_row_bytes(CacheType::f16, 64), 128u);
  EXPECT_THROW(parse_cache_type("q4_1", "cache"), InputError);
}

TEST(Eviction, ABudgetTheTextFitsInIsTheFullCacheForEveryPolicy) {
  const Model model = load_model((kEvictionFixtures / "llama-f32").string());
  const std::vector<std::vector<int>> texts = {{1, 7, 19, 4, 7, 19, 33, 2, 11}, {2, 9, 14, 30, 9, 14}};
  EvictionOptions o;
  o.budgets = {9, 50};
  const EvictionResult r = evict(model, texts, o);
  EXPECT_EQ(r.predicted, 8u + 5u);
  // The reference is the forward's own loss.
  double loss = 0;
  for (const std::vector<int>& ids : texts)
    loss += next_token_loss(model_forward(model, ids), ids, 0, ids.size() - 1) * double(ids.size() - 1);
  EXPECT_NEAR(r.full.loss, loss / double(r.predicted), 1e-5);
  ASSERT_EQ(r.results.size(), 1u + 5u * 2u);
  for (const EvictionMeasure& m : r.results) {
    SCOPED_TRACE(std::string(policy_name(m.policy)) + " at " + std::to_string(m.budget));
    EXPECT_NEAR(m.loss, r.full.loss, 1e-9);
    EXPECT_EQ(m.agreement, 1.0);
    EXPECT_EQ(m.evictions, 0u);
    EXPECT_EQ(m.kept_bytes, 9 * cache_token_bytes(model.config, CacheType::f32));
  }
}

TEST(Eviction, EachPolicyHoldsTheCacheToItsBudget) {
  const Model model = load_model((kEvictionFixtures / "tiny-f32").string());
  const std::vector<std::vector<int>> texts = {{3, 17, 5, 3, 17, 29, 8, 3, 17, 5, 3, 17, 29, 8}};
  EvictionOptions o;
  o.budgets = {1, 4};
  o.policies = {EvictionPolicy::window, EvictionPolicy::sinks, EvictionPolicy::h2o, EvictionPolicy::random,
                EvictionPolicy::effect};
  o.list_kept = true;
  double steps = 0;
  const EvictionResult r = evict(model, texts, o, [&](double done, double total) {
    EXPECT_EQ(total, eviction_steps(texts, o));
    steps = done;
  });
  EXPECT_EQ(steps, eviction_steps(texts, o));
  for (const EvictionMeasure& m : r.results) {
    SCOPED_TRACE(std::string(policy_name(m.policy)) + " at " + std::to_string(m.budget));
    ASSERT_EQ(m.kept.size(), 1u);
    EXPECT_EQ(m.kept[0].size(), m.budget);                         // 13 steps, far more than the budget
    EXPECT_EQ(m.kept[0].back(), 12u);                              // the last step's own token
    EXPECT_EQ(m.evictions, 13 - m.budget);                         // a token each step once full
    if (m.budget == 1) EXPECT_EQ(m.loss, r.results.front().loss);  // every policy: each token alone
  }
  EXPECT_EQ(r.results[1].kept[0], (std::vector<std::size_t>{9, 10, 11, 12}));  // the window
  EXPECT_EQ(r.results[3].kept[0], (std::vector<std::size_t>{0, 1, 2, 12}));    // sinks: 3 of 4 sinks fit
}

TEST(Eviction, BadInputIsRefusedByName) {
  const Model model = load_model((kEvictionFixtures / "tiny-f32").string());
  EvictionOptions o;
  const std::vector<std::vector<int>> one_token = {{3}};
  EXPECT_THROW(evict(model, one_token, o), InputError);
  o.budgets = {0};
  const std::vector<std::vector<int>> text = {{3, 4}};
  EXPECT_THROW(evict(model, text, o), InputError);
  EXPECT_THROW(parse_policy("lru", "policy"), InputError);
}

}  // namespace
