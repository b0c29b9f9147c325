// A head's score taken apart (analysis/qk.hpp): on every family's fixture the pairs add up to
// the score, which is the score the engine's reference attention computes for that head from
// the same run (core's attend_head, another path); the marginals add up too; a rotary
// head's unrotated pairs are the dot products without the rotation. tests/python/test_qk.py
// checks each pair against NumPy.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>

#include "attnlab/analysis/qk.hpp"
#include "attnlab/core/attention.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "compare.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;

const fs::path kQkFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

ForwardResult kept_run(const Model& model, const std::vector<int>& ids) {
  return model_forward(model, ids, {.logits = LogitRows::none, .keep_attention = true, .keep_stream = true});
}

TEST(Qk, ThePairsAddUpToTheScoreTheReferenceComputesInEveryFamily) {
  const std::vector<int> ids = {1, 5, 9, 2, 5, 9, 30, 4};
  for (const char* fixture :
       {"tiny-f32", "llama-f32", "mistral-f32", "qwen2-f16", "qwen3-f32-sharded", "gemma3-f32", "smollm-bf16"}) {
    SCOPED_TRACE(fixture);
    const Model model = load_model((kQkFixtures / fixture).string());
    const ModelConfig& c = model.config;
    const ForwardResult run = kept_run(model, ids);
    for (std::size_t layer = 0; layer < c.n_layer; ++layer) {
      const HeadRef head{layer, c.n_head - 1};
      const Trace reference = attend(head_attention_input(model, run, head));
      const std::size_t query = 7, key = c.window(layer) ? 5 : 2;
      const QkDecomposition q = qk_decomposition(model, ids, run, head, query, key);
      const double scale = c.query_scale != 0 ? c.query_scale : 1.0 / std::sqrt(double(c.head_dim()));
      EXPECT_NEAR(q.score, reference.heads[0].scores(query, key) * scale, 1e-4) << "layer " << layer;
      double pairs = 0, unrotated = 0;
      for (const QkPair& p : q.pairs)
        pairs += p.score, unrotated += p.unrotated;
      EXPECT_NEAR(pairs, q.score, 2e-4 * std::max(1.0, std::abs(q.score))) << "layer " << layer;
      const auto total = [](const std::vector<QkSide>& sides) {
        return std::accumulate(sides.begin(), sides.end(), 0.0, [](double s, const QkSide& x) { return s + x.score; });
      };
      EXPECT_NEAR(total(q.query_sides), pairs, 1e-9 * std::max(1.0, std::abs(pairs)));
      EXPECT_NEAR(total(q.key_sides), pairs, 1e-9 * std::max(1.0, std::abs(pairs)));
      // (2 + L·(H + 1)) parts a side, positions for learned ones only
      const std::size_t parts = 1 + (c.rotary ? 0 : 1) + layer * (c.n_head + 1) + 1;
      EXPECT_EQ(q.query_sides.size(), parts);
      EXPECT_EQ(q.pairs.size(), parts * parts);
      EXPECT_NEAR(q.weight, run.attention[layer][((c.n_head - 1) * ids.size() + query) * ids.size() + key], 0);
      EXPECT_EQ(q.rotary, c.rotary);
      if (!c.rotary) EXPECT_NEAR(unrotated, pairs, 1e-12);
      for (std::size_t k = 1; k < q.pairs.size(); ++k)
        ASSERT_GE(std::abs(q.pairs[k - 1].score), std::abs(q.pairs[k].score)) << "largest first";
    }
  }
}

TEST(Qk, AKeyTheQueryCannotSeeIsRefusedNamingIt) {
  const Model model = load_model((kQkFixtures / "mistral-f32").string());  // a sliding window of 4 on every layer
  const std::vector<int> ids = {1, 5, 9, 2, 5, 9, 30, 4};
  const ForwardResult run = kept_run(model, ids);
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] {
                          qk_decomposition(model, ids, run, {1, 0}, 3, 5);
                        }),
                        "key: 5 is after the query 3");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] {
                          qk_decomposition(model, ids, run, {1, 0}, 7, 2);
                        }),
                        "key: 2 is outside head 1.0's sliding window of 4 keys (keys 4 to 7 for query 7)");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] {
                          qk_decomposition(model, ids, run, {1, 0}, 8, 2);
                        }),
                        "query: 8 is past the last token");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] {
                          qk_decomposition(model, ids, run, {2, 0}, 7, 6);
                        }),
                        "head 2.0 does not exist");
}

// The hand-built previous-token head (scenarios/previous-token.json): its score is position,
// not content. W_Q and W_K read only the appended (sin pω, cos pω), so the (positions,
// positions) pair is the whole score and every pair with the token's content is 0. In every
// bundled scenario and head, the pairs add up to the engine's scaled score.
TEST(Qk, TheHandBuiltPreviousTokenHeadsScoreIsPositionNotContent) {
  const Scenario s = load_scenario("previous-token");
  const QkDecomposition q = scenario_qk(s, 0, 5, 4);
  EXPECT_GT(q.weight, 0.9) << "query 5 weighs the token before it";
  EXPECT_EQ(q.pairs.front().query_side, "positions");
  EXPECT_EQ(q.pairs.front().key_side, "positions");
  EXPECT_NEAR(q.pairs.front().score, q.score, 1e-12 * std::abs(q.score));
  for (std::size_t k = 1; k < q.pairs.size(); ++k)
    EXPECT_NEAR(q.pairs[k].score, 0.0, 1e-12) << q.pairs[k].query_side << " × " << q.pairs[k].key_side;
  for (const std::string& name : bundled_scenario_names()) {
    const Scenario each = load_scenario(name);
    for (std::size_t h = 0; h < each.heads.size(); ++h) {
      const QkDecomposition d = scenario_qk(each, h, each.n() - 1, 0);
      double sum = 0;
      for (const QkPair& p : d.pairs)
        sum += p.score;
      EXPECT_NEAR(sum, d.score, 1e-9 * std::max(1.0, std::abs(d.score))) << name << " head " << h;
    }
  }
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { scenario_qk(s, 3, 5, 4); }), "head: 3 does not exist");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { scenario_qk(s, 0, 10, 4); }), "query: 10 is past the last token");
}

}  // namespace
