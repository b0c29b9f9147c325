// Training: every parameter's gradient against central finite differences (in double,
// where the differences are exact to ~1e-9) and against PyTorch's autograd on the tiny
// checkpoint (tests/model/make_training_fixtures.py), the training loss against the
// inference forward's (itself checked against NumPy), and AdamW against its formula.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/train_run.hpp"
#include "attnlab/model/training.hpp"
#include "compare.hpp"

using namespace attnlab;

namespace {

const ModelConfig kSmall{2, 2, 8, 8, 11, 32, 1e-5};  // L, H, d, positions, vocabulary, MLP width

// Llama-style: RMSNorm, rotary positions, 4 query heads sharing 2 KV heads, SwiGLU, no
// biases, a separate LM head.
ModelConfig llama_style() {
  ModelConfig c{2, 4, 16, 8, 11, 24, 1e-5};
  c.family = Family::llama;
  c.n_kv_head = 2;
  c.norm = NormKind::rms_norm;
  c.rotary = true;
  c.rope.theta = 100;
  c.qkv_bias = c.out_bias = c.mlp_bias = false;
  c.mlp = MlpKind::swiglu;
  c.tied = false;
  return c;
}

// Everything else the families do at once: one KV head (multi-query), head_dim 6 apart from
// d / H, q/k/v biases (Qwen2), QK-norm, (1 + w) RMSNorm and sandwich norms, GeGLU, a query
// scale, a sliding window with its own θ on layer 0, partial rotation (4 of 6), √d embedding
// scale (Gemma 3 and Qwen3).
ModelConfig every_option() {
  ModelConfig c{2, 2, 8, 8, 11, 16, 1e-6};
  c.family = Family::gemma3;
  c.n_kv_head = 1;
  c.head_width = 6;
  c.norm = NormKind::rms_norm;
  c.norm_plus_one = true;
  c.sandwich_norms = true;
  c.rotary = true;
  c.rope.theta = 1000;
  c.rope.local_theta = 10;
  c.rope.rotated = 4;
  c.sliding_window = {3, 0};
  c.qkv_bias = true;
  c.out_bias = c.mlp_bias = false;
  c.qk_norm = true;
  c.query_scale = 0.3;
  c.mlp = MlpKind::geglu;
  c.embedding_scale = std::sqrt(8.0);
  return c;
}

// Seeded parameters: LayerNorm gains near 1, everything else N(0, 0.3²), so no unit is
// saturated and every gradient is far from zero.
std::vector<double> random_parameters(const ModelConfig& c, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> p(parameter_count(c));
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const bool gain = is_norm_weight(t);
    for (std::size_t k = 0; k < t.size; ++k)
      p[t.offset + k] = gain ? 1 + 0.2 * rng.normal() : 0.3 * rng.normal();
  }
  return p;
}

const Batch kBatch{{1, 4, 7, 1, 4, 7}, {10, 0, 3, 3, 9, 2, 5}};

void expect_gradients_match_finite_differences(const ModelConfig& c, const TrainingOptions& options) {
  std::vector<double> p = random_parameters(c, 3);
  if (options.attention_only)  // the MLPs hold zeros and are not run
    for (const ParameterTensor& t : parameter_tensors(c))
      if (is_mlp_tensor(t)) std::fill_n(p.begin() + t.offset, t.size, 0.0);
  std::vector<double> g(p.size()), scratch(p.size());
  loss_and_gradients<double>(c, p, kBatch, g, options);
  const auto loss_at = [&](std::size_t k, double x) {
    const double kept = p[k];
    p[k] = x;
    const double loss = loss_and_gradients<double>(c, p, kBatch, scratch, options);
    p[k] = kept;
    return loss;
  };
  SplitMix64 pick(9);
  std::size_t checked = 0;
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const bool unused = is_mlp_tensor(t) || t.slot == TensorSlot::ln_2_weight || t.slot == TensorSlot::ln_2_bias ||
                        t.slot == TensorSlot::post_mlp_norm_weight;
    if (options.attention_only && unused) continue;
    for (int draw = 0; draw < 5; ++draw) {
      const std::size_t k = t.offset + (draw == 0 ? 0 : draw == 1 ? t.size - 1 : pick.next() % t.size);
      const double h = 1e-5, numeric = (loss_at(k, p[k] + h) - loss_at(k, p[k] - h)) / (2 * h);
      EXPECT_NEAR(g[k], numeric, 1e-8 + 1e-5 * std::abs(numeric)) << t.name << " element " << (k - t.offset);
      ++checked;
    }
  }
  EXPECT_GE(checked, 5 * 2 * c.n_layer) << "five entries of every tensor that takes part";
}

// The training forward's mean loss over kBatch against the inference forward's (itself
// checked against NumPy for every family, test_families.cpp), on the same float weights.
void expect_training_loss_is_inference_loss(const ModelConfig& c, std::uint64_t seed, double tolerance) {
  const std::vector<double> p = random_parameters(c, seed);
  std::vector<float> as_float(p.begin(), p.end()), g(p.size());
  const Model model = unflatten(c, as_float);
  EXPECT_EQ(flatten<float>(model), as_float) << "flatten and unflatten are inverse";
  double expected = 0;
  std::size_t predictions = 0;
  for (const std::vector<int>& ids : kBatch) {
    const ForwardResult r = model_forward(model, std::span(ids).first(ids.size() - 1));
    expected += next_token_loss(r, ids, 0, ids.size() - 1) * double(ids.size() - 1);
    predictions += ids.size() - 1;
  }
  EXPECT_NEAR(loss_and_gradients<float>(c, as_float, kBatch, g), expected / double(predictions), tolerance);
}

}  // namespace

TEST(Training, EveryParametersGradientMatchesCentralFiniteDifferences) {
  expect_gradients_match_finite_differences(kSmall, {});
}

TEST(Training, AttentionOnlyGradientsMatchFiniteDifferencesToo) {
  expect_gradients_match_finite_differences(kSmall, {.attention_only = true});
}

// RMSNorm, rotary positions, grouped-query attention and SwiGLU: each backward beside its
// forward, checked the same way.
TEST(Training, ALlamaStyleModelsGradientsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(llama_style(), {});
  expect_gradients_match_finite_differences(llama_style(), {.attention_only = true});
}

TEST(Training, QkNormSandwichNormsGeGluWindowsAndPartialRotationGradientsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(every_option(), {});
}

// A trained Llama-style model is written as transformers writes one (config.json with
// model_type "llama", q/k/v/o, gate/up/down as [out, in]) and reads back as the same model.
TEST(Training, ALlamaStyleModelSavesAsAHuggingFaceFolderThatLoadsBack) {
  const std::vector<double> p = random_parameters(llama_style(), 8);
  const std::vector<float> as_float(p.begin(), p.end());
  const Model model = unflatten(llama_style(), as_float);
  const std::string dir = ::testing::TempDir() + "attnlab-llama-save-" + std::to_string(getpid());
  save_model(dir, model);
  const Model back = load_model(dir);
  EXPECT_EQ(describe(back.config), describe(model.config));
  EXPECT_EQ(flatten<float>(back), as_float);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["num_key_value_heads"], 2);
  const SafetensorsFile file(dir + "/model.safetensors");
  ASSERT_NE(file.find("model.layers.1.self_attn.k_proj.weight"), nullptr);
  EXPECT_EQ(file.find("model.layers.1.self_attn.k_proj.weight")->shape, (std::vector<std::size_t>{8, 16}));
  EXPECT_EQ(file.find("model.layers.0.mlp.gate_proj.weight")->shape, (std::vector<std::size_t>{24, 16}));
  std::filesystem::remove_all(dir);
}

TEST(Training, EveryFamilysTrainingLossIsItsInferenceLoss) {
  expect_training_loss_is_inference_loss(llama_style(), 6, 1e-5);
  expect_training_loss_is_inference_loss(every_option(), 7, 1e-5);
}

// The tiny F32 checkpoint, a batch of three sequences of different lengths: the loss and
// every element of every gradient as PyTorch's autograd computes them in float32.
void expect_gradients_match_pytorch(const TrainingOptions& options) {
  const std::string dir = std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/training";
  const nlohmann::json expected = nlohmann::json::parse(std::ifstream(dir + "/expected.json"));
  const Model model = load_gpt2(std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/tiny-f32");
  const std::vector<float> p = flatten<float>(model);
  std::vector<float> g(p.size());
  const float loss =
      loss_and_gradients<float>(model.config, p, expected["batch"].get<Batch>(), std::span<float>(g), options);
  EXPECT_NEAR(loss, expected[options.attention_only ? "loss_attention_only" : "loss"].get<double>(), 2e-6);
  const SafetensorsFile torch(
      dir + (options.attention_only ? "/gradients-attention-only.safetensors" : "/gradients.safetensors"));
  std::size_t compared = 0;
  for (const ParameterTensor& t : parameter_tensors(model.config)) {
    const TensorInfo* info = torch.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    ASSERT_EQ(info->shape, t.shape) << t.name;
    const std::vector<float> want = torch.to_f32(*info);
    double scale = 0;  // the tensor's largest gradient: float32 sums differ by rounding relative to it
    for (float x : want)
      scale = std::max(scale, double(std::abs(x)));
    for (std::size_t k = 0; k < t.size; ++k, ++compared)
      ASSERT_NEAR(g[t.offset + k], want[k], 1e-7 + 2e-5 * scale) << t.name << " element " << k;
  }
  EXPECT_EQ(compared, p.size());
}

TEST(Training, EveryGradientMatchesPyTorchAutograd) { expect_gradients_match_pytorch({}); }

TEST(Training, AttentionOnlyGradientsMatchPyTorchAutograd) { expect_gradients_match_pytorch({.attention_only = true}); }

TEST(Training, TheTrainingLossIsTheInferenceForwardsLoss) { expect_training_loss_is_inference_loss(kSmall, 4, 1e-5); }

// The batch split over threads: the same loss and gradients as one thread (up to the order
// of the sums), and bit for bit the same for the same thread count.
TEST(Training, SplittingTheBatchOverThreadsGivesTheSameGradients) {
  const std::vector<double> p = random_parameters(kSmall, 5);
  const std::vector<float> as_float(p.begin(), p.end());
  const Batch batch{{1, 4, 7, 1, 4, 7}, {10, 0, 3, 3, 9, 2, 5}, {2, 2, 8}, {5, 6, 7, 8, 9}, {0, 1, 0, 1, 0, 1, 0, 1}};
  const auto run = [&](std::size_t threads, std::vector<float>& g) {
    g.assign(p.size(), 0.0f);
    return loss_and_gradients<float>(kSmall, as_float, batch, g, {.threads = threads});
  };
  std::vector<float> one, two, three, again;
  const float loss = run(1, one);
  EXPECT_NEAR(run(2, two), loss, 1e-6);
  EXPECT_NEAR(run(3, three), loss, 1e-6);
  float largest = 0;
  for (float x : one)
    largest = std::max(largest, std::abs(x));
  for (std::size_t k = 0; k < one.size(); ++k) {
    ASSERT_NEAR(two[k], one[k], 1e-6f * largest) << k;
    ASSERT_NEAR(three[k], one[k], 1e-6f * largest) << k;
  }
  run(2, again);
  EXPECT_EQ(again, two);
}

TEST(Training, AdamWFollowsItsFormulaAndClippingBoundsTheNorm) {
  AdamW adam;
  adam.learning_rate = 0.1;
  adam.weight_decay = 0.01;
  std::vector<float> p{1.0f, -2.0f}, g{0.5f, -0.25f};
  adam.step(p, g, 0.1);
  // Step 1: m̂ = g, v̂ = g², so the update is lr·(g/(|g| + ε) + λ·p) = lr·(sign(g) + λp).
  EXPECT_NEAR(p[0], 1.0 - 0.1 * (1.0 + 0.01 * 1.0), 1e-6);
  EXPECT_NEAR(p[1], -2.0 - 0.1 * (-1.0 + 0.01 * -2.0), 1e-6);
  std::vector<float> big{3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(clip_gradients(big, 1.0), 5.0);
  EXPECT_NEAR(big[0], 0.6, 1e-7);
  EXPECT_NEAR(big[1], 0.8, 1e-7);
}

TEST(Training, AdamWLeavesWhatDoesNotLearnAsItIs) {
  AdamW adam;
  std::vector<float> p{1.0f, -2.0f, 3.0f}, g{0.5f, -0.25f, 1.0f};
  const std::vector<std::uint8_t> learns{1, 0, 1};
  adam.step(p, g, 0.1, learns);
  EXPECT_NEAR(p[0], 0.9, 1e-6);
  EXPECT_EQ(p[1], -2.0f);
  EXPECT_NEAR(p[2], 2.9, 1e-6);
  EXPECT_EQ(adam.m[1], 0.0f) << "its moments stay as they were too";
  EXPECT_EQ(adam.v[1], 0.0f);
}

TEST(InductionTask, LookBackSequencesMostlyFollowTheRule) {
  const std::size_t context = 33, vocab = 28;
  std::size_t follows = 0, predicted = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<int> ids = look_back_sequence(seed, context, vocab);
    ASSERT_EQ(ids.size(), context);
    EXPECT_EQ(ids[0], 27) << "BOS first";
    for (std::size_t i = 1; i < context; ++i)
      ASSERT_TRUE(ids[i] >= 0 && ids[i] < 27) << "BOS is never drawn";
    for (std::size_t i = 3; i < context; ++i, ++predicted)
      follows += ids[i] == (ids[i - 2] + kLookBackShift) % 27;
  }
  // Four in five follow the rule, and a random draw hits it one time in 27 besides.
  EXPECT_NEAR(double(follows) / double(predicted), 0.8 + 0.2 / 27, 0.02);
}

// The two phases: in the first only layer 0 and what no block owns learn; at the switch
// layer 0's outputs are scaled by layer0_output_scale; after it layer 0 stays as it is.
TEST(InductionTask, ThePreviousTokenPhaseTrainsLayer0ThenKeepsItScaledDown) {
  TrainSettings s;
  s.layers = 2, s.heads = 2, s.d_model = 8, s.context = 12, s.vocab = 10, s.batch = 2, s.log_every = 100;
  s.prev_token_steps = 2;
  const auto log = [](const TrainLog&, const Model&) {};
  const ModelConfig c = initial_model(s).config;
  const std::vector<float> start = flatten<float>(initial_model(s));
  s.steps = 2;
  const std::vector<float> first = flatten<float>(train_model(s, log));
  s.steps = 4;
  const std::vector<float> second = flatten<float>(train_model(s, log));
  const auto same = [](std::span<const float> a, std::span<const float> b) { return std::ranges::equal(a, b); };
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const auto at = [&](const std::vector<float>& p) { return std::span(p).subspan(t.offset, t.size); };
    const bool layer0 = t.name.starts_with("h.0."), layer1 = t.name.starts_with("h.1.");
    if (layer1) EXPECT_TRUE(same(at(first), at(start))) << t.name << " learns in the first phase";
    if (layer0) EXPECT_FALSE(same(at(first), at(start))) << t.name << " does not learn in the first phase";
    if (layer1) EXPECT_FALSE(same(at(second), at(first))) << t.name << " does not learn in the second phase";
    if (!layer0) continue;
    const bool output = t.name.starts_with("h.0.attn.c_proj.") || t.name.starts_with("h.0.mlp.c_proj.");
    for (std::size_t k = 0; k < t.size; ++k)
      ASSERT_EQ(at(second)[k], output ? float(at(first)[k] * s.layer0_output_scale) : at(first)[k])
          << t.name << "[" << k << "]";
  }
}

TEST(TextTask, ByteCorpusGivesEachDistinctByteAnIdInByteOrderWithBosLast) {
  const TextCorpus corpus = byte_corpus("ba b\n", "f.txt");
  EXPECT_EQ(corpus.vocab, 5u) << "newline, space, a, b and BOS";
  EXPECT_EQ(corpus.ids, (std::vector<int>{3, 2, 1, 3, 0}));
  // The files are a GPT-2 tokenizer without merges that reads the text as the same ids.
  const BpeTokenizer tokenizer = BpeTokenizer::from_text(corpus.vocab_json, corpus.merges_txt);
  EXPECT_EQ(tokenizer.encode("ba b\n"), (std::vector<TokenId>{3, 2, 1, 3, 0}));
  EXPECT_EQ(tokenizer.end_of_text(), 4);
}

TEST(TextTask, BpeCorpusUsesTheTokenizerAndNeedsEndOfTextLast) {
  // Every byte is a symbol (ids 0..255), "ab" is a merge (256), <|endoftext|> is 257.
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_to_unicode(static_cast<std::uint8_t>(b));
    std::string symbol;
    if (c < 0x80)
      symbol += static_cast<char>(c);
    else
      symbol += static_cast<char>(0xC0 | (c >> 6)), symbol += static_cast<char>(0x80 | (c & 0x3F));
    vocab[symbol] = b;
  }
  vocab["ab"] = 256;
  vocab["<|endoftext|>"] = 257;
  const BpeTokenizer tokenizer = BpeTokenizer::from_text(vocab.dump(), "#version: 0.2\na b\n");
  const TextCorpus corpus = bpe_corpus("abc ab", "f.txt", tokenizer, vocab.dump(), "#version: 0.2\na b\n");
  EXPECT_EQ(corpus.vocab, 258u);
  EXPECT_EQ(corpus.tokenizer, "gpt2");
  EXPECT_EQ(corpus.ids, (std::vector<int>{256, 'c', ' ', 256})) << "\"abc\" then \" ab\", the space its own byte";
  vocab["abc"] = 300;  // <|endoftext|> no longer the last id: no BOS to start windows with
  const BpeTokenizer gap = BpeTokenizer::from_text(vocab.dump(), "#version: 0.2\na b\n");
  EXPECT_THROW(bpe_corpus("ab", "f.txt", gap, vocab.dump(), ""), InputError);
}

// The price counts the parameters exactly as the model has them, six float copies of them,
// and grows with the context as the attention weights do (H·n² a layer); a shape over
// kMaxTrainBytes is refused naming the flag that drives the price.
TEST(TrainingPrice, CountsTheModelsParametersAndRefusesAShapeOverTheLimitNamingItsFlag) {
  for (const TrainSettings& s :
       {TrainSettings{},
        TrainSettings{.layers = 3, .heads = 4, .d_model = 48, .context = 20, .vocab = 50, .attention_only = true}}) {
    const ModelConfig c{s.layers, s.heads, s.d_model, s.context, s.vocab, 4 * s.d_model, 1e-5};
    const TrainingPrice price = price_training(s);
    EXPECT_EQ(price.parameters, double(parameter_count(c)));
    EXPECT_EQ(price.state_bytes, 6 * 4 * price.parameters);
    EXPECT_EQ(price.batch_bytes, double(s.batch * (s.context + 1) * sizeof(int)));
    EXPECT_NO_THROW(check_training_price(s));
  }
  TrainSettings longer;
  longer.context *= 2;
  const double grown = price_training(longer).activation_bytes - price_training(TrainSettings{}).activation_bytes;
  EXPECT_GE(grown, 4.0 * longer.layers * longer.heads * (64.0 * 64 - 32.0 * 32)) << "H·n² a layer";

  const auto refused_flag = [](const TrainSettings& s) {
    try {
      check_training_price(s);
    } catch (const InputError& e) {
      EXPECT_NE(e.message().find("the limit is 4 GiB"), std::string::npos) << e.what();
      return e.field();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refused_flag({.layers = 48, .heads = 16, .d_model = 4096}), "d_model");
  EXPECT_EQ(refused_flag({.d_model = 256, .vocab = 4'000'000}), "vocab");
  EXPECT_EQ(refused_flag({.heads = 64, .d_model = 64, .context = 4096}), "context");
}
