// Positional encodings: each kind against its formula, and the properties that make
// them useful (rope preserves length and scores depend only on relative position).
#include <gtest/gtest.h>

#include <cmath>

#include "attnlab/core/positions.hpp"
#include "attnlab/report/explain.hpp"
#include "compare.hpp"
#include "random_inputs.hpp"

using namespace attnlab;

TEST(Positions, NoneAndRopeLeaveEmbeddingsAlone) {
  const Matrix x{{1, 2}, {3, 4}};
  EXPECT_EQ(apply_positions(x, {PositionKind::none}), x);
  EXPECT_EQ(apply_positions(x, {PositionKind::rope}), x);
  EXPECT_EQ(input_width(2, {PositionKind::none}), 2u);
}

TEST(Positions, SinusoidalAddsVaswaniFormulaAtEachPosition) {
  const Matrix x(3, 4, 0.0);
  const Matrix pe = apply_positions(x, {PositionKind::sinusoidal});
  // p = 0: sin 0 = 0 in even dims, cos 0 = 1 in odd dims.
  EXPECT_EQ(format_vector(pe.row(0), 2), "0 1 0 1");
  // p = 2, dims 2,3 (i = 1): angle 2 / 10000^(2/4) = 0.02.
  EXPECT_DOUBLE_EQ(pe(2, 0), std::sin(2.0));
  EXPECT_DOUBLE_EQ(pe(2, 1), std::cos(2.0));
  EXPECT_DOUBLE_EQ(pe(2, 2), std::sin(0.02));
  EXPECT_DOUBLE_EQ(pe(2, 3), std::cos(0.02));
}

TEST(Positions, SincosPairAppendsTwoColumns) {
  const Matrix x{{5}, {6}, {7}};
  const Positions p{PositionKind::sincos_pair, 0.5};
  EXPECT_EQ(input_width(1, p), 3u);
  const Matrix out = apply_positions(x, p);
  ASSERT_EQ(out.cols, 3u);
  EXPECT_EQ(out(2, 0), 7.0);
  EXPECT_DOUBLE_EQ(out(2, 1), std::sin(1.0));
  EXPECT_DOUBLE_EQ(out(2, 2), std::cos(1.0));
}

TEST(Positions, RopeRotatesEachPairByPositionTimesFrequency) {
  Matrix q(2, 4, 0.0);
  q(1, 0) = 1.0;  // (1, 0) in pair 0 at p = 1: rotated by θ = 1
  q(1, 2) = 1.0;  // (1, 0) in pair 1 at p = 1: rotated by θ = 10000^(-2/4) = 0.01
  rotate_rope(q);
  EXPECT_DOUBLE_EQ(q(1, 0), std::cos(1.0));
  EXPECT_DOUBLE_EQ(q(1, 1), std::sin(1.0));
  EXPECT_DOUBLE_EQ(q(1, 2), std::cos(0.01));
  EXPECT_DOUBLE_EQ(q(1, 3), std::sin(0.01));
}

TEST(Positions, RopeKeepsLengthsAndScoresDependOnlyOnRelativePosition) {
  SplitMix64 rng(9);
  const Matrix v = attnlab::test::random_matrix(rng, 1, 6);
  const Matrix w = attnlab::test::random_matrix(rng, 1, 6);
  // The same q at every position and the same k at every position.
  Matrix q(8, 6), k(8, 6);
  for (std::size_t p = 0; p < 8; ++p)
    for (std::size_t c = 0; c < 6; ++c)
      q(p, c) = v(0, c), k(p, c) = w(0, c);
  rotate_rope(q);
  rotate_rope(k);
  for (std::size_t p = 0; p < 8; ++p)
    EXPECT_NEAR(dot(q.row(p), q.row(p)), dot(v.row(0), v.row(0)), 1e-12);
  // q at 5 · k at 3 equals q at 4 · k at 2 (offset 2 both times), and differs from offset 0.
  EXPECT_NEAR(dot(q.row(5), k.row(3)), dot(q.row(4), k.row(2)), 1e-12);
  EXPECT_GT(std::abs(dot(q.row(5), k.row(3)) - dot(q.row(3), k.row(3))), 1e-6);
}
