// Direct logit attribution and the logit lens against an independent NumPy implementation
// (tests/model/make_attribution_fixtures.py: its own safetensors reader and forward, float64)
// on the tiny GPT-2 (LayerNorm, learned positions, biases), Llama (RMSNorm, rotary,
// grouped-query, Llama 3 scaling) and Gemma 3 (sandwich norms, windows) fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/model.hpp"
#include "compare.hpp"
#include "model_fixtures.hpp"

using namespace attnlab;
using nlohmann::json;

namespace attribution_test {

const std::filesystem::path kFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

// f32 through two or three blocks against float64: logits agree to ~1e-5 (the family tests' bound is 2e-4).
constexpr double kLogit = 2e-4;

class AttributionMatchesNumPy : public ::testing::TestWithParam<const char*> {};

TEST_P(AttributionMatchesNumPy, EveryPartHeadAndSourceAndTheyAddUpToTheLogit) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  for (const json& want : expected["cases"]) {
    LogitTarget target;
    if (!want["contrast"].is_null()) target.contrast = want["contrast"];
    const LogitAttribution got = attribute_logit(model, ids, target);
    SCOPED_TRACE(want["contrast"].dump());
    EXPECT_EQ(got.position, expected["position"].get<std::size_t>());
    EXPECT_EQ(got.target, expected["target"].get<int>()) << "the model's top prediction";
    EXPECT_NEAR(got.logit, want["logit"].get<double>(), kLogit);
    // The parts, in stream order, with the final norm's bias apart.
    const json& parts = want["parts"];
    std::vector<json> numpy_parts;
    double numpy_bias = 0;
    for (const json& p : parts)
      if (p["kind"] == "final_bias")
        numpy_bias = p["logit"];
      else
        numpy_parts.push_back(p);
    ASSERT_EQ(got.parts.size(), numpy_parts.size());
    double sum = got.final_bias, largest = 0;
    for (std::size_t i = 0; i < got.parts.size(); ++i) {
      const PartContribution& p = got.parts[i];
      EXPECT_EQ(part_kind_name(p.kind), numpy_parts[i]["kind"].get<std::string>()) << i;
      if (!numpy_parts[i]["layer"].is_null()) EXPECT_EQ(p.layer, numpy_parts[i]["layer"].get<std::size_t>()) << i;
      if (!numpy_parts[i]["head"].is_null()) EXPECT_EQ(p.head, numpy_parts[i]["head"].get<std::size_t>()) << i;
      EXPECT_NEAR(p.logit, numpy_parts[i]["logit"].get<double>(), kLogit) << i;
      sum += p.logit;
      largest = std::max(largest, std::abs(p.logit));
    }
    EXPECT_NEAR(got.final_bias, numpy_bias, kLogit);
    EXPECT_NEAR(sum, got.logit, 1e-4 * std::max(1.0, largest)) << "the parts add up to the model's own logit";
    EXPECT_TRUE(test::all_close(got.heads, test::flat(want["heads"]), {kLogit, 0})) << "heads";
    // Per source: NumPy writes [L·H][n] rows; every row adds up to its head.
    EXPECT_TRUE(test::all_close(got.sources, test::flat(want["sources"]), {kLogit, 0})) << "sources";
    for (std::size_t h = 0; h < got.heads.size(); ++h) {
      double row = 0;
      for (std::size_t j = 0; j < got.n; ++j)
        row += got.sources[h * got.n + j];
      EXPECT_NEAR(row, got.heads[h], 1e-5) << "head " << h << ": its sources add up to it";
    }
  }
}

TEST_P(AttributionMatchesNumPy, TheLensGivesEachLayersTopTokenAndTheTargetsRank) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  const LogitLens lens = logit_lens(model, ids);
  EXPECT_EQ(lens.target, expected["target"].get<int>());
  ASSERT_EQ(lens.rows, model.config.n_layer + 1);
  ASSERT_EQ(lens.n, ids.size());
  const json& rows = expected["lens"];
  for (std::size_t r = 0; r < lens.rows; ++r)
    for (std::size_t i = 0; i < lens.n; ++i) {
      const LensCell& got = lens.cells[r * lens.n + i];
      const json& want = rows[r][i];
      SCOPED_TRACE(testing::Message() << "row " << r << ", position " << i);
      EXPECT_NEAR(got.top_probability, want["top_probability"].get<double>(), 1e-5);
      EXPECT_NEAR(got.target_probability, want["target_probability"].get<double>(), 1e-5);
      EXPECT_EQ(got.top, want["top"].get<int>());
      EXPECT_EQ(got.target_rank, want["target_rank"].get<std::size_t>());
    }
  // The last row is the model's own prediction.
  const ForwardResult run = model_forward(model, ids);
  const std::size_t V = model.config.vocab_size, last = lens.rows - 1;
  for (std::size_t i = 0; i < lens.n; ++i) {
    const auto row = run.logits.begin() + static_cast<std::ptrdiff_t>(i * V);
    EXPECT_EQ(lens.cells[last * lens.n + i].top, std::max_element(row, row + static_cast<std::ptrdiff_t>(V)) - row);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, AttributionMatchesNumPy, ::testing::Values("tiny-f32", "llama-f32", "gemma3-f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Attribution, BadTargetsAreRefusedByName) {
  const Model model = load_model((kFixtures / "tiny-f32").string());
  const std::vector<int> ids = {3, 17, 5};
  EXPECT_THROW((void)attribute_logit(model, ids, {.position = 3}), InputError);
  try {
    (void)attribute_logit(model, ids, {.position = std::nullopt, .target = 40});
    ADD_FAILURE() << "target 40 is outside a 40-token vocabulary";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "target");
  }
  try {
    (void)attribute_logit(model, ids, {.position = std::nullopt, .target = 1, .contrast = -2 + 50});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "contrast");
  }
  try {
    (void)logit_lens(model, ids, 41);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "target");
  }
}

// Patching's two anchors, on every family: a site that gives the corrupted run the clean
// input where the texts differ restores 100%, one that copies what the runs already share 0%.
TEST_P(AttributionMatchesNumPy, PatchingRestoresAllWhereTheTextsDifferAndNothingWhereTheyAgree) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> clean = expected["ids"];
  std::vector<int> corrupt = clean;
  const std::size_t changed = 2, n = clean.size();
  corrupt[changed] = (clean[changed] + 5) % static_cast<int>(model.config.vocab_size);
  const ResidualPatching p = patch_residual(model, clean, corrupt);
  ASSERT_EQ(p.rows, model.config.n_layer + 1);
  ASSERT_EQ(p.restored.size(), p.rows * n);
  EXPECT_EQ(p.target, expected["target"].get<int>()) << "the clean run's top prediction";
  EXPECT_NE(p.contrast, p.target);
  const ForwardResult a = model_forward(model, clean), b = model_forward(model, corrupt);
  const std::size_t V = model.config.vocab_size;
  const auto metric = [&](const ForwardResult& r) {
    return double(r.logits[(n - 1) * V + p.target]) - double(r.logits[(n - 1) * V + p.contrast]);
  };
  EXPECT_NEAR(p.clean, metric(a), 1e-5);
  EXPECT_NEAR(p.corrupt, metric(b), 1e-5);
  for (std::size_t i = 0; i < n; ++i) {
    // Entering block 0 the positions are unmixed: only the changed one carries the difference.
    EXPECT_NEAR(p.restored[i], i == changed ? 1.0 : 0.0, 1e-4) << "row 0, position " << i;
    // After the last block only the last position's row reaches the metric.
    EXPECT_NEAR(p.restored[(p.rows - 1) * n + i], i == n - 1 ? 1.0 : 0.0, 1e-4) << "last row, position " << i;
    // Before the changed token, the clean and corrupted streams are the same at every depth (causal).
    if (i < changed)
      for (std::size_t row = 0; row < p.rows; ++row)
        EXPECT_NEAR(p.restored[row * n + i], 0.0, 1e-4) << row << ", " << i;
  }
}

TEST(Attribution, PatchingTextsOfDifferentLengthsOrTheSameMetricIsRefused) {
  const Model model = load_model((kFixtures / "tiny-f32").string());
  const std::vector<int> a = {3, 17, 5}, b = {3, 17};
  try {
    (void)patch_residual(model, a, b);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "corrupt");
    EXPECT_NE(std::string(e.what()).find("texts of the same length"), std::string::npos) << e.what();
  }
  try {
    (void)patch_residual(model, a, a);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing for a site to restore"), std::string::npos) << e.what();
  }
}

}  // namespace attribution_test
