// Every head's rows in brief (ForwardOptions::sparse_top, forward.hpp's SparseAttention): the
// keys a row weighs most, its sink weight and its entropy, equal to what the dense weights of
// the same forward give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/model.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;

const fs::path kSparseFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

TEST(SparseRows, AreTheDenseRowsTopKeysSinkAndEntropy) {
  // GPT-2, Llama (GQA), Mistral and Gemma 3 (sliding windows of 4: a late query does not see the sink).
  for (const char* fixture : {"tiny-f32", "llama-f32", "mistral-f32", "gemma3-f32"}) {
    SCOPED_TRACE(fixture);
    const Model model = load_model((kSparseFixtures / fixture).string());
    const ModelConfig& c = model.config;
    const std::vector<int> ids = {1, 5, 9, 2, 5, 9, 30, 4, 11, 5, 9, 2};
    const std::size_t n = ids.size(), top = 3;
    const ForwardResult dense = model_forward(model, ids, {.keep_attention = true});
    const ForwardResult sparse = model_forward(model, ids, {.logits = LogitRows::last, .sparse_top = top});
    const ForwardResult both = model_forward(model, ids, {.keep_attention = true, .sparse_top = top});
    ASSERT_EQ(sparse.sparse.keys.size(), c.n_layer);
    EXPECT_TRUE(sparse.attention.empty()) << "no n × n weights kept";
    EXPECT_EQ(both.sparse.keys, sparse.sparse.keys) << "the same rows through the tiled kernel and the reference";
    for (std::size_t l = 0; l < c.n_layer; ++l)
      for (std::size_t h = 0; h < c.n_head; ++h)
        for (std::size_t i = 0; i < n; ++i) {
          const float* row = dense.attention[l].data() + (h * n + i) * n;
          std::vector<std::size_t> order(i + 1);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
          const std::size_t seen = std::size_t(std::count_if(row, row + i + 1, [](float w) { return w > 0; }));
          for (std::size_t k = 0; k < top; ++k) {
            const std::uint32_t key = sparse.sparse.keys[l][(h * n + i) * top + k];
            const float weight = sparse.sparse.weights[l][(h * n + i) * top + k];
            if (k >= seen) {
              EXPECT_EQ(key, SparseAttention::none);
              EXPECT_EQ(weight, 0.0f);
              continue;
            }
            ASSERT_NEAR(weight, row[order[k]], 1e-5) << l << "." << h << " query " << i << " rank " << k;
            ASSERT_NEAR(row[key], row[order[k]], 1e-5) << "a key of the k-th largest weight (ties either way)";
          }
          double entropy = 0;
          for (std::size_t j = 0; j <= i; ++j)
            if (row[j] > 0) entropy -= row[j] * std::log2(double(row[j]));
          EXPECT_NEAR(sparse.sparse.sink[l][h * n + i], row[0], 1e-5);
          EXPECT_NEAR(sparse.sparse.entropy[l][h * n + i], entropy, 1e-4);
        }
  }
}

}  // namespace

namespace {

TEST(SparseRows, ArePricedBeforeTheRun) {
  const attnlab::ModelDir dir = attnlab::open_model_dir((kSparseFixtures / "tiny-f32").string());
  attnlab::RunRequest request;
  request.text.ids = std::vector<int>{1, 2, 3, 4};
  request.sparse = 3;
  // 2 layers × 4 heads × 4 tokens × (2 × 3 + 2) = 256 numbers.
  EXPECT_NO_THROW(attnlab::price_run(dir, request, 256));
  try {
    attnlab::price_run(dir, request, 255);
    ADD_FAILURE() << "sparse rows over the limit were not refused";
  } catch (const attnlab::InputError& e) {
    EXPECT_EQ(e.field(), "sparse");
    EXPECT_NE(std::string(e.what()).find("use fewer keys a row"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// The head detectors from the same pass over each row's scores equal score_heads on the dense
// weights (detectors.hpp), on texts with repeats and windows (Mistral and Gemma 3 late queries
// see no sink and their earliest copies fall outside the window), and a text without repeats
// has no duplicate-token or induction rows (NaN).
TEST(SparseRows, DetectorsAreScoreHeadsOnTheDenseWeights) {
  for (const char* fixture : {"tiny-f32", "llama-f32", "mistral-f32", "gemma3-f32", "qwen3-f32-sharded"}) {
    const Model model = load_model((kSparseFixtures / fixture).string());
    const ModelConfig& c = model.config;
    for (const std::vector<int>& ids :
         {std::vector<int>{1, 5, 9, 2, 5, 9, 30, 4, 11, 5, 9, 2}, std::vector<int>{1, 2, 3, 4}}) {
      SCOPED_TRACE(std::string(fixture) + " n " + std::to_string(ids.size()));
      const std::vector<HeadScores> dense = score_heads(model_forward(model, ids, {.keep_attention = true}), ids);
      const ForwardResult sparse = model_forward(model, ids, {.logits = LogitRows::none, .sparse_top = 1});
      for (std::size_t l = 0; l < c.n_layer; ++l)
        for (std::size_t h = 0; h < c.n_head; ++h) {
          const HeadScores& d = dense[l * c.n_head + h];
          const double* s = sparse.sparse.detectors[l].data() + h * 4;
          const double expected[] = {d.previous_token, d.duplicate_token, d.induction, d.sink};
          for (std::size_t k = 0; k < 4; ++k) {
            if (std::isnan(expected[k])) {
              EXPECT_TRUE(std::isnan(s[k])) << "layer " << l << " head " << h << " detector " << k;
              continue;
            }
            EXPECT_NEAR(s[k], expected[k], 1e-6) << "layer " << l << " head " << h << " detector " << k;
          }
        }
    }
  }
}

}  // namespace
