// The text explain writes: number formatting, the worked query, masks, cut grids, and
// the permutation report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnlab/report/explain.hpp"
#include "attnlab/scenario/scenario.hpp"

using namespace attnlab;

#define EXPECT_CONTAINS(text, expected) \
  EXPECT_NE((text).find(expected), std::string::npos) << "missing \"" << (expected) << "\" in:\n" << (text)

TEST(FormatNumber, WholeNumbersPlainOthersRoundedNeverMinusZero) {
  EXPECT_EQ(format_number(4.0, 2), "4");
  EXPECT_EQ(format_number(-1.0, 3), "-1");
  EXPECT_EQ(format_number(2.1213203, 2), "2.12");
  EXPECT_EQ(format_number(0.5, 3), "0.500");
  EXPECT_EQ(format_number(-0.0001, 2), "0.00");
  EXPECT_EQ(format_number(-0.0, 2), "0");
  EXPECT_EQ(format_number(-1.0 / 0.0, 2), "-inf");
}

TEST(Explain, PreviousTokenQueryFourPeaksOnTokenThree) {
  Scenario s = load_scenario("previous-token");
  const std::string text = explain(s, run_scenario(s), {0, 4, 2});
  EXPECT_CONTAINS(text, "Query 4 \"jumps\", worked in full");
  EXPECT_CONTAINS(text, "largest weight: key 3 \"fox\"");
  EXPECT_CONTAINS(text, "rotates the position pair by −ω");
  EXPECT_CONTAINS(text, "positions sincos-pair (ω = 0.5)");
}

TEST(Explain, MaskedKeysShowAsMinusInfinityAndZeroWeight) {
  Scenario s = load_scenario("three-tokens");
  apply_overrides(s, {.causal = true});
  const std::string text = explain(s, run_scenario(s), {0, 0, 2});
  EXPECT_CONTAINS(text, "mask: causal");
  EXPECT_CONTAINS(text, "masked: -inf");
  EXPECT_CONTAINS(text, "0 (masked)");
  EXPECT_CONTAINS(text, "2.03 / 2.03 = 1");  // query 0 sees only itself: weight 1
}

TEST(Explain, FullyMaskedQuerySaysSoInsteadOfDividingByZero) {
  Scenario s = load_scenario("three-tokens");
  apply_overrides(s, {.causal = true, .mask_tokens = {0}});
  const std::string text = explain(s, run_scenario(s), {0, 0, 2});
  EXPECT_CONTAINS(text, "every key is hidden from this query");
  EXPECT_EQ(text.find("nan"), std::string::npos);
}

TEST(Explain, LargeGridsAreCutWithANote) {
  nlohmann::json doc = nlohmann::json::parse(std::string(bundled_scenarios()[0].text));
  doc["tokens"] = std::vector<std::string>(40, "w");
  doc["embeddings"] = std::vector<std::vector<double>>(40, {1.0, 0.5});
  const Scenario s = scenario_from_json(doc);
  const std::string text = explain(s, run_scenario(s), {});
  EXPECT_CONTAINS(text, "showing 24 of 40 rows and 12 of 40 columns");
  EXPECT_CONTAINS(text, "(40 terms in all)");
}

TEST(ExplainPermutation, WithoutPositionsSaysOnlyTheRowMoved) {
  const Scenario s = load_scenario("three-tokens");
  const std::vector<std::size_t> order{2, 0, 1};
  const std::string text = explain_permutation(s, order, 2);
  EXPECT_CONTAINS(text, "row 2: 0.69 0.93");  // t3 before
  EXPECT_CONTAINS(text, "row 0: 0.69 0.93");  // t3 after, same numbers, new row
  EXPECT_CONTAINS(text, "Every token's output is unchanged; only its row moved.");
}

TEST(ExplainPermutation, WithPositionsSaysTheOutputsChanged) {
  const Scenario s = load_scenario("previous-token");
  std::vector<std::size_t> order(s.n());
  for (std::size_t k = 0; k < order.size(); ++k)
    order[k] = (k + 1) % order.size();
  const std::string text = explain_permutation(s, order, 2);
  EXPECT_CONTAINS(text, "Outputs changed");
  EXPECT_CONTAINS(text, "with sincos-pair (ω = 0.5) positions");
}
