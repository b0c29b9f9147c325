// The packed reply: its layout (docs/api.md), a round trip, and malformed bytes refused.
#include "attnlab/report/packed_reply.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "attnlab/core/error.hpp"
#include "compare.hpp"

using namespace attnlab;
using nlohmann::json;

namespace {

std::uint32_t u32_at(const std::string& bytes, std::size_t at) {
  std::uint32_t x;
  std::memcpy(&x, bytes.data() + at, sizeof x);
  return x;
}

double f64_at(const std::string& bytes, std::size_t at) {
  double x;
  std::memcpy(&x, bytes.data() + at, sizeof x);
  return x;
}

std::string error_of(const std::string& bytes) {
  return test::error_of_call([&] { (void)unpack_reply(bytes); });
}

}  // namespace

TEST(PackedReply, LaysOutMagicVersionHeaderAndValuesAsDocumented) {
  PackedArrays arrays;
  const double inf = std::numeric_limits<double>::infinity();
  const json header = {{"a", arrays.add(Matrix{{1.5, -inf}, {0.1, 3}})}, {"b", arrays.add(Matrix{{7}})}, {"name", "x"}};
  EXPECT_EQ(header["a"], json::parse(R"({"f64": 0, "shape": [2, 2]})"));
  EXPECT_EQ(header["b"], json::parse(R"({"f64": 4, "shape": [1, 1]})"));
  const std::string bytes = pack_reply(header, arrays);
  EXPECT_EQ(bytes.substr(0, 4), "ATLP");
  EXPECT_EQ(u32_at(bytes, 4), 1u);
  const std::uint32_t header_bytes = u32_at(bytes, 8);
  EXPECT_EQ(header_bytes % 8, 0u) << "the values start on an 8-byte boundary";
  EXPECT_EQ(u32_at(bytes, 12), 5u);
  ASSERT_EQ(bytes.size(), 16 + header_bytes + 5 * sizeof(double));
  EXPECT_EQ(json::parse(bytes.substr(16, header_bytes)), header);
  const std::size_t values = 16 + header_bytes;
  EXPECT_EQ(f64_at(bytes, values), 1.5);
  EXPECT_EQ(f64_at(bytes, values + 8), -inf) << "non-finite values travel as they are";
  EXPECT_EQ(f64_at(bytes, values + 16), 0.1);
  EXPECT_EQ(f64_at(bytes, values + 32), 7.0);
}

TEST(PackedReply, UnpackGivesTheJsonFormWithNullForNonFinite) {
  PackedArrays arrays;
  const json header = {{"m", arrays.add(Matrix{{0.1, -std::numeric_limits<double>::infinity()}, {2, 3}})},
                       {"nested", {{"list", {arrays.add(Matrix(0, 3)), 4}}}}};
  EXPECT_EQ(unpack_reply(pack_reply(header, arrays)),
            json::parse(R"({"m": [[0.1, null], [2.0, 3.0]], "nested": {"list": [[], 4]}})"));
}

TEST(PackedReply, MalformedBytesAreRefusedWithTheReason) {
  PackedArrays arrays;
  const std::string good = pack_reply({{"m", arrays.add(Matrix{{1, 2}})}}, arrays);
  EXPECT_ERROR_CONTAINS(error_of("ATL"), "does not start with \"ATLP\"");
  EXPECT_ERROR_CONTAINS(error_of("JSON" + good.substr(4)), "does not start with \"ATLP\"");
  std::string version = good;
  version[4] = 2;
  EXPECT_ERROR_CONTAINS(error_of(version), "version 2 is not 1");
  EXPECT_ERROR_CONTAINS(error_of(good.substr(0, good.size() - 1)), "but the header says");
  PackedArrays none;
  EXPECT_ERROR_CONTAINS(error_of(pack_reply({{"m", {{"f64", 0}, {"shape", {1, 2}}}}}, none)),
                        "reaches past the 0 values");
  EXPECT_ERROR_CONTAINS(error_of(pack_reply({{"m", {{"f64", -1}, {"shape", {1, 2}}}}}, none)), "is not a reference");
}
