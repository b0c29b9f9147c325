// Counts and byte sizes as text, and 64-bit arithmetic that refuses to wrap.
#include <gtest/gtest.h>

#include <cstdint>

#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"

using namespace attnlab;

namespace {
std::string refusal(std::string_view text) {
  try {
    parse_byte_size(text, "--budget");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST(Units, CheckedArithmeticSaysWhenItWouldWrap) {
  EXPECT_EQ(checked_mul(1u << 31, 1u << 31), std::uint64_t{1} << 62);
  EXPECT_FALSE(checked_mul(std::uint64_t{1} << 32, std::uint64_t{1} << 32));
  EXPECT_EQ(checked_add(UINT64_MAX - 1, 1), UINT64_MAX);
  EXPECT_FALSE(checked_add(UINT64_MAX, 1));
}

TEST(Units, CountsGetThousandsSeparators) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(10'000'000'000), "10,000,000,000");
  EXPECT_EQ(format_count(UINT64_MAX), "18,446,744,073,709,551,615");
}

TEST(Units, BytesInTheLargestBinaryUnit) {
  EXPECT_EQ(format_bytes(18), "18 B");
  EXPECT_EQ(format_bytes(2304), "2.25 KiB");
  EXPECT_EQ(format_bytes(512ull << 20), "512 MiB");
  EXPECT_EQ(format_bytes(1ull << 30), "1 GiB");
  EXPECT_EQ(format_bytes(16'060'522'496ull), "14.96 GiB");
  EXPECT_EQ(format_bytes(UINT64_MAX), "16 EiB");
}

TEST(Units, ByteSizesInTheIssuesSpellings) {
  EXPECT_EQ(parse_byte_size("24GiB", "--budget"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("512MiB", "--budget"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5GB", "--budget"), 1'500'000'000ull);
  EXPECT_EQ(parse_byte_size("24 gib", "--budget"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("4096", "--budget"), 4096u);
  EXPECT_EQ(parse_byte_size("2kB", "--budget"), 2000u);
  EXPECT_EQ(parse_byte_size("0.5KiB", "--budget"), 512u);
  EXPECT_EQ(parse_byte_size("18446744073709551615", "--budget"), UINT64_MAX);
}

TEST(Units, BadByteSizesAreRefusedWithTheFlagAndExamples) {
  EXPECT_EQ(refusal("24 parsecs"),
            "--budget: \"24 parsecs\" has an unknown unit \"parsecs\" (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB); "
            "give a size such as 24GiB, 512MiB, 1.5GB or 8000000000 (bytes)");
  EXPECT_NE(refusal("-1GiB").find("--budget: \"-1GiB\" is negative"), std::string::npos);
  EXPECT_NE(refusal("").find("does not start with a number"), std::string::npos);
  EXPECT_NE(refusal("GiB").find("does not start with a number"), std::string::npos);
  EXPECT_NE(refusal("0GiB").find("is 0 bytes"), std::string::npos);
  EXPECT_NE(refusal("0.1B").find("is 0 bytes"), std::string::npos);
  EXPECT_NE(refusal("99999999TiB").find("more than 2^64 - 1 bytes"), std::string::npos);
  EXPECT_NE(refusal("18446744073709551616").find("more than 2^64 - 1 bytes"), std::string::npos);
  EXPECT_NE(refusal("1.2.3GB").find("unknown unit \".3GB\""), std::string::npos);
}
