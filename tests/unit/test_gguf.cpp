// GGUF files (attnlab/model/gguf.hpp) against tests/model/make_gguf_fixtures.py, an
// independent NumPy writer and dequantizer written from ggml's block definitions: every
// metadata value type, versions 2 and 3, every tensor type attnlab reads dequantized to the
// NumPy values; then every kind of broken file, refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "attnlab/analysis/memory.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/gguf.hpp"
#include "attnlab/model/model.hpp"
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

// A Llama file's q and k rows are copied into transformers' order; the reader then gives the
// file's pages of them back (MappedFile::release_pages), so they are not held twice. Pages
// given back leave the resident memory and read back the same from the file; a range outside
// the mapping, or within one page, is left alone.
TEST(MappedFile, ReleasedPagesLeaveResidentMemoryAndReadBackTheSame) {
  const fs::path path = fs::temp_directory_path() / ("attnlab-release-" + std::to_string(::getpid()));
  constexpr std::size_t kBytes = std::size_t(8) << 20;
  {
    std::vector<unsigned char> bytes(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i)
      bytes[i] = static_cast<unsigned char>(i * 131 + i / 4099);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), kBytes);
  }
  const MappedFile file(path.string());
  const auto checksum = [&] {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < kBytes; ++i)
      sum = sum * 31 + std::to_integer<unsigned>(file.data()[i]);
    return sum;
  };
  const std::uint64_t read = checksum();  // every page resident
  const std::size_t before = memory::resident_bytes();
  file.release_pages({file.data() + (std::size_t(1) << 20) + 1, std::size_t(6) << 20});
  const std::size_t after = memory::resident_bytes();
  if (before > 0) EXPECT_GE(before - std::min(before, after), std::size_t(5) << 20) << "6 MiB less a page given back";
  EXPECT_EQ(checksum(), read) << "read again from the file";
  const std::byte outside[64]{};
  file.release_pages(outside);                  // not this mapping's: ignored
  file.release_pages({file.data() + 10, 100});  // no whole page inside
  EXPECT_EQ(checksum(), read);
  fs::remove(path);
}

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

TEST_F(BrokenGguf, MetadataIsPricedByItsValuesNotOnlyItsBytes) {
  // One entry (a value), an array of `limit` u8 values: 8 MiB in the file, but over 100 MiB as
  // parsed values. Refused before the values are read.
  std::string bytes("GGUF", 4);
  const auto append = [&](auto value) { bytes.append(reinterpret_cast<const char*>(&value), sizeof value); };
  append(std::uint32_t{3});
  append(std::uint64_t{0});  // tensors
  append(std::uint64_t{1});  // metadata entries
  append(std::uint64_t{3});
  bytes += "big";
  append(std::uint32_t{9});  // an array
  append(std::uint32_t{0});  // of u8
  append(std::uint64_t{kMaxGgufMetadataValues});
  bytes.resize(bytes.size() + kMaxGgufMetadataValues, '\0');
  std::ofstream(path_, std::ios::binary) << bytes;
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { GgufFile file(path_.string()); }),
                        "metadata \"big\": the metadata holds more than 8388608 values");
}

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
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { b[first_tensor_info() + 8] = '\xFF'; }),
                        "tensor 0's name is not UTF-8");
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
  EXPECT_ERROR_CONTAINS(error_with([&](std::string& b) { put<std::uint32_t>(b, type, 10); }),
                        "type Q2_K is not one attnlab reads");
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

namespace gguf_test {

// ---- models ----------------------------------------------------------------------------------

struct GgufModelCase {
  const char* gguf;
  const char* folder;  // the same weights as a Hugging Face folder
  double tolerance;    // on the logits and every head's weights, relative to the largest logit
};

class GgufModels : public ::testing::TestWithParam<GgufModelCase> {};

// The forward on a GGUF equals the forward on the same weights from safetensors: to f32's
// rounding where the file is lossless (F32; F16 from an F16 folder), within Q8_0's error
// otherwise; a llama file's reordered q and k rows put back, so every head attends the same.
TEST_P(GgufModels, TheForwardEqualsTheSafetensorsFolders) {
  const GgufModelCase& p = GetParam();
  const Model gguf = load_model((kGguf / p.gguf).string());
  const fs::path folder = fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / p.folder;
  Model reference = load_model(folder.string());
  json a_config = config_json(gguf.config), b_config = config_json(reference.config);
  if (std::string(p.gguf) == "gemma3-f32.gguf") {
    // A GGUF file has no query_pre_attn_scalar: llama.cpp scales Gemma 3's scores by
    // head_dim^-½ (the fixture's config says 12, not head_dim 8), and stores the norms as
    // the 1 + w they apply.
    reference.config.query_scale = 1 / std::sqrt(double(reference.config.head_dim()));
    EXPECT_TRUE(reference.config.norm_plus_one);
    EXPECT_FALSE(gguf.config.norm_plus_one);
    a_config.erase("norm"), b_config.erase("norm");
  }
  if (std::string(p.gguf) == "llama-q8_0.gguf") {
    // The forward of its values as NumPy dequantizes them: to f32's rounding, and where the CPU
    // has AVX-512 VNNI within what a prompt's int8 products hold of x (matvec.hpp's int8_gemm:
    // each 32 values within 2^-15 of their largest; through the layers, 3e-4 of these logits).
    const Model dequantized = load_model((kGguf / "llama-q8_0-dequantized.gguf").string());
    const std::vector<int> some = {1, 7, 3, 30, 2};
    const double close = best_isa() == Isa::avx512_bf16 ? 2e-3 : 1e-5;
    EXPECT_TRUE(test::all_close(test::widened(model_forward(gguf, some).logits),
                                test::widened(model_forward(dequantized, some).logits), {close, close}));
    EXPECT_EQ(gguf.stored_type, GgmlType::q8_0);
    EXPECT_LT(gguf.weight_bytes(), reference.weight_bytes() / 3) << "Q8_0 kept quantized: 34 bytes per 32 values";
  }
  // The same config (Llama 3's scaling comes as the file's rope_freqs: the same frequencies).
  a_config.erase("rope_scaling"), b_config.erase("rope_scaling");
  EXPECT_EQ(a_config, b_config);
  EXPECT_TRUE(test::all_close(rope_frequencies(gguf.config, 0), rope_frequencies(reference.config, 0), {0, 1e-6}));
  EXPECT_FALSE(gguf.blocks[0].mlp_fc_weight.owned()) << "viewed in the file, in its type";
  const std::vector<int> ids = test::read_json(folder / "expected.json")["ids"];
  const ForwardResult a = model_forward(gguf, ids, {.keep_attention = true});
  const ForwardResult b = model_forward(reference, ids, {.keep_attention = true});
  double largest = 0;
  for (float x : b.logits)
    largest = std::max(largest, double(std::abs(x)));
  EXPECT_TRUE(test::all_close(test::widened(a.logits), test::widened(b.logits), {p.tolerance * largest, 0}));
  double worst = 0;
  for (std::size_t i = 0; i < a.logits.size(); ++i)
    worst = std::max(worst, std::abs(double(a.logits[i]) - b.logits[i]) / largest);
  std::cout << p.gguf << ": largest logit difference " << worst << " of the largest logit\n";
  for (std::size_t l = 0; l < a.attention.size(); ++l)
    EXPECT_TRUE(test::all_close(test::widened(a.attention[l]), test::widened(b.attention[l]), {p.tolerance, 0}))
        << "layer " << l;
}

INSTANTIATE_TEST_SUITE_P(Families, GgufModels,
                         ::testing::Values(GgufModelCase{"llama-f32.gguf", "llama-f32", 1e-5},
                                           // Q8_0's own error against the f32 weights (measured 2.2%)
                                           GgufModelCase{"llama-q8_0.gguf", "llama-f32", 5e-2},
                                           GgufModelCase{"qwen2-f16.gguf", "qwen2-f16", 1e-5},
                                           GgufModelCase{"qwen3-f32.gguf", "qwen3-f32-sharded", 1e-5},
                                           GgufModelCase{"gemma3-f32.gguf", "gemma3-f32", 1e-5},
                                           GgufModelCase{"mistral-f32.gguf", "mistral-f32", 1e-5}),
                         [](const auto& info) {
                           std::string name = info.param.gguf;
                           name = name.substr(0, name.find('.'));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace gguf_test

// ---- the tokenizer in the metadata ------------------------------------------------------------
// (Real tokenizers, written as GGUF metadata by tests/model/gguf_tokenizer_writer.js, are
// compared with their tokenizer.json in tests/model/*.test.js.)

namespace gguf_test {

// A GGUF v3 file with no tensors and these metadata entries, each (key, type, value bytes).
struct Entry {
  std::string key;
  std::uint32_t type;
  std::string value;
};
template <class T>
std::string raw(T value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}
std::string gguf_string(std::string_view s) { return raw(std::uint64_t(s.size())) + std::string(s); }
Entry text(std::string key, std::string_view value) { return {std::move(key), 8, gguf_string(value)}; }
Entry strings(std::string key, const std::vector<std::string>& values) {
  std::string out = raw(std::uint32_t{8}) + raw(std::uint64_t(values.size()));
  for (const std::string& v : values)
    out += gguf_string(v);
  return {std::move(key), 9, out};
}
Entry floats(std::string key, const std::vector<float>& values) {
  std::string out = raw(std::uint32_t{6}) + raw(std::uint64_t(values.size()));
  for (float v : values)
    out += raw(v);
  return {std::move(key), 9, out};
}
Entry id(std::string key, std::uint32_t value) { return {std::move(key), 4, raw(value)}; }

BpeTokenizer tokenizer_of(const std::vector<Entry>& entries) {
  std::string bytes = "GGUF" + raw(std::uint32_t{3}) + raw(std::uint64_t{0}) + raw(std::uint64_t(entries.size()));
  for (const Entry& e : entries)
    bytes += gguf_string(e.key) + raw(e.type) + e.value;
  bytes.resize((bytes.size() + 31) / 32 * 32, '\0');
  const fs::path path = fs::temp_directory_path() / ("attnlab-tokenizer-" + std::to_string(::getpid()) + ".gguf");
  std::ofstream(path, std::ios::binary) << bytes;
  const GgufFile file(path.string());
  fs::remove(path);
  return BpeTokenizer::from_gguf(file);
}

}  // namespace gguf_test

TEST(GgufTokenizer, SentencePieceScoresRankTheMerges) {
  using namespace gguf_test;
  // "▁ab" can be made as "▁a" + "b" or "▁" + "ab"; "ab" scores higher than "▁a", so "a b"
  // merges first and "▁ab" comes from "▁" + "ab". Both ways give one token here; "▁ac" shows
  // the order: "▁a" is there, so "▁a" + "c".
  const BpeTokenizer t =
      tokenizer_of({text("tokenizer.ggml.model", "llama"),
                    strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "▁", "a", "b", "c", "ab", "▁a", "▁ab", "▁ac"}),
                    floats("tokenizer.ggml.scores", {0, 0, -1, -1, -1, -1, -2, -3, -4, -5}),
                    id("tokenizer.ggml.bos_token_id", 1), id("tokenizer.ggml.unknown_token_id", 0)});
  EXPECT_EQ(t.encode("ab"), std::vector<TokenId>{8});
  EXPECT_EQ(t.encode("ac"), std::vector<TokenId>{9});
  EXPECT_EQ(t.encode("ba"), (std::vector<TokenId>{2, 4, 3})) << "\"▁\" is put first; \"▁b\" is no token";
  EXPECT_EQ(t.bos(), std::optional<TokenId>(1)) << "a SentencePiece model adds BOS unless add_bos_token says not";
  EXPECT_EQ(t.decode(t.encode("ab ac")), "ab ac");
  EXPECT_EQ(t.source(), "GGUF metadata");
}

TEST(GgufTokenizer, MetadataThatIsNotATokenizerIsRefusedNamingTheKey) {
  using namespace gguf_test;
  const auto error = [](const std::vector<Entry>& entries) {
    return test::error_of_call([&] { (void)tokenizer_of(entries); });
  };
  const Entry tokens = strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  EXPECT_ERROR_CONTAINS(error({text("tokenizer.ggml.model", "bert"), tokens}),
                        "metadata \"tokenizer.ggml.model\" is \"bert\"; attnlab reads \"gpt2\"");
  EXPECT_ERROR_CONTAINS(error({text("tokenizer.ggml.model", "llama"), tokens}),
                        "metadata \"tokenizer.ggml.scores\" is missing");
  EXPECT_ERROR_CONTAINS(error({text("tokenizer.ggml.model", "llama"), tokens, floats("tokenizer.ggml.scores", {0})}),
                        "\"tokenizer.ggml.scores\" must be an array of 3 values, one per token");
  EXPECT_ERROR_CONTAINS(error({text("tokenizer.ggml.model", "gpt2"), tokens, text("tokenizer.ggml.pre", "falcon"),
                               strings("tokenizer.ggml.merges", {"a b"})}),
                        "\"tokenizer.ggml.pre\" is \"falcon\", a pre-tokenizer attnlab does not know; it knows "
                        "\"gpt-2\" (GPT-2), \"llama-bpe\" (Llama 3)");
  EXPECT_ERROR_CONTAINS(error({text("tokenizer.ggml.model", "gpt2"), strings("tokenizer.ggml.tokens", {"a", "a"}),
                               strings("tokenizer.ggml.merges", {})}),
                        "holds the same token twice");
  EXPECT_ERROR_CONTAINS(
      error({text("tokenizer.ggml.model", "gpt2"), tokens, strings("tokenizer.ggml.merges", {"a c"})}),
      "model.merges[0]");
  EXPECT_ERROR_CONTAINS(error({text("tokenizer.ggml.model", "gpt2"), tokens, strings("tokenizer.ggml.merges", {}),
                               id("tokenizer.ggml.bos_token_id", 3)}),
                        "\"tokenizer.ggml.bos_token_id\" must be a token id from 0 to 2");
}

// ---- writing ---------------------------------------------------------------------------------

namespace gguf_test {

fs::path exported(const std::string& folder, GgmlType type, const std::string& tokenizer_dir = "") {
  const fs::path out =
      fs::temp_directory_path() / fmt::format("attnlab-export-{}-{}-{}.gguf", folder, ggml_type_name(type), getpid());
  (void)save_gguf(out.string(), load_model((gguf_test::kGguf.parent_path() / folder).string()), type, tokenizer_dir);
  return out;
}

}  // namespace gguf_test

class GgufExportMatchesNumPy : public ::testing::TestWithParam<std::tuple<const char*, GgmlType, const char*>> {};

// save_gguf writes what the independent NumPy converter (make_gguf_fixtures.py, written
// from llama.cpp's converter) wrote for the same folder: every tensor's name, dims, type and
// bytes (Q8_0 blocks quantized to the same bytes; a llama's q and k rows in the same order),
// and the same architecture metadata.
TEST_P(GgufExportMatchesNumPy, EveryTensorAndTheArchitecturesMetadata) {
  const auto [folder, type, fixture] = GetParam();
  const fs::path path = gguf_test::exported(folder, type);
  const GgufFile ours(path.string()), theirs((gguf_test::kGguf / fixture).string());
  ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
  for (const GgufTensor& t : theirs.tensors()) {
    const GgufTensor* o = ours.find(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(o->dims, t.dims) << t.name;
    EXPECT_EQ(o->type, t.type) << t.name;
    const std::span<const std::byte> a = ours.bytes(*o), b = theirs.bytes(t);
    if (t.name == "rope_freqs.weight") {  // Llama 3's divisors: computed in double here, in f32 there
      std::vector<float> x(t.elements()), y(t.elements());
      dequantize(o->type, a.data(), x.size(), x.data());
      dequantize(t.type, b.data(), y.size(), y.data());
      for (std::size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], y[i], 1e-6 * std::abs(y[i])) << i;
      continue;
    }
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << t.name << ": the same bytes";
  }
  const std::string arch = theirs.metadata()["general.architecture"];
  for (const auto& [key, value] : theirs.metadata().items())
    if (key.starts_with(arch + ".")) EXPECT_EQ(ours.metadata().value(key, json()), value) << key;
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Families, GgufExportMatchesNumPy,
                         ::testing::Values(std::tuple{"llama-f32", GgmlType::f32, "llama-f32.gguf"},
                                           std::tuple{"llama-f32", GgmlType::q8_0, "llama-q8_0.gguf"},
                                           std::tuple{"qwen2-f16", GgmlType::f16, "qwen2-f16.gguf"},
                                           std::tuple{"qwen3-f32-sharded", GgmlType::f32, "qwen3-f32.gguf"}),
                         [](const auto& info) {
                           return std::string(std::get<2>(info.param)).substr(0, 5) +
                                  std::string(ggml_type_name(std::get<1>(info.param)));
                         });

TEST(GgufExport, F32RoundTripsGiveTheFoldersLogits) {
  // Exactly, but for Llama 3's scaling, which the file holds as f32 divisors of the
  // frequencies (rope_freqs) rather than as its formula, and for GPT-2, whose folder holds its
  // matrices as [in × out] and the file as [out × in]: OpenBLAS's AVX-512 kernels sum the two
  // layouts' products in different orders (a last-bit difference; its Haswell kernels do not).
  const std::vector<int> ids = {1, 5, 9, 2, 7, 3};
  for (const auto& [folder, bound] : {std::pair{"tiny-f32", 1e-6}, {"qwen3-f32-sharded", 0.0}, {"llama-f32", 1e-6}}) {
    SCOPED_TRACE(folder);
    const fs::path path = gguf_test::exported(folder, GgmlType::f32);
    const Model file = load_model(path.string());
    const Model original = load_model((gguf_test::kGguf.parent_path() / folder).string());
    EXPECT_EQ(config_json(file.config)["parameters"], config_json(original.config)["parameters"]);
    const Logits a = model_forward(file, ids).logits, b = model_forward(original, ids).logits;
    ASSERT_EQ(a.size(), b.size());
    float largest = 0;
    for (float x : b)
      largest = std::max(largest, std::abs(x));
    for (std::size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], bound * largest) << i;
    fs::remove(path);
  }
}

TEST(GgufExport, Q8_0RoundTripsWithinTheQuantizationsError) {
  // Rows of 16 (the tiny GPT-2's d_model) are not whole Q8_0 blocks: those matrices stay F16.
  const std::vector<int> ids = {1, 5, 9, 2, 7, 3};
  for (const char* folder : {"tiny-f32", "llama-f32"}) {
    SCOPED_TRACE(folder);
    const fs::path path = gguf_test::exported(folder, GgmlType::q8_0);
    const Logits a = model_forward(load_model(path.string()), ids).logits,
                 b = model_forward(load_model((gguf_test::kGguf.parent_path() / folder).string()), ids).logits;
    float largest = 0, differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      largest = std::max(largest, std::abs(b[i]));
      differ = std::max(differ, std::abs(a[i] - b[i]));
    }
    EXPECT_GT(differ, 0.0f) << "quantized";
    EXPECT_LT(differ, 0.05f * largest);
    fs::remove(path);
  }
}

TEST(GgufExport, AModelOfAnotherKindIsRefusedNamingIt) {
  EXPECT_ERROR_CONTAINS(test::error_of_call([] { (void)gguf_test::exported("gemma3-f32", GgmlType::f32); }),
                        "attnlab writes GGUF for GPT-2, Llama, Qwen2 and Qwen3 models; this is gemma3");
  EXPECT_ERROR_CONTAINS(test::error_of_call([] { (void)gguf_test::exported("llama-f32", GgmlType::q4_k); }),
                        "f32, f16 or q8_0");
}
