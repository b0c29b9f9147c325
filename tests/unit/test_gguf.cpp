// GGUF files (attnlab/model/gguf.hpp) against tests/model/make_gguf_fixtures.py, an
// independent NumPy writer and dequantizer written from ggml's block definitions: every
// metadata value type, versions 2 and 3, every tensor type attnlab reads dequantized to the
// NumPy values; then every kind of broken file, refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/model/gguf.hpp"
#include "compare.hpp"
#include "model_fixtures.hpp"

using namespace attnlab;
using nlohmann::json;
namespace fs = std::filesystem;

namespace gguf_test {  // named: the unit tests compile as unity batches

const fs::path kGguf = fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / "gguf";

json expected() { return test::read_json(kGguf / "types.expected.json"); }

class GgufVersions : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufVersions, MetadataOfEveryTypeAndEveryTensorTypeReadAsNumPyDoes) {
  const GgufFile file((kGguf / GetParam()).string());
  const json want = expected();
  for (const auto& [key, value] : want["metadata"].items()) {
    ASSERT_TRUE(file.metadata().contains(key)) << key;
    if (value.is_number_float())
      EXPECT_FLOAT_EQ(file.metadata()[key].get<float>(), value.get<float>()) << key;
    else
      EXPECT_EQ(file.metadata()[key], value) << key;
  }
  EXPECT_EQ(file.metadata_types().at("test.u32"), "u32");
  EXPECT_EQ(file.metadata_types().at("test.strings"), "array[string]");
  EXPECT_EQ(file.metadata_types().at("test.nested"), "array[array[i32]]");
  EXPECT_EQ(file.tensors().size(), want["tensors"].size());
  for (const auto& [name, t] : want["tensors"].items()) {
    const GgufTensor* tensor = file.find(name);
    ASSERT_NE(tensor, nullptr) << name;
    EXPECT_EQ(ggml_type_name(tensor->type), t["type"].get<std::string>());
    EXPECT_EQ(tensor->dims, t["dims"].get<std::vector<std::uint64_t>>());
    EXPECT_EQ(tensor->offset % file.alignment(), 0u);
    const std::vector<double> values = t["values"];
    std::vector<float> out(values.size());
    dequantize(tensor->type, file.bytes(*tensor).data(), out.size(), out.data());
    // ggml's maths in f32 step by step: the same up to a fused multiply-add's rounding.
    double largest = 0;
    for (double v : values)
      largest = std::max(largest, std::abs(v));
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_NEAR(out[i], values[i], 1e-6 * largest) << name << " value " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufVersions, ::testing::Values("types.gguf", "types-v2.gguf"),
                         [](const auto& info) {
                           return std::string(info.param).find("v2") != std::string::npos ? "v2" : "v3";
                         });

TEST(Gguf, TheAlignmentIsTheFilesOwn) {
  EXPECT_EQ(GgufFile((kGguf / "types.gguf").string()).alignment(), 32u);
  const GgufFile v2((kGguf / "types-v2.gguf").string());
  EXPECT_EQ(v2.version(), 2u);
  EXPECT_EQ(v2.alignment(), 64u);
}

// ---- broken files ----------------------------------------------------------------------------

class BrokenGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(kGguf / "types.gguf", std::ios::binary);
    good_.assign(std::istreambuf_iterator<char>(in), {});
    path_ = fs::temp_directory_path() / ("attnlab-broken-" + std::to_string(::getpid()) + ".gguf");
  }
  void TearDown() override { fs::remove(path_); }

  // The error opening the fixture's bytes with `change` applied.
  std::string error_with(const std::function<void(std::string&)>& change) {
    std::string bytes = good_;
    change(bytes);
    std::ofstream(path_, std::ios::binary) << bytes;
    return test::error_of_call([&] { GgufFile file(path_.string()); });
  }
  template <class T>
  static void put(std::string& bytes, std::size_t at, T value) {
    std::memcpy(bytes.data() + at, &value, sizeof(T));
  }
  // Where the first tensor info starts: after the header and the metadata.
  std::size_t first_tensor_info() const { return good_.find(std::string("\x05\0\0\0\0\0\0\0t.f32", 13)); }

  std::string good_;
  fs::path path_;
};

TEST_F(BrokenGguf, EveryKindOfDamageIsRefusedNamingIt) {
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { b[0] = 'X'; }), "does not start with \"GGUF\"");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { put<std::uint32_t>(b, 4, 1); }), "version 1");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { put<std::uint32_t>(b, 4, 7); }), "GGUF version 7");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { put<std::uint64_t>(b, 8, 1u << 20); }),
                        "1048576 tensors is more than the limit");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { put<std::uint64_t>(b, 16, std::uint64_t(1) << 40); }),
                        "metadata entries cannot fit");
  // The first key's length, far past the file.
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { put<std::uint64_t>(b, 24, 1u << 30); }),
                        "runs past the end of the file");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { b.resize(40); }), "15 metadata entries cannot fit")
      << "priced before any is read";
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { b.resize(first_tensor_info() + 15); }),
                        "tensor \"t.f32\" at byte");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { b.resize(first_tensor_info() + 15); }), "the file ends there");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { b.resize(12); }), "too short for a GGUF file");
  // The first value's type (after "general.architecture", 20 bytes).
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { put<std::uint32_t>(b, 24 + 8 + 20, 13); }),
                        "value type 13 is not a GGUF value type");
  // The string array's count: more strings than bytes left.
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) {
                          const std::size_t at = b.find("test.strings") + 12 + 4 + 4;
                          put<std::uint64_t>(b, at, std::uint64_t(1) << 40);
                        }),
                        "cannot fit in the");
  const std::size_t info = first_tensor_info(), dims = info + 8 + 5, type = dims + 4 + 16, offset = type + 4;
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint32_t>(b, dims, 5); }),
                        "tensor \"t.f32\": 5 dimensions; a tensor has 1 to 4");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint64_t>(b, dims + 4, 0); }), "dimension 0 is 0");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint64_t>(b, dims + 4, std::uint64_t(1) << 60); }),
                        "their product below 2^48");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint32_t>(b, type, 3); }),
                        "type Q4_1 is not one attnlab reads");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) {
                          put<std::uint64_t>(b, dims + 4, 48);
                          put<std::uint32_t>(b, type, 8);
                        }),
                        "a row of 48 values is not a whole number of Q8_0 blocks of 32");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint64_t>(b, offset, 4); }),
                        "offset 4 is not a multiple of the alignment 32");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint64_t>(b, offset, 4096); }), "overlap");
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint64_t>(b, offset, 1u << 30); }),
                        "run past the end of the data section");
  EXPECT_ERROR_CONTAINS(error_with([](std::string& b) { b.resize(b.size() - 100); }), "the file is truncated");
  EXPECT_ERROR_CONTAINS(test::error_of_call([] { GgufFile("/nonexistent/attnlab.gguf"); }), "cannot open the file");
  EXPECT_ERROR_CONTAINS(test::error_of_call([] { GgufFile("/tmp"); }), "not a regular file");
}

}  // namespace gguf_test
