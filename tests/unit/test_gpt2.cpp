// GPT-2 checkpoints and the forward pass, against an independent NumPy implementation
// (tests/model/make_gpt2_fixtures.py): tiny models stored as F32 (with the "transformer."
// prefix), F16 (without it) and BF16; logits, every head's weights and each block's input
// within written tolerances. Then every kind of broken checkpoint, refused by name.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/generate.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/training.hpp"
#include "compare.hpp"
#include "model_fixtures.hpp"

using namespace attnlab;
using attnlab::test::all_close;
using attnlab::test::flat;
using attnlab::test::read_json;
using attnlab::test::widened;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

// The forward in f32 against NumPy's float64 on the same (stored) weights: f32 rounding of
// ~10 sums of ~16-64 terms, through two blocks. Weights are probabilities (≤ 1).
constexpr test::Tolerance kLogits{1e-4, 1e-4}, kWeights{2e-5, 0}, kBlockInputs{1e-4, 1e-4};

class Gpt2Fixture : public ::testing::TestWithParam<const char*> {};

TEST_P(Gpt2Fixture, ForwardMatchesNumPyLogitsHeadsAndBlockInputs) {
  const fs::path dir = kFixtures / GetParam();
  const json expected = read_json(dir / "expected.json");
  const Model model = load_gpt2(dir.string());
  const std::vector<int> ids = expected["ids"];
  const ForwardResult kept = model_forward(model, ids, {.keep_attention = true});
  EXPECT_TRUE(all_close(widened(kept.logits), flat(expected["logits"]), kLogits));
  ASSERT_EQ(kept.attention.size(), 2u);
  for (std::size_t l = 0; l < 2; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_TRUE(all_close(widened(kept.attention[l]), flat(expected["attention"][l]), kWeights));
    EXPECT_TRUE(all_close(widened(kept.block_inputs[l]), flat(expected["block_inputs"][l]), kBlockInputs));
  }
  // Without weights the heads go through the tiled kernel: the same logits.
  const ForwardResult tiled = model_forward(model, ids);
  EXPECT_TRUE(tiled.attention.empty()) << "no L × H × n² buffer unless asked";
  EXPECT_TRUE(tiled.block_inputs.empty()) << "nor the blocks' inputs, which only the heads' views read";
  EXPECT_THROW((void)head_attention_input(model, tiled, {0, 0}), std::logic_error);
  EXPECT_TRUE(all_close(widened(tiled.logits), flat(expected["logits"]), kLogits));
}

// A forward asked for the last position's logits, or none, computes only those: the last
// row is NumPy's last row, the weights are the same, and any other row is refused.
TEST_P(Gpt2Fixture, AForwardComputesTheLogitRowsItIsAskedFor) {
  const fs::path dir = kFixtures / GetParam();
  const json expected = read_json(dir / "expected.json");
  const Model model = load_gpt2(dir.string());
  const std::vector<int> ids = expected["ids"];
  const std::size_t n = ids.size(), vocab = model.config.vocab_size;
  const ForwardResult every = model_forward(model, ids, {.keep_attention = true});
  ASSERT_EQ(every.logits.size(), n * vocab);
  EXPECT_EQ(every.logits_from, 0u);
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_TRUE(all_close(widened(every.logits_at(i)), flat(expected["logits"][i]), kLogits)) << "row " << i;

  const ForwardResult last = model_forward(model, ids, {.logits = LogitRows::last, .keep_attention = true});
  ASSERT_EQ(last.logits.size(), vocab);
  EXPECT_EQ(last.logits_from, n - 1);
  EXPECT_TRUE(all_close(widened(last.logits_at(n - 1)), flat(expected["logits"][n - 1]), kLogits));
  EXPECT_THROW((void)last.logits_at(n - 2), std::out_of_range);
  EXPECT_THROW((void)last.logits_at(n), std::out_of_range);
  for (std::size_t l = 0; l < 2; ++l)
    EXPECT_EQ(last.attention[l], every.attention[l]) << "the blocks run as before";

  const ForwardResult none = model_forward(model, ids, {.logits = LogitRows::none});
  EXPECT_TRUE(none.logits.empty());
  EXPECT_EQ(none.logits_from, n);
  EXPECT_THROW((void)none.logits_at(n - 1), std::out_of_range);
}

TEST_P(Gpt2Fixture, EveryHeadAsTheEnginesAttentionProblemGivesTheForwardsWeights) {
  const fs::path dir = kFixtures / GetParam();
  const Model model = load_gpt2(dir.string());
  const std::vector<int> ids = read_json(dir / "expected.json")["ids"];
  const ForwardResult r = model_forward(model, ids, {.keep_attention = true});
  const std::size_t n = ids.size();
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t h = 0; h < 4; ++h) {
      SCOPED_TRACE(to_string(HeadRef{l, h}));
      const Trace trace = attend(head_attention_input(model, r, {l, h}));
      ASSERT_EQ(trace.heads.size(), 1u);
      const std::vector<float> forward(r.attention[l].begin() + static_cast<std::ptrdiff_t>(h * n * n),
                                       r.attention[l].begin() + static_cast<std::ptrdiff_t>((h + 1) * n * n));
      EXPECT_TRUE(all_close(trace.heads[0].weights.data, widened(forward), {1e-6, 0}));
      EXPECT_EQ(trace.heads[0].name, to_string(HeadRef{l, h}));
    }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Gpt2Fixture, ::testing::Values("tiny-f32", "tiny-f16-no-prefix", "tiny-bf16"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(Gpt2, SavedCheckpointsLoadBackTheSameModel) {
  const Model model = load_gpt2((kFixtures / "tiny-f32").string());
  const fs::path dir = fs::temp_directory_path() / ("attnlab-gpt2-" + std::to_string(::getpid()));
  save_gpt2(dir.string(), model, DType::f32, false);
  const Model back = load_gpt2(dir.string());
  EXPECT_EQ(back.wte.to_f32(), model.wte.to_f32());
  EXPECT_EQ(back.blocks[1].mlp_proj_weight.to_f32(), model.blocks[1].mlp_proj_weight.to_f32());
  EXPECT_EQ(back.config.n_inner, 64u);
  save_gpt2(dir.string(), model, DType::bf16, true);
  const Model rounded = load_gpt2(dir.string());
  EXPECT_EQ(rounded.stored_dtype, DType::bf16);
  EXPECT_TRUE(all_close(widened(rounded.wte.to_f32()), widened(model.wte.to_f32()), {0, 1.0 / 128}));
  fs::remove_all(dir);
}

// Found by fuzz_safetensors: an empty tensor's to_f32 passed a null pointer to memcpy
// (undefined even for 0 bytes). Each dtype gives no values, and the tensor beside it is intact.
// Writing this test found a second bug: empty tensors at the offset where "after" starts were
// refused as overlapping it, so attnlab could not read a file it had written.
TEST(Safetensors, EmptyTensorsConvertToNoValues) {
  const fs::path path = fs::temp_directory_path() / ("attnlab-empty-" + std::to_string(::getpid()) + ".safetensors");
  const std::vector<float> none, two = {1.5f, -2.0f};
  write_safetensors(path.string(), {{"f32", {0, 4}, none, DType::f32},
                                    {"f16", {3, 0}, none, DType::f16},
                                    {"bf16", {0}, none, DType::bf16},
                                    {"after", {2}, two, DType::f32}});
  const SafetensorsFile file(path.string());
  for (const char* name : {"f32", "f16", "bf16"}) {
    const TensorInfo* t = file.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->elements(), 0u) << name;
    EXPECT_EQ(t->begin, t->end) << name;
    EXPECT_TRUE(file.to_f32(*t).empty()) << name;
  }
  EXPECT_EQ(file.to_f32(*file.find("after")), two);
  fs::remove(path);
}

TEST(Gpt2, HeadNamesAreLayerDotHead) {
  EXPECT_EQ(to_string(HeadRef{5, 1}), "5.1");
  EXPECT_EQ(parse_head_ref("11.7", "--ablate"), (HeadRef{11, 7}));
  for (const char* bad : {"5", "5.", ".1", "a.b", "1.2.3", "-1.0"})
    EXPECT_THROW(parse_head_ref(bad, "--ablate"), InputError) << bad;
}

TEST(Gpt2, BadIdsAndHeadsAreRefusedNamingThem) {
  const Model model = load_gpt2((kFixtures / "tiny-f32").string());
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] {
                          model_forward(model, std::vector<int>{1, 40});
                        }),
                        "ids[1]: token id 40 is outside the vocabulary (0 to 39)");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { model_forward(model, std::vector<int>(17, 1)); }),
                        "17 tokens is more than the model's 16 positions");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] {
                          model_forward(model, std::vector<int>{1}, {.ablate = {{2, 0}}});
                        }),
                        "head 2.0 does not exist");
}

// ---- broken and hostile checkpoints -------------------------------------------------------

class BrokenCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnlab-broken-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    fs::copy_file(kFixtures / "tiny-f32" / "config.json", dir_ / "config.json");
    original_ = read_bytes(kFixtures / "tiny-f32" / "model.safetensors");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write(const fs::path& name, const std::string& bytes) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out << bytes;
  }
  // A safetensors file with this header text and `data` bytes after it.
  static std::string file_with(const std::string& header, std::size_t data) {
    std::string out(8, '\0');
    std::uint64_t length = header.size();
    std::memcpy(out.data(), &length, 8);
    return out + header + std::string(data, '\0');
  }
  std::string error() {
    return test::error_of_call([&] { load_gpt2(dir_.string()); });
  }

  fs::path dir_;
  std::string original_;
};

TEST_F(BrokenCheckpoint, TruncatedEmptyAndAbsurdLengthsAreRefused) {
  write("model.safetensors", original_.substr(0, original_.size() - 100));
  EXPECT_ERROR_CONTAINS(error(), "are not inside the data section");
  write("model.safetensors", "");
  EXPECT_ERROR_CONTAINS(error(), "0 bytes is too short for a safetensors file");
  std::string absurd = original_;
  const std::uint64_t huge = 1ull << 40;
  std::memcpy(absurd.data(), &huge, 8);
  write("model.safetensors", absurd);
  EXPECT_ERROR_CONTAINS(error(), "the header length 1099511627776 is more than the limit");
  std::string past = original_;
  const std::uint64_t beyond = original_.size();
  std::memcpy(past.data(), &beyond, 8);
  write("model.safetensors", past);
  EXPECT_ERROR_CONTAINS(error(), "runs past the end of the file");
}

TEST_F(BrokenCheckpoint, HeadersThatAreNotSafetensorsAreRefused) {
  write("model.safetensors", file_with("this is not json", 0));
  EXPECT_ERROR_CONTAINS(error(), "the header is not JSON");
  write("model.safetensors", file_with("[1, 2]", 0));
  EXPECT_ERROR_CONTAINS(error(), "the header is not a JSON object");
  write("model.safetensors", file_with(std::string(50000, '[') + std::string(50000, ']'), 0));
  EXPECT_ERROR_CONTAINS(error(), "nests deeper than 8 levels");
  write("model.safetensors", file_with(R"({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8));
  EXPECT_ERROR_CONTAINS(error(), "tensor \"a\": dtype I64 is not supported; attnlab reads F32, F16 and BF16");
  write("model.safetensors", file_with(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8));
  EXPECT_ERROR_CONTAINS(error(), "tensor \"a\": its shape needs 3 × 4 bytes but data_offsets span 8 bytes");
  write("model.safetensors", file_with(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                       12));
  EXPECT_ERROR_CONTAINS(error(), "overlap in the data section");
  write("model.safetensors",
        file_with(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})",
                  8));
  EXPECT_ERROR_CONTAINS(error(), "its shape's product overflows");
}

TEST_F(BrokenCheckpoint, MissingOrMisshapenTensorsAreRefusedByName) {
  write("model.safetensors",
        file_with(R"({"wte.weight": {"dtype": "F32", "shape": [40, 16], "data_offsets": [0, 2560]}})", 2560));
  EXPECT_ERROR_CONTAINS(error(), "tensor \"wpe.weight\" is missing");
  write("model.safetensors",
        file_with(R"({"wte.weight": {"dtype": "F32", "shape": [16, 40], "data_offsets": [0, 2560]}})", 2560));
  EXPECT_ERROR_CONTAINS(error(), "tensor \"wte.weight\" has shape [16, 40] but the config needs [40, 16]");
}

TEST_F(BrokenCheckpoint, BadConfigsAreRefusedNamingTheKey) {
  write("model.safetensors", original_);
  const json good = read_json(dir_ / "config.json");
  json c = good;
  c.erase("n_head");
  write("config.json", c.dump());
  EXPECT_ERROR_CONTAINS(error(), "\"n_head\" is missing");
  c = good;
  c["n_head"] = 3;
  write("config.json", c.dump());
  EXPECT_ERROR_CONTAINS(error(), "n_embd 16 is not divisible by n_head 3");
  c = good;
  c["n_layer"] = 100000;
  write("config.json", c.dump());
  EXPECT_ERROR_CONTAINS(error(), "\"n_layer\" must be a whole number from 1 to 256");
  write("config.json", "{not json");
  EXPECT_ERROR_CONTAINS(error(), "config.json: malformed JSON at line 1, column 3");
  fs::remove(dir_ / "config.json");
  EXPECT_ERROR_CONTAINS(error(), "config.json: cannot open the file");
  EXPECT_ERROR_CONTAINS(test::error_of_call([] { load_gpt2("/nonexistent/attnlab"); }), "not a directory");
}

}  // namespace

namespace {

// Row i of NumPy's logits for the tiny-f32 fixture.
std::vector<double> numpy_logits_row(std::size_t i) {
  return flat(read_json(kFixtures / "tiny-f32" / "expected.json")["logits"][i]);
}

}  // namespace

TEST(Decoder, TheKvCacheGivesNumPysLogitsAtEveryStep) {
  const Model model = load_gpt2((kFixtures / "tiny-f32").string());
  const std::vector<int> ids = read_json(kFixtures / "tiny-f32" / "expected.json")["ids"];
  Decoder decoder(model);
  // The prompt at once, then one token a step: each step's logits are the full pass's.
  EXPECT_TRUE(all_close(widened(decoder.step(std::span(ids).first(4))), numpy_logits_row(3), kLogits));
  for (std::size_t i = 4; i < ids.size(); ++i) {
    SCOPED_TRACE("position " + std::to_string(i));
    EXPECT_TRUE(all_close(widened(decoder.step(std::span(ids).subspan(i, 1))), numpy_logits_row(i), kLogits));
  }
  EXPECT_EQ(decoder.length(), ids.size());
  EXPECT_EQ(decoder.cache().used_bytes(), 2u * 2 * 4 * 4 * ids.size() * sizeof(float))
      << "2 (K, V) × 2 layers × 4 heads × d_head 4 × tokens × 4 bytes";
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { decoder.step(std::vector<int>(7, 1)); }),
                        "17 tokens is more than the model's 16 positions");
}

// A prompt longer than kPrefillBatch goes through the cache a batch at a time (600 tokens:
// 256, 256 and 88): its last logits and its last token's attention rows are the full
// forward's, with every key in view and with a sliding window that reaches across batches.
TEST(Decoder, APromptOfSeveralBatchesGivesTheFullForwardsLastLogitsAndRows) {
  static_assert(kPrefillBatch == 256, "600 tokens: two whole batches and a part");
  for (const std::size_t window : {0, 300}) {
    SCOPED_TRACE("sliding window " + std::to_string(window));
    const Model model = test::seeded_model("mistral", 700, window, 11);
    const ModelConfig& c = model.config;
    std::vector<int> ids(600);
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = int((i * 29 + 7) % 64);
    Decoder decoder(model);
    decoder.keep_weights(true);
    const std::vector<float> logits = decoder.step(ids);
    const ForwardResult full = model_forward(model, ids, {.logits = LogitRows::last, .keep_attention = true});
    EXPECT_TRUE(all_close(logits, std::vector<float>(full.logits.begin(), full.logits.end()), {1e-5, 1e-4}));
    EXPECT_EQ(decoder.length(), 600u);
    const std::size_t n = ids.size();
    for (std::size_t l = 0; l < c.n_layer; ++l)
      for (std::size_t h = 0; h < c.n_head; ++h) {
        const float* row = full.attention[l].data() + (h * n + n - 1) * n;
        const float* cached = decoder.last_weights()[l].data() + h * n;
        EXPECT_TRUE(all_close(std::vector<float>(cached, cached + n), std::vector<float>(row, row + n), {1e-6, 1e-4}))
            << "layer " << l << " head " << h;
      }
  }
}

TEST(Decoder, GreedyGenerationThroughTheCacheEqualsRerunningTheFullForward) {
  const Model model = load_gpt2((kFixtures / "tiny-bf16").string());
  const std::size_t vocab = model.config.vocab_size;
  std::vector<int> cached{3, 17, 5}, rerun = cached;
  Decoder decoder(model);
  std::vector<float> logits = decoder.step(cached);
  for (int step = 0; step < 10; ++step) {
    cached.push_back(top_k(logits, 1)[0].id);
    logits = decoder.step(std::span(cached).last(1));
    const ForwardResult full = model_forward(model, rerun);
    rerun.push_back(top_k(std::span<const float>(full.logits).last(vocab), 1)[0].id);
  }
  EXPECT_EQ(cached, rerun);
}

// Nucleus sampling by its definition: logits 3, 2, 1, 0 give probabilities 0.644, 0.237,
// 0.087, 0.032 (T = 1). top_p 0.5 keeps the first token alone (0.644 ≥ 0.5); 0.8 the first
// two (0.644 < 0.8 ≤ 0.881), drawn in proportion 0.644 : 0.237; 1 all four.
TEST(Generate, TopPKeepsTheFewestMostProbableTokensWhoseProbabilitiesReachP) {
  const std::vector<float> logits{1.0f, 3.0f, 0.0f, 2.0f};  // token 1 first, then 3, 0, 2
  std::vector<double> p{std::exp(1.0), std::exp(3.0), 1.0, std::exp(2.0)};
  const double sum = p[0] + p[1] + p[2] + p[3];
  for (double& x : p)
    x /= sum;
  const auto draws = [&](double top_p) {
    SplitMix64 rng(7);
    std::vector<int> counts(4, 0);
    for (int k = 0; k < 4000; ++k)
      ++counts[static_cast<std::size_t>(next_token(logits, 1.0, 0, top_p, rng))];
    return counts;
  };
  EXPECT_EQ(draws(0.5), (std::vector<int>{0, 4000, 0, 0}));
  const std::vector<int> two = draws(0.8);
  EXPECT_EQ(two[0] + two[2], 0) << "outside the nucleus";
  EXPECT_NEAR(two[1] / 4000.0, p[1] / (p[1] + p[3]), 0.03);  // 0.731; 4000 draws: sd 0.007
  const std::vector<int> all = draws(1.0);
  for (std::size_t t = 0; t < 4; ++t)
    EXPECT_NEAR(all[t] / 4000.0, p[t], 0.03) << "token " << t;
  EXPECT_EQ(draws(1.0), all) << "seeded";
  const Model model = load_gpt2((kFixtures / "tiny-f32").string());
  for (double bad : {0.0, -0.5, 1.5})
    EXPECT_ERROR_CONTAINS(
        test::error_of_call([&] { generate(model, std::vector<int>{3}, {.temperature = 1, .top_p = bad}); }),
        "top_p: must be more than 0 and at most 1");
}

TEST(Gpt2, NextTokenLossIsTheCrossEntropyOfNumPysLogits) {
  const Model model = load_gpt2((kFixtures / "tiny-f32").string());
  const std::vector<int> ids = read_json(kFixtures / "tiny-f32" / "expected.json")["ids"];
  double expected = 0;
  for (std::size_t i = 2; i < 7; ++i) {  // positions 2..6 predicting ids[3..7]
    const std::vector<double> row = numpy_logits_row(i);
    double sum = 0;
    for (double x : row)
      sum += std::exp(x);
    expected += std::log(sum) - row[static_cast<std::size_t>(ids[i + 1])];
  }
  expected /= 5;
  EXPECT_NEAR(next_token_loss(model_forward(model, ids), ids, 2, 7), expected, 1e-4);
}

TEST(Gpt2, TopKIsTheSoftmaxsLargestInOrder) {
  const std::vector<float> logits{0.0f, 2.0f, 1.0f, 2.0f};
  const std::vector<TokenProbability> top = top_k(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1) << "ties go to the lower id";
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 2);
  const double total = 1 + 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(top[0].probability, std::exp(2.0) / total, 1e-12);
  EXPECT_NEAR(top[2].probability, std::exp(1.0) / total, 1e-12);
}

// The logits of a long text live on huge pages: a block of them from 4 MiB up starts on a
// 2 MiB boundary, is madvised for transparent huge pages (/proc/self/smaps: THPeligible) and
// holds what is written into it; so do the whole 2 MiB pages of a block's large temporaries.
// (Whether the kernel then hands out huge pages depends on its memory; that it may is what is
// checked.)
namespace {
bool thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long first = 0, last = 0;
    char dash = 0;
    if (std::istringstream range(line); std::isxdigit(static_cast<unsigned char>(line[0])) &&
                                        (range >> std::hex >> first >> dash >> last) && dash == '-') {
      inside = first <= at && at < last;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return line.find('1') != std::string::npos;
  }
  return false;
}
}  // namespace

// Below huge pages' size, UnsetAllocator's buffers start on a cache line (where malloc's
// start 16 bytes into one): the bf16 products' x is read by AMX's tiles a row at a time.
TEST(Gpt2, SmallerUnsetBuffersStartOnCacheLines) {
  for (const std::size_t count : {1, 3, 17, 1000, 100000}) {
    std::vector<std::uint16_t, UnsetAllocator<std::uint16_t>> held[4];  // several, so malloc's order cannot hide it
    for (auto& v : held) {
      v.resize(count);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % kUnsetAlignment, 0u) << count;
    }
  }
}

TEST(Gpt2, LogitsAndBlockBuffersFromFourMebibytesUpLieOnHugePages) {
  Logits large(std::size_t(5) << 20);  // 20 MiB of floats
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % (std::size_t(2) << 20), 0u);
  for (std::size_t i = 0; i < large.size(); i += 1000)
    large[i] = static_cast<float>(i);
  EXPECT_EQ(large[large.size() / 1000 * 1000 - 1000], static_cast<float>(large.size() / 1000 * 1000 - 1000));
  Logits copy = large;
  EXPECT_EQ(copy[5000], 5000.0f);
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes((std::istreambuf_iterator<char>(mode)), std::istreambuf_iterator<char>());
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "this kernel gives no transparent huge pages (" << modes
                 << "); the alignment and the contents were checked";
  EXPECT_TRUE(thp_eligible(large.data())) << "the logits' memory was not madvised for huge pages";
  EXPECT_TRUE(thp_eligible(copy.data()));

  // A block's temporaries come from std::vector: advised before they are touched, the whole
  // 2 MiB pages inside them may be huge.
  std::vector<float> block;
  block.reserve(std::size_t(3) << 20);  // 12 MiB
  advise_huge_pages(block.data(), block.capacity() * sizeof(float));
  const std::uintptr_t inside =
      (reinterpret_cast<std::uintptr_t>(block.data()) + (std::size_t(4) << 20)) & ~((std::size_t(2) << 20) - 1);
  EXPECT_TRUE(thp_eligible(reinterpret_cast<const void*>(inside)));
}

TEST(Gpt2, ForwardFlopsCountEveryMultiplyAdd) {
  const ModelConfig gpt2_small{12, 12, 768, 1024, 50257, 3072, 1e-5};
  // 12 layers × (2·1024·(768·2304 + 768·768 + 2·768·3072) + 4·768·1024·1025/2) + 2·1024·768·50257
  const double expected =
      12 * (2.0 * 1024 * (768.0 * 2304 + 768.0 * 768 + 2 * 768.0 * 3072) + 4 * 768.0 * 1024 * 1025 / 2) +
      2.0 * 1024 * 768 * 50257;
  EXPECT_DOUBLE_EQ(forward_flops(gpt2_small, 1024), expected);
}

// ---- a real GPT-2, when the user has one ---------------------------------------------------
// Set ATTNLAB_GPT2_DIR to a directory holding Hugging Face's gpt2 (config.json,
// model.safetensors, vocab.json, merges.txt; docs/models.md says how to get them).
// What is checked is what the literature reports of GPT-2 small: head 4.11 is a
// previous-token head, and layers 5 to 7 hold induction heads (5.1, 5.5, 6.9, 7.2, 7.10).
TEST(RealGpt2, LoadsAndItsKnownHeadsAreFound) {
  const char* dir = std::getenv("ATTNLAB_GPT2_DIR");
  if (!dir) GTEST_SKIP() << "ATTNLAB_GPT2_DIR is not set: no real GPT-2 to check (nothing is downloaded)";
  const ModelDir m = open_model_dir(dir);
  ASSERT_EQ(m.model.config.n_layer, 12u) << "these checks are for GPT-2 small";
  EXPECT_EQ(m.model.config.parameters(), 124'439'808u);
  ASSERT_TRUE(m.tokenizer);
  EXPECT_EQ(encode_text(m, "Hello world"), (std::vector<int>{15496, 995}));
  const std::vector<HeadScores> scores = detect_heads(m.model, default_detector_sequences(m.model.config, 0, 2));
  EXPECT_GT(scores[4 * 12 + 11].previous_token, 0.5) << "head 4.11";
  double best_induction = 0;
  for (const HeadScores& s : scores)
    if (s.head.layer >= 5 && s.head.layer <= 7) best_induction = std::max(best_induction, s.induction);
  EXPECT_GT(best_induction, 0.5) << "an induction head in layers 5-7";
}

TEST(Gpt2, AForwardThatWouldNotFitIsRefusedBeforeItRuns) {
  // A vocabulary of 2^20 and 2,048 positions: 2,048 tokens would need 2^31 logits (8 GiB).
  const ModelConfig c{1, 1, 4, 2048, std::size_t{1} << 20, 16, 1e-5};
  const Model model = unflatten(c, std::vector<float>(parameter_count(c), 0.0f));
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { model_forward(model, std::vector<int>(2048, 1)); }),
                        "2048 tokens × a vocabulary of 1048576 is more logits than the limit");
  EXPECT_EQ(model_forward(model, std::vector<int>(8, 1)).logits.size(), 8u << 20) << "a short input runs";
}
