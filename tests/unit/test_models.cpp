// Model presets and the KV-cache formula: llama-3-8b at 8192 tokens in f16 is exactly
// 1 GiB, the weights line, when the cache outgrows the weights, and the longest context
// a budget allows.
#include <gtest/gtest.h>

#include <tuple>

#include "../sanitizers.hpp"

#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/model_kv.hpp"
#include "attnlab/analysis/models.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/training.hpp"
#include "attnlab/operations/model.hpp"

using namespace attnlab;

TEST(Models, EveryPresetIsAValidShapeWithKnownParameters) {
  ASSERT_EQ(model_presets().size(), 8u);
  for (const ModelShape& m : model_presets()) {
    SCOPED_TRACE(m.name);
    EXPECT_NO_THROW(validate_model_shape(m));
    EXPECT_GT(m.parameters, 0u);
    EXPECT_EQ(m.heads % m.kv_heads, 0u);
  }
  EXPECT_EQ(model_names(), "gpt2, gpt2-xl, llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b, qwen2.5-7b, gemma-2-9b");
}

TEST(Models, PublishedShapes) {
  const ModelShape& llama3 = find_model("llama-3-8b", "model");
  EXPECT_EQ(llama3.layers, 32u);
  EXPECT_EQ(llama3.kv_heads, 8u);
  EXPECT_EQ(llama3.parameters, 8'030'261'248u);
  const ModelShape& gemma = find_model("gemma-2-9b", "model");
  EXPECT_EQ(gemma.head_dim, 256u) << "Gemma 2's heads are wider than d_model / H";
  EXPECT_EQ(find_model("gpt2", "model").parameters, 124'439'808u);
  EXPECT_EQ(find_model("llama-3-70b", "model").layers, 80u);
}

TEST(Models, UnknownModelListsTheKnownOnes) {
  try {
    find_model("llama-9", "--model");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--model: unknown model \"llama-9\"; the known models are: gpt2, gpt2-xl, "
                                          "llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b, qwen2.5-7b, gemma-2-9b",
                                          0),
              0u)
        << e.what();
  }
}

TEST(KVMemory, Llama3At8192TokensInF16IsExactlyOneGiB) {
  const ModelShape& m = find_model("llama-3-8b", "model");
  EXPECT_EQ(kv_cache_bytes(m, DType::f16, 8192), 2ull * 32 * 8 * 128 * 8192 * 2);
  EXPECT_EQ(kv_cache_bytes(m, DType::f16, 8192), 1ull << 30);
  EXPECT_EQ(kv_bytes_per_token(m, DType::f16), 131'072u);
  EXPECT_EQ(kv_cache_bytes(m, DType::f32, 8192), 2ull << 30);
}

TEST(KVMemory, WithoutGroupedQueryAttentionTheCacheIsHTimesLarger) {
  // llama-2-7b: 32 KV heads, 0.5 MiB per token in f16 (4× llama-3-8b's 8 KV heads).
  EXPECT_EQ(kv_bytes_per_token(find_model("llama-2-7b", "model"), DType::f16), 512u * 1024);
  EXPECT_EQ(kv_bytes_per_token(find_model("gpt2", "model"), DType::f32), 2u * 12 * 12 * 64 * 4);
}

TEST(KVMemory, ReportSaysWhenTheCacheOutgrowsTheWeights) {
  const std::vector<std::uint64_t> contexts{4096, 32768, 131072};
  const KVReport r = kv_report(find_model("llama-3-8b", "model"), DType::f16, contexts, std::nullopt);
  EXPECT_EQ(r.weight_bytes, 16'060'522'496u);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].cache_bytes, 512ull << 20);
  EXPECT_EQ(r.rows[1].cache_bytes, 4ull << 30);
  EXPECT_EQ(r.rows[2].cache_bytes, 16ull << 30);
  EXPECT_FALSE(r.rows[1].cache_exceeds_weights);
  EXPECT_TRUE(r.rows[2].cache_exceeds_weights);
  EXPECT_EQ(r.rows[2].total_bytes, (16ull << 30) + 16'060'522'496u);
  // The first context whose cache is larger than the weights: ⌊weights / per token⌋ + 1.
  ASSERT_TRUE(r.crossover_context);
  EXPECT_EQ(*r.crossover_context, 16'060'522'496u / 131'072 + 1);
  EXPECT_LE((*r.crossover_context - 1) * 131'072, r.weight_bytes);
  EXPECT_GT(*r.crossover_context * 131'072, r.weight_bytes);
}

TEST(KVMemory, BudgetGivesTheLongestContextBesideTheWeights) {
  const std::vector<std::uint64_t> contexts{8192};
  const KVReport r = kv_report(find_model("llama-3-8b", "model"), DType::f16, contexts, 24ull << 30);
  ASSERT_TRUE(r.budget);
  EXPECT_TRUE(r.budget->weights_fit);
  EXPECT_EQ(r.budget->left_for_cache, (24ull << 30) - 16'060'522'496u);
  EXPECT_EQ(r.budget->max_context, ((24ull << 30) - 16'060'522'496u) / 131'072);  // 74,075
  EXPECT_EQ(r.budget->max_context, 74'075u);
  const KVReport small = kv_report(find_model("llama-3-70b", "model"), DType::f16, contexts, 24ull << 30);
  EXPECT_FALSE(small.budget->weights_fit);
  EXPECT_EQ(small.budget->max_context, 0u);
}

TEST(KVMemory, BadShapesZeroContextAndOverflowAreRefusedNamingTheField) {
  const auto refusal = [](const ModelShape& m, std::uint64_t context) -> std::string {
    try {
      const std::vector<std::uint64_t> contexts{context};
      kv_report(m, DType::f16, contexts, std::nullopt);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  ModelShape m = find_model("llama-3-8b", "model");
  EXPECT_EQ(refusal(m, 0).rfind("context: 0 tokens", 0), 0u);
  EXPECT_EQ(refusal(m, UINT64_MAX)
                .rfind("context: 18,446,744,073,709,551,615 tokens × 131,072 bytes per token "
                       "overflows 64 bits",
                       0),
            0u)
      << refusal(m, UINT64_MAX);
  m.kv_heads = 3;
  EXPECT_EQ(refusal(m, 1).rfind("kv_heads: 3 KV heads do not divide 32 query heads", 0), 0u);
  m = ModelShape{"mine", "", 0, 0, 8, 8, 64, 0, ""};
  EXPECT_EQ(refusal(m, 1).rfind("layers: 0 is outside 1..65,536", 0), 0u);
  m.layers = 2;
  m.head_dim = 0;
  EXPECT_EQ(refusal(m, 1).rfind("head_dim: 0 is outside", 0), 0u);
}

// A long context on a model with Llama 3's vocabulary is priced by what the measurement keeps:
// the cache (here 4 MiB at 8,192 tokens) and the prompt's rows, not n × vocabulary logits (the
// decoder unembeds the last token alone). The price was once 31.44 GiB and refused the run.
TEST(ModelKv, ALargeVocabularyDoesNotInflateThePriceOfALongContext) {
  // As config.json would be read: whole numbers parse as unsigned.
  const nlohmann::json config = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 32,
      "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
      "head_dim": 16, "max_position_embeddings": 16384, "vocab_size": 128256, "tie_word_embeddings": true})");
  const attnlab::ModelConfig c = attnlab::parse_model_config(config, "config.json");
  std::vector<float> parameters(c.parameters());
  attnlab::SplitMix64 rng(3);
  for (float& x : parameters)
    x = static_cast<float>(0.05 * rng.normal());
  const attnlab::Model model = attnlab::unflatten(c, parameters);
  // f32: a row of 16 values is 64 bytes; q8_0: one block of 32 (16 of them zero padding), 34 bytes
  // (at 4,096 tokens: 1.1 MB, still 17 times the 64 KiB allowed for the pages' rounding).
  for (const auto& [type, row_bytes, tokens] :
       {std::tuple{attnlab::CacheType::f32, 64u, 8192u}, {attnlab::CacheType::q8_0, 34u, 4096u}}) {
    SCOPED_TRACE(attnlab::cache_type_name(type));
    const std::vector<std::uint64_t> contexts{tokens};
    const std::vector<attnlab::ModelKvPoint> points = attnlab::measure_model_kv(model, contexts, type);
    ASSERT_EQ(points.size(), 1u);
    EXPECT_EQ(points[0].formula_bytes, 2u * 2 * 2 * row_bytes * tokens) << "layers × 2 × H_kv × row bytes × tokens";
    EXPECT_EQ(points[0].used_bytes, points[0].formula_bytes);
    // The measured column is the cache alone: the memory the rest of the run touches is
    // resident before the measure too. Within the pages' rounding (a page per array: 2 layers
    // × 2 KV heads × keys and values) and a little of the heap's.
    if (ATTNLAB_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer's allocator keeps freed memory resident";
    const double formula = double(points[0].formula_bytes), resident = double(points[0].resident_bytes);
    EXPECT_NEAR(resident, formula, 0.02 * formula + 64 * 1024.0) << "resident " << resident << " formula " << formula;
  }
}

// The weights beside the cache are the weights as they sit in memory: an f16 checkpoint's in
// f16 (its report once said the f32 size, twice what the file holds).
TEST(ModelKv, TheWeightsAreTheirSizeAsStored) {
  const attnlab::ModelDir m = attnlab::open_model_dir(std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/qwen2-f16");
  attnlab::ModelKvRequest request;
  request.context = {16};
  const attnlab::ModelKvResult priced = attnlab::price_model_kv(m, request);
  EXPECT_EQ(priced.weight_type, "F16");
  EXPECT_EQ(priced.weight_bytes, m.model.weight_bytes());
  EXPECT_LT(priced.weight_bytes, m.model.config.parameters() * sizeof(float));
  EXPECT_NE(attnlab::model_kv_report(priced).find("in memory as stored (F16)"), std::string::npos);
}

// What a generated token reads of the weights: every tensor whole, but one row of each table
// it looks up: GPT-2's position embedding (its token embedding is the LM head, read whole),
// and a Llama's token embedding where its LM head is a tensor of its own. Counted here from
// the config's sizes, apart from the parameter table.
TEST(Models, AGeneratedTokenReadsOneRowOfEachTableItLooksUp) {
  ModelConfig gpt2{2, 4, 16, 8, 11, 24, 1e-5};  // layers, heads, d, positions, vocabulary, MLP, eps
  ModelConfig llama = gpt2;
  llama.family = Family::llama;
  llama.norm = NormKind::rms_norm;
  llama.rotary = true;
  llama.mlp = MlpKind::swiglu;
  llama.qkv_bias = llama.out_bias = llama.mlp_bias = false;
  llama.tied = false;
  for (const ModelConfig& c : {gpt2, llama}) {
    const std::size_t all = c.parameters();
    const Model model = unflatten(c, std::vector<float>(all, 0.5f));
    // The tables a token looks up a row of, beside everything else it reads whole.
    const std::size_t tables = c.rotary ? c.vocab_size * c.n_embd : c.n_positions * c.n_embd;
    const Model::Read read = model.read_per_token();
    EXPECT_EQ(read.values, all - tables + c.n_embd) << (c.rotary ? "llama" : "gpt2");
    EXPECT_EQ(read.bytes, read.values * sizeof(float)) << "f32 tensors, every value 4 bytes";
    EXPECT_LT(read.bytes, model.weight_bytes());
  }
}
