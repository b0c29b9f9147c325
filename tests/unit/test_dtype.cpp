// f32 <-> f16 and f32 <-> bf16: known bit patterns, ties to even, overflow, subnormals,
// inf and NaN, every 16-bit pattern round-tripped, and agreement with independent oracles
// (the compiler's _Float16 and a nearest-neighbour search for bf16) on a million floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"

using namespace attnlab;

namespace {
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
constexpr float kFloatInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST(DType, SizesNamesAndUnitRoundoff) {
  EXPECT_EQ(dtype_bytes(DType::f32), 4u);
  EXPECT_EQ(dtype_bytes(DType::f16), 2u);
  EXPECT_EQ(dtype_bytes(DType::bf16), 2u);
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_unit_roundoff(DType::f16), std::ldexp(1.0, -11));
  EXPECT_EQ(parse_dtype("f16", "dtype"), DType::f16);
  EXPECT_EQ(parse_dtype("bfloat16", "dtype"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp32", "dtype"), DType::f32);
}

TEST(DType, AnUnknownDtypeIsRefusedWithTheAcceptedNames) {
  try {
    parse_dtype("f8", "--dtype");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--dtype: unknown dtype \"f8\"; use f32 (4 bytes), f16 (2 bytes) or bf16 (2 bytes)");
  }
}

TEST(F16, KnownBitPatterns) {
  const std::vector<std::pair<float, std::uint16_t>> known{{0.0f, 0x0000},
                                                           {-0.0f, 0x8000},
                                                           {1.0f, 0x3c00},
                                                           {-2.0f, 0xc000},
                                                           {0.5f, 0x3800},
                                                           {65504.0f, 0x7bff},
                                                           {3.140625f, 0x4248},
                                                           {std::ldexp(1.0f, -14), 0x0400},     // smallest normal
                                                           {std::ldexp(1.0f, -24), 0x0001},     // smallest subnormal
                                                           {std::ldexp(1023.0f, -24), 0x03ff},  // largest subnormal
                                                           {kFloatInf, 0x7c00},
                                                           {-kFloatInf, 0xfc00}};
  for (const auto& [value, pattern] : known) {
    EXPECT_EQ(f32_to_f16(value), pattern) << value;
    EXPECT_EQ(bits(f16_to_f32(pattern)), bits(value)) << value;
  }
  // Values f16 cannot hold exactly: the nearest f16, and back the f16's own value.
  EXPECT_EQ(f32_to_f16(0.1f), 0x2e66);
  EXPECT_EQ(f16_to_f32(0x2e66), 0.0999755859375f);
  EXPECT_EQ(f32_to_f16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
}

TEST(F16, HalfwayCasesRoundToEven) {
  // Between 1 (0x3c00) and 1 + 2^-10 (0x3c01): the tie goes to the even 0x3c00.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // Between 0x3c01 and 0x3c02: the tie goes to 0x3c02.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above a tie rounds up, just below rounds down.
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 0.0f)), 0x3c00);
  // A carry out of the mantissa moves to the next binade: 2047.9 -> 2048.
  EXPECT_EQ(f32_to_f16(2047.9f), 0x6800);
}

TEST(F16, OverflowGoesToInfinityFromHalfwayPastTheLargest) {
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);  // below the tie: stays 65504
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);   // the tie: rounds to the even "65536", i.e. inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(F16, SubnormalsAndUnderflowRoundToNearestEven) {
  const float tiny = std::ldexp(1.0f, -24);  // 0x0001
  EXPECT_EQ(f32_to_f16(tiny / 2), 0x0000);   // the tie between 0 and 0x0001: 0
  EXPECT_EQ(f32_to_f16(-tiny / 2), 0x8000);
  EXPECT_EQ(f32_to_f16(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(1.5f * tiny), 0x0002);  // tie between 1 and 2: even 2
  EXPECT_EQ(f32_to_f16(2.5f * tiny), 0x0002);  // tie between 2 and 3: even 2
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  // The largest subnormal plus half a step rounds up into the smallest normal.
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);
}

TEST(F16, NaNStaysNaNWithItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::uint16_t h = f32_to_f16(nan);
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(h)));
  EXPECT_EQ(f32_to_f16(-nan) & 0x8000, 0x8000);
  // A NaN whose payload sits only in the low bits must not become inf.
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(from_bits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
}

TEST(F16, EveryPatternSurvivesARoundTripThroughF32) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

#if defined(__FLT16_MAX__)
TEST(F16, MatchesTheCompilersFloat16ConversionOnAMillionFloats) {
  SplitMix64 rng(42);
  for (int k = 0; k < 1'000'000; ++k) {
    // Random bit patterns over every exponent, half of them near f16's range.
    std::uint32_t b = static_cast<std::uint32_t>(rng.next());
    if (k % 2) b = (b & 0x807fffffu) | ((100u + static_cast<std::uint32_t>(rng.next() % 50)) << 23);
    const float f = from_bits(b);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    std::uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(f32_to_f16(f), expected) << std::hex << b;
    ASSERT_EQ(bits(f16_to_f32(expected)), bits(static_cast<float>(h))) << std::hex << expected;
  }
}
#endif

TEST(BF16, KnownBitPatterns) {
  const std::vector<std::pair<float, std::uint16_t>> known{
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3f80},
      {-2.0f, 0xc000},
      {0.1f, 0x3dcd},
      {3.14159265f, 0x4049},
      {kFloatInf, 0x7f80},
      {-kFloatInf, 0xff80},
      {std::numeric_limits<float>::max(), 0x7f80},  // rounds past the largest bf16
      {from_bits(0x7f7f0000u), 0x7f7f}};            // the largest bf16, exact
  for (const auto& [value, pattern] : known)
    EXPECT_EQ(f32_to_bf16(value), pattern) << value;
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(BF16, HalfwayCasesRoundToEvenSubnormalsIncluded) {
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000u)), 0x0000);  // subnormal tie -> 0
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(f32_to_bf16(from_bits(0x007fffffu)), 0x0080);  // largest subnormal rounds to the smallest normal
}

TEST(BF16, NaNStaysNaNEvenWithALowPayload) {
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f32_to_bf16(from_bits(0xffc00000u)), 0xffc0);
}

TEST(BF16, EveryPatternSurvivesARoundTripThroughF32) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h) << std::hex << h;
  }
}

TEST(BF16, IsTheNearestBF16ValueTiesToEvenOnAMillionFloats) {
  // Oracle: the two bf16 values around f (truncation and the next one up in magnitude),
  // compared in double, which holds both distances exactly.
  SplitMix64 rng(7);
  for (int k = 0; k < 1'000'000; ++k) {
    const std::uint32_t b = static_cast<std::uint32_t>(rng.next());
    const float f = from_bits(b);
    if (!std::isfinite(f)) continue;
    const std::uint16_t down = static_cast<std::uint16_t>(b >> 16), up = static_cast<std::uint16_t>(down + 1);
    const double d_down = std::abs(static_cast<double>(f) - bf16_to_f32(down));
    const double up_value = (up & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), f) : bf16_to_f32(up);
    const double d_up = std::abs(up_value - static_cast<double>(f));
    const std::uint16_t expected = d_down < d_up ? down : d_up < d_down ? up : ((down & 1) ? up : down);
    ASSERT_EQ(f32_to_bf16(f), expected) << std::hex << b;
  }
}

TEST(RowConversion, F32RowsRoundExactlyAsTheScalarConversion) {
  // Random patterns over every exponent (NaN, inf, subnormals, overflow included), 1003
  // of them so the 8-wide path and its tail both run.
  SplitMix64 rng(11);
  for (int round = 0; round < 300; ++round) {
    std::vector<float> in(1003);
    for (float& x : in)
      x = from_bits(static_cast<std::uint32_t>(rng.next()));
    in[0] = 65520.0f, in[1] = std::ldexp(1.0f, -25), in[2] = from_bits(0x7f800001u), in[3] = -kFloatInf;
    std::vector<std::uint16_t> f16(in.size()), bf16(in.size());
    f32_to_f16(in, f16);
    f32_to_bf16(in, bf16);
    for (std::size_t k = 0; k < in.size(); ++k) {
      ASSERT_EQ(f16[k], f32_to_f16(in[k])) << std::hex << bits(in[k]);
      ASSERT_EQ(bf16[k], f32_to_bf16(in[k])) << std::hex << bits(in[k]);
    }
  }
}

TEST(RowConversion, MatchesTheScalarConversionForEveryPattern) {
  std::vector<std::uint16_t> all(0x10000 + 5);  // not a multiple of 8: the tail path too
  for (std::size_t k = 0; k < all.size(); ++k)
    all[k] = static_cast<std::uint16_t>(k);
  std::vector<float> f16(all.size()), bf16(all.size());
  f16_to_f32(all, f16);
  bf16_to_f32(all, bf16);
  for (std::size_t k = 0; k < all.size(); ++k) {
    ASSERT_EQ(bits(f16[k]), bits(f16_to_f32(all[k]))) << std::hex << all[k];
    ASSERT_EQ(bits(bf16[k]), bits(bf16_to_f32(all[k]))) << std::hex << all[k];
  }
}

TEST(RowConversion, F16RoundsToBf16AsThroughF32ForEveryPattern) {
  std::vector<std::uint16_t> all(0x10000 + 13);  // not a multiple of 16: the tail path too
  for (std::size_t k = 0; k < all.size(); ++k)
    all[k] = static_cast<std::uint16_t>(k * 0x9E37u);  // every pattern, in an order that mixes them
  std::vector<std::uint16_t> out(all.size());
  f16_to_bf16(all, out);
  for (std::size_t k = 0; k < all.size(); ++k)
    ASSERT_EQ(out[k], f32_to_bf16(f16_to_f32(all[k]))) << std::hex << all[k];
}
