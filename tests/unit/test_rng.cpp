// The seeded generator: splitmix64's published outputs, and normals that look normal.
#include <gtest/gtest.h>

#include <cmath>

#include "attnlab/core/rng.hpp"

using attnlab::SplitMix64;

TEST(SplitMix64, SeedZeroGivesThePublishedSequence) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.next(), 0x06C45D188009454FULL);
}

TEST(SplitMix64, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  SplitMix64 a(42), b(42), c(43);
  for (int k = 0; k < 100; ++k) {
    const double x = a.normal();
    EXPECT_EQ(x, b.normal());
    EXPECT_NE(x, c.normal());
  }
}

TEST(SplitMix64, UniformStaysInHalfOpenUnitInterval) {
  SplitMix64 rng(7);
  for (int k = 0; k < 100000; ++k) {
    const double u = rng.uniform();
    ASSERT_GT(u, 0.0);
    ASSERT_LE(u, 1.0);
  }
}

TEST(SplitMix64, NormalsHaveMeanZeroAndVarianceOne) {
  SplitMix64 rng(2026);
  const int count = 200000;
  double sum = 0, sum_sq = 0;
  for (int k = 0; k < count; ++k) {
    const double x = rng.normal();
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / count, variance = sum_sq / count - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);  // standard error 1/√200000 ≈ 0.0022
  EXPECT_NEAR(variance, 1.0, 0.02);
}
