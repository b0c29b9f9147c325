// The one transformer on every Llama-style family, against an independent NumPy
// implementation written from transformers' modeling files (tests/model/make_family_fixtures.py):
// Llama 3 (grouped-query, llama3 RoPE scaling, untied), SmolLM-style (multi-query, tied, BF16),
// Qwen2 (q/k/v biases, F16), Qwen3 (QK-norm, head_dim ≠ d_model / H, linear scaling, two
// shards), Mistral (sliding window) and Gemma 3 (1 + w RMSNorm, four norms per block, GeGLU,
// √d_model embedding scale, query_pre_attn_scalar, local and global layers with their own θ).
// Logits, every head's weights and each layer's normed input; the KV-cache decoder's logits at
// every step; then broken configs and checkpoints, refused by name.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "attnlab/analysis/model_head.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/report/explain.hpp"
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

const fs::path kFamilyFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

// f32 against NumPy's float64 on the same stored weights, through two or three blocks.
constexpr test::Tolerance kFamilyLogits{2e-4, 2e-4}, kFamilyWeights{2e-5, 0}, kFamilyInputs{1e-4, 1e-4};

struct FamilyCase {
  const char* dir;
  Family family;
};

void PrintTo(const FamilyCase& c, std::ostream* os) { *os << c.dir; }

class FamilyFixture : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(FamilyFixture, ForwardMatchesNumPyLogitsEveryHeadAndEachLayersInput) {
  const fs::path dir = kFamilyFixtures / GetParam().dir;
  const json expected = read_json(dir / "expected.json");
  const Model model = load_model(dir.string());
  EXPECT_EQ(model.config.family, GetParam().family);
  const std::vector<int> ids = expected["ids"];
  const ForwardResult kept = model_forward(model, ids, {.keep_attention = true});
  EXPECT_TRUE(all_close(widened(kept.logits), flat(expected["logits"]), kFamilyLogits));
  ASSERT_EQ(kept.attention.size(), expected["attention"].size());
  for (std::size_t l = 0; l < kept.attention.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_TRUE(all_close(widened(kept.attention[l]), flat(expected["attention"][l]), kFamilyWeights));
    EXPECT_TRUE(all_close(widened(kept.block_inputs[l]), flat(expected["block_inputs"][l]), kFamilyInputs));
  }
  // Without weights the heads go through the tiled kernel (grouped KV heads, windows, the
  // family's scale): the same logits.
  const ForwardResult tiled = model_forward(model, ids);
  EXPECT_TRUE(all_close(widened(tiled.logits), flat(expected["logits"]), kFamilyLogits));
}

TEST_P(FamilyFixture, TheDecodersLogitsAtEveryStepAreNumPysAtThatPosition) {
  const fs::path dir = kFamilyFixtures / GetParam().dir;
  const json expected = read_json(dir / "expected.json");
  const Model model = load_model(dir.string());
  const std::vector<int> ids = expected["ids"];
  const std::size_t vocab = model.config.vocab_size;
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Decoder decoder(model, cache_type(dtype));
    // The first three tokens as one prompt step, then one token per step.
    std::vector<float> logits = decoder.step(std::span(ids).first(3));
    for (std::size_t i = 3;; ++i) {
      SCOPED_TRACE("position " + std::to_string(i - 1));
      const std::vector<double> numpy = flat(expected["logits"][i - 1]);
      // A bf16 cache rounds each key and value to 8 bits of mantissa.
      const test::Tolerance tolerance = dtype == DType::f32 ? kFamilyLogits : test::Tolerance{5e-2, 5e-2};
      EXPECT_TRUE(all_close(widened(logits), numpy, tolerance));
      if (i == ids.size()) break;
      logits = decoder.step(std::span(ids).subspan(i, 1));
    }
    EXPECT_EQ(decoder.length(), ids.size());
    EXPECT_EQ(decoder.cache().kv_heads(), model.config.kv_heads()) << "the cache holds H_kv heads, not H";
    EXPECT_EQ(logits.size(), vocab);
  }
}

TEST_P(FamilyFixture, HeadDetectorsScoreEveryQueryHead) {
  const Model model = load_model((kFamilyFixtures / GetParam().dir).string());
  const std::vector<HeadScores> scores = detect_heads(model, default_detector_sequences(model.config, 1));
  EXPECT_EQ(scores.size(), model.config.n_layer * model.config.n_head);
  for (const HeadScores& s : scores) {
    EXPECT_GE(s.previous_token, 0.0);
    EXPECT_LE(s.previous_token, 1.0 + 1e-9);
  }
}

// A rotary head as the engine's own attention problem (explain, the maths panel, the probe):
// its normed input, its slices of W_Q, W_K, W_V (the shared KV head's), its QK-norm weights
// (Qwen3, Gemma 3's 1 + w), the model's rotation, score scale and window; the engine's
// weights are the forward's, for every head of every family.
TEST_P(FamilyFixture, EveryHeadAsTheEnginesAttentionProblemGivesTheForwardsWeights) {
  const Model model = load_model((kFamilyFixtures / GetParam().dir).string());
  const ModelConfig& c = model.config;
  const std::vector<int> ids = read_json(kFamilyFixtures / GetParam().dir / "expected.json")["ids"];
  const ForwardResult r = model_forward(model, ids, {.keep_attention = true});
  const std::size_t n = ids.size();
  for (std::size_t l = 0; l < c.n_layer; ++l)
    for (std::size_t h = 0; h < c.n_head; ++h) {
      SCOPED_TRACE(to_string(HeadRef{l, h}));
      const Scenario s = model_head_scenario(model, r, std::vector<std::string>(n, "t"), {l, h});
      // Through the scenario document and back, as the lab sends it to the page.
      const Scenario again = scenario_from_json(scenario_to_json(s));
      for (const Scenario* scenario : {&s, &again}) {
        const Trace trace = run_scenario(*scenario);
        ASSERT_EQ(trace.heads.size(), 1u);
        const std::vector<float> forward(r.attention[l].begin() + static_cast<std::ptrdiff_t>(h * n * n),
                                         r.attention[l].begin() + static_cast<std::ptrdiff_t>((h + 1) * n * n));
        EXPECT_TRUE(all_close(trace.heads[0].weights.data, widened(forward), {1e-5, 0}));
        EXPECT_EQ(scenario->heads[0].q_norm.empty(), !c.qk_norm);
        EXPECT_EQ(scenario->score_scale, c.query_scale);
        // The worked example says what the head does that the formula's default does not.
        const std::string text = explain(*scenario, trace, {});
        EXPECT_EQ(text.find("QK-norm") != std::string::npos, c.qk_norm) << text.substr(0, 600);
        EXPECT_EQ(text.find("the model's score scale") != std::string::npos, c.query_scale > 0);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Families, FamilyFixture,
    ::testing::Values(FamilyCase{"llama-f32", Family::llama}, FamilyCase{"smollm-bf16", Family::llama},
                      FamilyCase{"qwen2-f16", Family::qwen2}, FamilyCase{"qwen3-f32-sharded", Family::qwen3},
                      FamilyCase{"mistral-f32", Family::mistral}, FamilyCase{"gemma3-f32", Family::gemma3}),
    [](const auto& info) {
      std::string name = info.param.dir;
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

// What each family reads from its config, as transformers writes it.
TEST(Families, ConfigsSayEachFamilysChoices) {
  const ModelConfig llama = load_model((kFamilyFixtures / "llama-f32").string()).config;
  EXPECT_TRUE(llama.rotary && !llama.tied && llama.rope.scaling == RopeScaling::llama3);
  EXPECT_EQ(llama.kv_heads(), 2u);
  EXPECT_EQ(llama.mlp, MlpKind::swiglu);
  const ModelConfig qwen3 = load_model((kFamilyFixtures / "qwen3-f32-sharded").string()).config;
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_EQ(qwen3.head_dim(), 8u);
  EXPECT_NE(qwen3.head_dim() * qwen3.n_head, qwen3.n_embd) << "head_dim set apart from d_model / H";
  const ModelConfig mistral = load_model((kFamilyFixtures / "mistral-f32").string()).config;
  EXPECT_EQ(mistral.window(0), 4u);
  const ModelConfig gemma = load_model((kFamilyFixtures / "gemma3-f32").string()).config;
  EXPECT_EQ(gemma.window(0), 4u);
  EXPECT_EQ(gemma.window(2), 0u) << "the third layer is global";
  EXPECT_TRUE(gemma.norm_plus_one && gemma.sandwich_norms);
  EXPECT_DOUBLE_EQ(gemma.query_scale, 1 / std::sqrt(12.0));
  EXPECT_NE(rope_frequencies(gemma, 0), rope_frequencies(gemma, 2)) << "local and global layers rotate differently";
}

// The rotation the forward applies makes a score depend on the offset alone: rotating q and
// k by positions (i, j) and by (i + s, j + s) gives the same dot product.
TEST(Families, RotaryScoresDependOnlyOnTheOffset) {
  const ModelConfig c = load_model((kFamilyFixtures / "llama-f32").string()).config;
  const std::vector<double> f = rope_frequencies(c, 0);
  const std::size_t half = f.size();
  const auto rotate = [&](std::vector<double> x, double p) {
    for (std::size_t i = 0; i < half; ++i) {
      const double a = x[i], b = x[i + half];
      x[i] = a * std::cos(p * f[i]) - b * std::sin(p * f[i]);
      x[i + half] = b * std::cos(p * f[i]) + a * std::sin(p * f[i]);
    }
    return x;
  };
  std::vector<double> q(2 * half), k(2 * half);
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = std::sin(1.0 + i), k[i] = std::cos(2.0 * i);
  const auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      s += a[i] * b[i];
    return s;
  };
  EXPECT_NEAR(dot(rotate(q, 7), rotate(k, 3)), dot(rotate(q, 27), rotate(k, 23)), 1e-9);
  EXPECT_GT(std::abs(dot(rotate(q, 7), rotate(k, 3)) - dot(rotate(q, 7), rotate(k, 5))), 1e-3);
}

// A copy of a fixture with its config.json edited, or a file removed.
fs::path broken_copy(const char* fixture, const std::function<void(json&)>& edit, const char* tag) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("attnlab-family-{}-{}-{}", fixture, tag, getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(kFamilyFixtures / fixture))
    fs::copy_file(entry.path(), dir / entry.path().filename());
  json config = read_json(dir / "config.json");
  edit(config);
  std::ofstream(dir / "config.json") << config.dump();
  return dir;
}

void expect_family_refused(const fs::path& dir, const std::string& words) {
  try {
    load_model(dir.string());
    ADD_FAILURE() << "loaded " << dir << "; expected a refusal naming " << words;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(FamiliesBadInput, UnknownTypesBadShapesAndMissingTensorsAreRefusedByName) {
  expect_family_refused(broken_copy(
                            "llama-f32", [](json& c) { c["model_type"] = "falcon"; }, "type"),
                        "\"model_type\" \"falcon\" is not a family attnlab reads");
  expect_family_refused(broken_copy(
                            "llama-f32", [](json& c) { c["num_key_value_heads"] = 3; }, "kv"),
                        "\"num_key_value_heads\" 3 does not divide \"num_attention_heads\" 4");
  expect_family_refused(broken_copy(
                            "llama-f32", [](json& c) { c["rope_scaling"]["rope_type"] = "yarn"; }, "rope"),
                        "rope type \"yarn\" is not one attnlab computes");
  expect_family_refused(broken_copy(
                            "llama-f32", [](json& c) { c["hidden_act"] = "relu"; }, "act"),
                        "the activation \"relu\" is not one attnlab computes");
  expect_family_refused(broken_copy(
                            "llama-f32", [](json& c) { c.erase("hidden_size"); }, "missing"),
                        "\"hidden_size\" is missing; a llama config.json names it");
  expect_family_refused(
      broken_copy(
          "llama-f32", [](json& c) { c["intermediate_size"] = 65; }, "shape"),
      "tensor \"model.layers.0.mlp.gate_proj.weight\" has shape [64, 32] but the config needs [65, 32]");
  expect_family_refused(broken_copy(
                            "smollm-bf16", [](json& c) { c["tie_word_embeddings"] = false; }, "tied"),
                        "\"lm_head.weight\" is missing and \"tie_word_embeddings\" is false");
  expect_family_refused(broken_copy(
                            "qwen3-f32-sharded", [](json& c) { c["num_hidden_layers"] = 3; }, "layers"),
                        "tensor \"model.layers.2.input_layernorm.weight\" is missing");
  expect_family_refused(broken_copy(
                            "gemma3-f32", [](json& c) { c["final_logit_softcapping"] = 30.0; }, "cap"),
                        "\"final_logit_softcapping\" is set");
  // A shard the index names but the folder lacks.
  const fs::path shard = broken_copy(
      "qwen3-f32-sharded", [](json&) {}, "shard");
  fs::remove(shard / "model-00002-of-00002.safetensors");
  expect_family_refused(shard, "model-00002-of-00002.safetensors");
}

}  // namespace

// ---- a real model of any family, when the user has one --------------------------------------
// Set ATTNLAB_MODEL_DIR to a Hugging Face folder (config.json, model.safetensors or its shards,
// tokenizer.json) of any family attnlab reads: SmolLM2-135M, Qwen2.5-0.5B, Qwen3-0.6B,
// Llama-3.2-1B, TinyLlama, Gemma-3-270m, GPT-2 (docs/models.md says how to get one). What
// holds for every trained language model is checked: it predicts a well-known continuation,
// its text round-trips through its tokenizer, some head copies a repeated sequence (an
// induction head: a property of trained transformers reported for every family studied), the
// decoder's last logits equal the forward's, and the weights take the file's bytes, not more.
TEST(RealModel, AnyFamilyLoadsPredictsAndHasAnInductionHead) {
  const char* dir = std::getenv("ATTNLAB_MODEL_DIR");
  if (!dir) GTEST_SKIP() << "ATTNLAB_MODEL_DIR is not set: no real model to check (nothing is downloaded)";
  const ModelDir m = open_model_dir(dir);
  const ModelConfig& c = m.model.config;
  ASSERT_TRUE(m.tokenizer) << "the folder needs its tokenizer.json (or vocab.json and merges.txt)";
  std::cout << describe(c) << "\n";
  const std::string text = "The Eiffel Tower is in the city of";
  const std::vector<int> ids = encode_text(m, text);
  const std::string sample = "naïve café, 東京 and 42 — it's “quoted”";
  const std::vector<int> sample_ids = m.tokenizer->encode(sample);
  EXPECT_EQ(m.tokenizer->decode(sample_ids), sample);
  const ForwardResult r = model_forward(m.model, ids);
  const std::span<const float> last(r.logits.data() + (ids.size() - 1) * c.vocab_size, c.vocab_size);
  bool paris = false;
  for (const TokenProbability& t : top_k(last, 5))
    paris |= show_token(m, t.id).text.find("Paris") != std::string::npos;
  EXPECT_TRUE(paris) << "\" Paris\" among the five likeliest next tokens";
  Decoder decoder(m.model);
  std::vector<float> stepped;
  for (int id : ids)
    stepped = decoder.step(std::vector<int>{id});
  EXPECT_TRUE(all_close(widened(stepped), widened(std::vector<float>(last.begin(), last.end())), {2e-3, 2e-3}));
  double best_induction = 0;
  for (const HeadScores& s : detect_heads(m.model, default_detector_sequences(c, 0, 2)))
    best_induction = std::max(best_induction, s.induction);
  EXPECT_GT(best_induction, 0.3) << "some head attends to the token after the current one's earlier occurrence";
  EXPECT_LE(m.model.weight_bytes(), checkpoint_summary(dir).bytes * 21 / 20) << "read in place, not widened";
}
