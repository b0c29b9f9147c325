// Head detectors: the three patterns and the score, on attention built by hand so every
// score can be checked against arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "attnlab/model/detectors.hpp"

using namespace attnlab;

namespace {

// [n × n] weights with row i all on key key_of(i).
template <class F>
std::vector<float> one_hot_rows(std::size_t n, F key_of) {
  std::vector<float> a(n * n, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    a[i * n + key_of(i)] = 1.0f;
  return a;
}

const std::vector<int> kIds{9, 1, 2, 3, 1, 2, 3};  // BOS, then 1 2 3 twice

}  // namespace

TEST(Detectors, PatternsMarkThePreviousTokenTheEarlierCopyAndTheTokenAfterIt) {
  const std::size_t n = kIds.size();
  const auto on = [&](const std::vector<float>& p) {
    std::vector<std::pair<std::size_t, std::size_t>> cells;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (p[i * n + j] != 0) cells.emplace_back(i, j);
    return cells;
  };
  using Cells = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(on(detector_pattern(Detector::previous_token, kIds)),
            (Cells{{1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 4}, {6, 5}}));
  EXPECT_EQ(on(detector_pattern(Detector::duplicate_token, kIds)), (Cells{{4, 1}, {5, 2}, {6, 3}}));
  EXPECT_EQ(on(detector_pattern(Detector::induction, kIds)), (Cells{{4, 2}, {5, 3}, {6, 4}}));
  EXPECT_EQ(on(detector_pattern(Detector::sink, kIds)), (Cells{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}}));
}

TEST(Detectors, APerfectHeadScoresOneOnItsPatternAndZeroOnTheOthers) {
  const std::size_t n = kIds.size();
  const auto prev = detector_pattern(Detector::previous_token, kIds),
             dup = detector_pattern(Detector::duplicate_token, kIds), ind = detector_pattern(Detector::induction, kIds);
  const auto previous_head = one_hot_rows(n, [](std::size_t i) { return i == 0 ? 0 : i - 1; });
  EXPECT_EQ(detector_score(previous_head, prev, n), 1.0);
  EXPECT_EQ(detector_score(previous_head, dup, n), 0.0);
  EXPECT_EQ(detector_score(previous_head, ind, n), 0.0);
  // An induction head: on the second half, the token after the earlier copy (i - 2 here).
  const auto induction_head = one_hot_rows(n, [](std::size_t i) { return i >= 4 ? i - 2 : 0; });
  EXPECT_EQ(detector_score(induction_head, ind, n), 1.0);
  EXPECT_EQ(detector_score(induction_head, dup, n), 0.0);
  const auto duplicate_head = one_hot_rows(n, [](std::size_t i) { return i >= 4 ? i - 3 : 0; });
  EXPECT_EQ(detector_score(duplicate_head, dup, n), 1.0);
  // A sink head: every row on the first token. The induction head above parks its first
  // three rows there (it has no earlier copy to read): half of rows 1..6.
  const auto sink = detector_pattern(Detector::sink, kIds);
  EXPECT_EQ(detector_score(one_hot_rows(n, [](std::size_t) { return 0; }), sink, n), 1.0);
  EXPECT_EQ(detector_score(induction_head, sink, n), 0.5);
  EXPECT_EQ(detector_score(previous_head, sink, n), 1.0 / 6);
}

TEST(Detectors, UniformCausalWeightsScoreTheMeanOfOneOverRowLength) {
  const std::size_t n = kIds.size();
  std::vector<float> uniform(n * n, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j)
      uniform[i * n + j] = 1.0f / static_cast<float>(i + 1);
  double expected = 0;
  for (std::size_t i = 1; i < n; ++i)
    expected += 1.0 / static_cast<double>(i + 1);
  expected /= static_cast<double>(n - 1);  // rows 1..6 have a previous token
  EXPECT_NEAR(detector_score(uniform, detector_pattern(Detector::previous_token, kIds), n), expected, 1e-7);
  // Rows 4, 5, 6 have one earlier copy each: 1/5, 1/6, 1/7.
  EXPECT_NEAR(detector_score(uniform, detector_pattern(Detector::duplicate_token, kIds), n),
              (1.0 / 5 + 1.0 / 6 + 1.0 / 7) / 3, 1e-7);
  EXPECT_TRUE(std::isnan(
      detector_score(uniform, detector_pattern(Detector::duplicate_token, std::vector<int>{1, 2, 3, 4, 5, 6, 7}), n)))
      << "no row with an earlier copy: no score";
}

TEST(Detectors, RepeatedRandomSequencesAreSeededAndRepeatExactly) {
  const std::vector<int> a = repeated_random_tokens(7, 10, 50, 49), b = repeated_random_tokens(7, 10, 50, 49);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, repeated_random_tokens(8, 10, 50, 49));
  ASSERT_EQ(a.size(), 21u);
  EXPECT_EQ(a[0], 49);
  for (std::size_t i = 1; i <= 10; ++i) {
    EXPECT_EQ(a[i], a[i + 10]);
    EXPECT_NE(a[i], 49) << "BOS is not drawn";
    EXPECT_LT(a[i], 50);
  }
}

TEST(Detectors, EveryHeadOfAModelGetsThreeScoresInZeroToOne) {
  const Model model = load_gpt2(std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/tiny-f32");
  const auto sequences = default_detector_sequences(model.config, 0, 2);
  ASSERT_EQ(sequences[0].size(), 15u) << "16 positions: BOS and 7 tokens twice";
  const std::vector<HeadScores> scores = detect_heads(model, sequences);
  ASSERT_EQ(scores.size(), 8u);
  for (const HeadScores& s : scores)
    for (double x : {s.previous_token, s.duplicate_token, s.induction, s.sink}) {
      EXPECT_GE(x, 0.0);
      EXPECT_LE(x, 1.0);
    }
  EXPECT_EQ(scores[5].head, (HeadRef{1, 1}));
  // The score of head 1.1 is the detector applied to the forward's own weights (detect_heads
  // takes it from its pass over each row's scores: the same within f32's rounding).
  const ForwardResult r = model_forward(model, sequences[0], {.keep_attention = true});
  const std::size_t n = sequences[0].size();
  const double first = detector_score(std::span<const float>(r.attention[1].data() + n * n, n * n),
                                      detector_pattern(Detector::induction, sequences[0]), n);
  const std::size_t n2 = sequences[1].size();
  ASSERT_EQ(n2, 7u) << "the second repeats 3 tokens: half of the first's 7, rounded down";
  const ForwardResult r2 = model_forward(model, sequences[1], {.keep_attention = true});
  const double second = detector_score(std::span<const float>(r2.attention[1].data() + n2 * n2, n2 * n2),
                                       detector_pattern(Detector::induction, sequences[1]), n2);
  EXPECT_NEAR(scores[5].induction, (first + second) / 2, 1e-6);
}

TEST(Detectors, DefaultSequencesVaryTheRepeatSoAFixedOffsetHeadIsNoInductionHead) {
  const ModelConfig config{2, 2, 16, 32, 28, 64, 1e-5};
  const auto sequences = default_detector_sequences(config, 0, 4);
  ASSERT_EQ(sequences.size(), 4u);
  EXPECT_EQ(sequences.front().size(), 31u) << "k = 15, the longest that 32 positions hold";
  EXPECT_EQ(sequences.back().size(), 15u) << "k = 7, half of it";
  // A head that always looks 14 back (the induction offset k − 1 of the longest sequence
  // only) scores 1 on that sequence and nothing on the others.
  double total = 0;
  for (const std::vector<int>& ids : sequences) {
    const std::size_t n = ids.size();
    std::vector<float> a(n * n, 0.0f);
    for (std::size_t i = 0; i < n; ++i)
      a[i * n + (i >= 14 ? i - 14 : 0)] = 1.0f;
    total += detector_score(a, detector_pattern(Detector::induction, ids), n);
  }
  EXPECT_LT(total / 4, 0.35);
}
