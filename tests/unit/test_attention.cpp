// The reference kernel: each step, each mask, softmax stability, multi-head with W_O,
// cross-attention, and properties that must hold on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "attnlab/core/attention.hpp"
#include "compare.hpp"
#include "random_inputs.hpp"

using namespace attnlab;
using attnlab::test::all_close;
using attnlab::test::random_input;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

double row_sum(const Matrix& m, std::size_t i) {
  const auto r = m.row(i);
  return std::accumulate(r.begin(), r.end(), 0.0);
}

double entropy(std::span<const double> p) {
  double h = 0;
  for (double x : p)
    if (x > 0) h -= x * std::log(x);
  return h;
}
}  // namespace

TEST(Softmax, TextbookRowIsUnshiftedAndSumsToOne) {
  const std::vector<double> logits{2.0, 0.5, -1.0};
  const SoftmaxRow row = softmax(logits);
  EXPECT_EQ(row.shift, 0.0);
  EXPECT_DOUBLE_EQ(row.exponentials[0], std::exp(2.0));
  EXPECT_DOUBLE_EQ(row.sum, std::exp(2.0) + std::exp(0.5) + std::exp(-1.0));
  EXPECT_NEAR(row.weights[0] + row.weights[1] + row.weights[2], 1.0, 1e-15);
}

TEST(Softmax, ScoresOfPlusAndMinusTenThousandGiveFiniteCorrectWeights) {
  const std::vector<double> high{1e4, 1e4 - 1.0, -1e4};
  const SoftmaxRow a = softmax(high);
  EXPECT_EQ(a.shift, 1e4);
  EXPECT_NEAR(a.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(a.weights[1], std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(a.weights[2], 0.0);

  const std::vector<double> low{-1e4, -1e4 - 2.0};
  const SoftmaxRow b = softmax(low);
  EXPECT_EQ(b.shift, -1e4) << "without the shift every e^x underflows to 0 and the row is 0/0";
  EXPECT_NEAR(b.weights[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
  for (double w : b.weights)
    EXPECT_TRUE(std::isfinite(w));
}

TEST(Softmax, MaskedEntriesGetExactlyZeroAndAFullyMaskedRowIsZeroNotNaN) {
  const std::vector<double> partly{1.0, -kInf, 1.0};
  const SoftmaxRow a = softmax(partly);
  EXPECT_EQ(a.weights[1], 0.0);
  EXPECT_EQ(a.weights[0], 0.5);
  const std::vector<double> all_masked{-kInf, -kInf};
  const SoftmaxRow b = softmax(all_masked);
  EXPECT_TRUE(b.fully_masked);
  EXPECT_EQ(b.weights, (std::vector<double>{0.0, 0.0}));
}

TEST(AttentionSteps, EachIntermediateIsTheFormulaOfItsStep) {
  AttentionInput input = random_input(1, 5, 4, 1, 3, 2);
  input.temperature = 0.7;
  const HeadTrace t = attend_head(input, input.heads[0]);
  EXPECT_TRUE(all_close(t.queries, matmul(input.queries_from, input.heads[0].w_q)));
  EXPECT_TRUE(all_close(t.keys, matmul(input.keys_from, input.heads[0].w_k)));
  EXPECT_TRUE(all_close(t.values, matmul(input.keys_from, input.heads[0].w_v)));
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 5; ++j) {
      EXPECT_DOUBLE_EQ(t.scores(i, j), dot(t.queries.row(i), t.keys.row(j)));
      EXPECT_DOUBLE_EQ(t.scaled(i, j), t.scores(i, j) / std::sqrt(3.0));
      EXPECT_DOUBLE_EQ(t.logits(i, j), t.scaled(i, j) / 0.7);
    }
  EXPECT_TRUE(all_close(t.output, matmul(t.weights, t.values)));
}

TEST(Masks, CausalHidesExactlyTheUpperTriangle) {
  AttentionInput input = random_input(2, 6, 4, 1, 4, 4);
  input.mask.causal = true;
  const HeadTrace t = attend_head(input, input.heads[0]);
  for (std::size_t i = 0; i < 6; ++i) {
    for (std::size_t j = 0; j < 6; ++j) {
      EXPECT_EQ(std::isinf(t.logits(i, j)), j > i) << i << "," << j;
      if (j > i) {
        EXPECT_EQ(t.weights(i, j), 0.0);
      }
    }
    EXPECT_NEAR(row_sum(t.weights, i), 1.0, 1e-12);
  }
  EXPECT_EQ(t.weights(0, 0), 1.0) << "the first token sees only itself";
}

TEST(Masks, WindowAloneAndWithCausal) {
  AttentionInput input = random_input(3, 7, 4, 1, 4, 4);
  input.mask.window = 2;
  const HeadTrace both_sides = attend_head(input, input.heads[0]);
  input.mask.causal = true;
  const HeadTrace causal = attend_head(input, input.heads[0]);
  for (std::size_t i = 0; i < 7; ++i)
    for (std::size_t j = 0; j < 7; ++j) {
      const long d = static_cast<long>(i) - static_cast<long>(j);
      EXPECT_EQ(both_sides.weights(i, j) > 0, std::abs(d) < 2) << i << "," << j;
      EXPECT_EQ(causal.weights(i, j) > 0, d >= 0 && d < 2) << i << "," << j;
    }
}

// A window of 2^64 - 1 was cast to a long (-1) and hid every key; compared unsigned, a
// window longer than the sequence hides nothing.
TEST(Masks, AWindowTooLargeForALongHidesNothing) {
  const Mask mask({.causal = false, .window = std::numeric_limits<std::size_t>::max(), .hidden_keys = {}}, 5, 5);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      EXPECT_TRUE(mask.visible(i, j)) << i << "," << j;
}

TEST(Masks, HiddenKeysAreHiddenFromEveryQueryAndTheRestRenormalise) {
  AttentionInput input = random_input(4, 5, 3, 1, 3, 3);
  input.mask.hidden_keys = {1, 3};
  const HeadTrace t = attend_head(input, input.heads[0]);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t.weights(i, 1), 0.0);
    EXPECT_EQ(t.weights(i, 3), 0.0);
    EXPECT_NEAR(row_sum(t.weights, i), 1.0, 1e-12);
  }
}

TEST(Masks, FullyMaskedRowGivesZeroWeightsZeroOutputAndIsFlagged) {
  AttentionInput input = random_input(5, 4, 3, 1, 3, 3);
  input.mask.causal = true;
  input.mask.hidden_keys = {0};
  const HeadTrace t = attend_head(input, input.heads[0]);
  EXPECT_TRUE(t.fully_masked[0]);
  EXPECT_FALSE(t.fully_masked[1]);
  for (std::size_t c = 0; c < 3; ++c)
    EXPECT_EQ(t.output(0, c), 0.0);
  for (double x : t.output.data)
    EXPECT_FALSE(std::isnan(x));
  EXPECT_EQ(t.weights(1, 1), 1.0);
}

TEST(MultiHead, OutputIsConcatenationTimesWOAndHeadsMayDifferInWidth) {
  AttentionInput input = random_input(6, 4, 5, 1, 2, 3);
  SplitMix64 rng(60);
  input.heads.push_back(
      {"wide", test::random_matrix(rng, 5, 4), test::random_matrix(rng, 5, 4), test::random_matrix(rng, 5, 1)});
  input.w_o = test::random_matrix(rng, 4, 2);
  const Trace trace = attend(input);
  ASSERT_EQ(trace.concatenated.cols, 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t c = 0; c < 3; ++c)
      EXPECT_EQ(trace.concatenated(i, c), trace.heads[0].output(i, c));
    EXPECT_EQ(trace.concatenated(i, 3), trace.heads[1].output(i, 0));
  }
  EXPECT_TRUE(all_close(trace.output, matmul(trace.concatenated, *input.w_o)));
}

TEST(CrossAttention, KeysAndValuesComeFromTheSourceWithNDifferentFromM) {
  AttentionInput input = random_input(7, 3, 4, 1, 2, 2);
  SplitMix64 rng(70);
  input.keys_from = test::random_matrix(rng, 5, 4);
  const HeadTrace t = attend_head(input, input.heads[0]);
  EXPECT_EQ(t.weights.rows, 3u);
  EXPECT_EQ(t.weights.cols, 5u);
  EXPECT_TRUE(all_close(t.keys, matmul(input.keys_from, input.heads[0].w_k)));
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(row_sum(t.weights, i), 1.0, 1e-12);
}

// Properties over many random inputs.
class RandomProperties : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(RandomProperties, RowsSumToOneAndOutputsAreConvexCombinationsOfValues) {
  const AttentionInput input = random_input(GetParam(), 9, 6, 2, 4, 3);
  for (const HeadTrace& t : attend(input).heads)
    for (std::size_t i = 0; i < 9; ++i) {
      EXPECT_NEAR(row_sum(t.weights, i), 1.0, 1e-12);
      for (std::size_t c = 0; c < 3; ++c) {
        double lo = INFINITY, hi = -INFINITY;
        for (std::size_t j = 0; j < 9; ++j)
          lo = std::min(lo, t.values(j, c)), hi = std::max(hi, t.values(j, c));
        EXPECT_GE(t.output(i, c), lo - 1e-12);
        EXPECT_LE(t.output(i, c), hi + 1e-12);
      }
    }
}

TEST_P(RandomProperties, LowerTemperatureNeverRaisesARowsEntropy) {
  AttentionInput input = random_input(GetParam(), 8, 5, 1, 4, 2);
  std::vector<double> previous(8, INFINITY);
  for (double T : {3.0, 1.0, 0.5, 0.1, 0.01}) {
    input.temperature = T;
    const HeadTrace t = attend_head(input, input.heads[0]);
    for (std::size_t i = 0; i < 8; ++i) {
      const double h = entropy(t.weights.row(i));
      EXPECT_LE(h, previous[i] + 1e-12) << "row " << i << " at T = " << T;
      previous[i] = h;
    }
  }
}

TEST_P(RandomProperties, ExtremeScoresStayFinite) {
  AttentionInput input = random_input(GetParam(), 6, 4, 1, 4, 2);
  for (double& x : input.heads[0].w_q.data)
    x *= 1e3;  // scores around 1e3..1e4
  input.temperature = 0.01;
  const HeadTrace t = attend_head(input, input.heads[0]);
  for (double w : t.weights.data)
    EXPECT_TRUE(std::isfinite(w));
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_NEAR(row_sum(t.weights, i), 1.0, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomProperties, ::testing::Values(11, 12, 13, 14, 15, 16, 17, 18));

// Trained heads carry biases: q = x·W_Q + b_Q, k = x·W_K + b_K, v = x·W_V + b_V.
TEST(Attention, BiasesAreAddedToEveryProjectedRow) {
  AttentionInput input;
  input.queries_from = input.keys_from = Matrix{{1, 0}, {0, 1}, {1, 1}};
  HeadWeights head{"biased", Matrix{{1, 0}, {1, 1}}, Matrix{{1, 1}, {0, 1}}, Matrix{{0, 1}, {1, 0}}};
  head.b_q = {0.5, -1};
  head.b_k = {2, 0};
  head.b_v = {-3, 0.25};
  const HeadTrace t = attend_head(input, head);
  // t3 = 1 1: q = (2, 1) + (0.5, -1) = (2.5, 0); k = (1, 2) + (2, 0) = (3, 2); v = (1, 1) + (-3, 0.25).
  EXPECT_EQ(t.queries(2, 0), 2.5);
  EXPECT_EQ(t.queries(2, 1), 0.0);
  EXPECT_EQ(t.keys(2, 0), 3.0);
  EXPECT_EQ(t.keys(2, 1), 2.0);
  EXPECT_EQ(t.values(2, 0), -2.0);
  EXPECT_EQ(t.values(2, 1), 1.25);
  // Every later step reads the biased projections: the score of t3 with t3 is q·k = 7.5.
  EXPECT_EQ(t.scores(2, 2), 7.5);
  double row_sum = 0;
  for (std::size_t j = 0; j < 3; ++j)
    row_sum += t.weights(2, j);
  EXPECT_NEAR(row_sum, 1.0, 1e-15);
}
