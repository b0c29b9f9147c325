// The worked examples of docs/worked-example.md, computed by the engine and checked to the
// digits the page prints: three-tokens at 2 decimals, softmax-row at 3 decimals.
#include <gtest/gtest.h>

#include "attnlab/report/explain.hpp"
#include "attnlab/scenario/scenario.hpp"

using namespace attnlab;

namespace {
std::string row_text(const Matrix& m, std::size_t i, int precision) { return format_vector(m.row(i), precision); }
}  // namespace

TEST(WorkedExampleThreeTokens, ProjectionTableMatchesTheDocs) {
  const Trace trace = run_scenario(load_scenario("three-tokens"));
  const HeadTrace& h = trace.heads[0];
  const char* queries[] = {"1 0", "1 1", "2 1"};
  const char* keys[] = {"1 1", "0 1", "1 2"};
  const char* values[] = {"0 1", "1 0", "1 1"};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(row_text(h.queries, i, 2), queries[i]) << "query " << i;
    EXPECT_EQ(row_text(h.keys, i, 2), keys[i]) << "key " << i;
    EXPECT_EQ(row_text(h.values, i, 2), values[i]) << "value " << i;
  }
}

TEST(WorkedExampleThreeTokens, ScoreGridIsOneZeroOneTwoOneThreeThreeOneFour) {
  const HeadTrace h = run_scenario(load_scenario("three-tokens")).heads[0];
  EXPECT_EQ(row_text(h.scores, 0, 2), "1 0 1");
  EXPECT_EQ(row_text(h.scores, 1, 2), "2 1 3");
  EXPECT_EQ(row_text(h.scores, 2, 2), "3 1 4");
}

TEST(WorkedExampleThreeTokens, QueryT3ScaledExponentialsSumWeightsAndOutput) {
  const HeadTrace h = run_scenario(load_scenario("three-tokens")).heads[0];
  EXPECT_EQ(row_text(h.scaled, 2, 2), "2.12 0.71 2.83");
  EXPECT_EQ(row_text(h.exponentials, 2, 2), "8.34 2.03 16.92");
  EXPECT_EQ(format_number(h.row_sums[2], 2), "27.29");
  EXPECT_EQ(row_text(h.weights, 2, 2), "0.31 0.07 0.62");
  EXPECT_EQ(row_text(h.output, 2, 2), "0.69 0.93");
  EXPECT_EQ(h.shifts[2], 0.0) << "the worked example's exponentials are unshifted e^x";
}

TEST(WorkedExampleThreeTokens, ExplainWritesTheArithmeticTheWayTheDocsDo) {
  const Scenario s = load_scenario("three-tokens");
  const std::string text = explain(s, run_scenario(s), {});
  for (const char* expected :
       {"2×1 + 1×2 = 4", "√2 ≈ 1.41", "e^2.12 = 8.34", "e^0.71 = 2.03", "e^2.83 = 16.92", "8.34 + 2.03 + 16.92 = 27.29",
        "16.92 / 27.29 = 0.62", "(sum 1.00)", "0.31×(0 1) + 0.07×(1 0) + 0.62×(1 1) = 0.69 0.93"})
    EXPECT_NE(text.find(expected), std::string::npos) << "missing \"" << expected << "\" in:\n" << text;
}

TEST(WorkedExampleSoftmaxRow, ReproducesTheDocsAtThreeDecimals) {
  const Scenario s = load_scenario("softmax-row");
  const HeadTrace h = run_scenario(s).heads[0];
  EXPECT_EQ(row_text(h.scaled, 0, 3), "2 0.500 -1");
  EXPECT_EQ(row_text(h.exponentials, 0, 3), "7.389 1.649 0.368");
  EXPECT_EQ(format_number(h.row_sums[0], 3), "9.406");
  EXPECT_EQ(row_text(h.weights, 0, 3), "0.786 0.175 0.039");
  EXPECT_EQ(s.precision, 3) << "explain softmax-row shows 3 decimals by default";
  EXPECT_EQ(s.query, 0u) << "explain softmax-row works query 0, the documented row";
  const std::string text = explain(s, run_scenario(s), {0, std::nullopt, s.precision});
  EXPECT_NE(text.find("7.389 + 1.649 + 0.368 = 9.406"), std::string::npos) << text;
}
