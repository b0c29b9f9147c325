// `attnlab model` on GGUF files as a user runs it: the fixtures that
// tests/model/make_gguf_fixtures.py converted from the NumPy-checked family folders (with a
// small tokenizer in their metadata), and Ollama's store, made here as `ollama pull` leaves it.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "../model/vocabulary_model.hpp"
#include "attnlab/model/gguf.hpp"
#include "run_attnlab.hpp"

namespace fs = std::filesystem;
using namespace attnlab_cli_test;

fs::path llama2_model(std::size_t V);  // test_model_cli.cpp: a tiny Llama with Llama 2's tokenizer.json
using nlohmann::json;

namespace gguf_cli_test {

const fs::path kFixtures = fs::path(ATTNLAB_MODEL_FIXTURE_DIR);
const fs::path kGguf = kFixtures / "gguf";

json run_json(const std::string& args) {
  const Result r = run_attnlab(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::object();
}

}  // namespace gguf_cli_test

using namespace gguf_cli_test;

TEST(GgufCli, InfoShowsTheArchitectureEachKindsTypeAndTheMemory) {
  const json info = run_json("model info " + (kGguf / "llama-q8_0.gguf").string());
  EXPECT_EQ(info["format"], "GGUF v3");
  EXPECT_EQ(info["architecture"], "llama");
  EXPECT_EQ(info["family"], "llama");
  EXPECT_EQ(info["stored_type"], "Q8_0");
  EXPECT_EQ(info["file_bytes"].get<std::size_t>(), fs::file_size(kGguf / "llama-q8_0.gguf"));
  EXPECT_EQ(info["tokenizer"], true) << "the file's metadata carries one";
  std::map<std::string, json> kinds;
  for (const json& k : info["tensor_kinds"])
    kinds[k["kind"]] = k;
  EXPECT_EQ(kinds.at("attn_q.weight")["types"], json({{"Q8_0", 2}})) << "one per layer, quantized";
  EXPECT_EQ(kinds.at("attn_norm.weight")["types"], json({{"F32", 2}}));
  // Q8_0 takes 34 bytes per 32 values: the weights as held are a little over a quarter of f32.
  const double held = info["weight_bytes"].get<double>(), f32 = info["f32_bytes"].get<double>();
  EXPECT_LT(held, 0.3 * f32);
  EXPECT_EQ(f32, 4.0 * info["parameters"].get<double>());
  const Result text = run_attnlab("model info " + (kGguf / "llama-q8_0.gguf").string());
  EXPECT_CONTAINS(text.out, "file: GGUF v3 (architecture llama)");
  EXPECT_CONTAINS(text.out, "as stored (Q8_0)");
  EXPECT_CONTAINS(text.out, "tokenizer: GGUF metadata, 48 tokens");
}

TEST(GgufCli, RunOnTheFileGivesTheFoldersHeadsAndLogits) {
  // The same weights as F32 in both: the same numbers, up to the order of a sum.
  const json file = run_json("model run " + (kGguf / "llama-f32.gguf").string() + " --ids 1,2,3,4,5");
  const json folder = run_json("model run " + (kFixtures / "llama-f32").string() + " --ids 1,2,3,4,5");
  ASSERT_EQ(file["last_logits"].size(), folder["last_logits"].size());
  for (std::size_t i = 0; i < file["last_logits"].size(); ++i)
    EXPECT_NEAR(file["last_logits"][i].get<double>(), folder["last_logits"][i].get<double>(), 1e-5) << i;
  EXPECT_EQ(file["weights"].size(), folder["weights"].size());
  const json& a = file["weights"][1][3];
  const json& b = folder["weights"][1][3];  // layer 1, head 3
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[i].size(); ++j)
      EXPECT_NEAR(a[i][j].get<double>(), b[i][j].get<double>(), 1e-6);
}

TEST(GgufCli, TextGoesThroughTheTokenizerInTheMetadata) {
  // SentencePiece (llama): "▁" first, then the highest-scored merges; the BOS token first.
  const json spm = run_json("model tokenize " + (kGguf / "llama-q8_0.gguf").string() + " 'the cat sat'");
  EXPECT_EQ(spm["ids"], json({1, 32, 35, 37}));
  EXPECT_EQ(spm["tokens"], json({"<s>", " the", " cat", " sat"}));
  // Byte-level BPE (qwen2): Qwen's pre-tokenizer, the merges by rank, no BOS.
  const json bpe = run_json("model tokenize " + (kGguf / "qwen2-f16.gguf").string() + " 'the cat sat'");
  EXPECT_EQ(bpe["ids"], json({21, 29, 33, 35}));
  EXPECT_EQ(bpe["tokens"], json({"t", "he", " cat", " sat"}));
  // A file without a tokenizer says so, and what to give instead.
  const Result none = run_attnlab("model tokenize " + (kGguf / "qwen3-f32.gguf").string() + " 'the cat'");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_CONTAINS(none.err, "carries no tokenizer in its metadata (tokenizer.ggml.*)");
}

TEST(GgufCli, AnOllamaNameIsTheModelBlobItsManifestNames) {
  const fs::path store = fs::path(ATTNLAB_TEST_TMP) / fmt::format("ollama-{}", getpid());
  fs::remove_all(store);
  const std::string digest = std::string(64, 'a');
  fs::create_directories(store / "blobs");
  fs::copy_file(kGguf / "llama-q8_0.gguf", store / "blobs" / ("sha256-" + digest));
  const fs::path manifests = store / "manifests" / "registry.ollama.ai" / "library" / "tiny";
  fs::create_directories(manifests);
  std::ofstream(manifests / "q8") << json{
      {"schemaVersion", 2},
      {"layers",
       {{{"mediaType", "application/vnd.ollama.image.template"}, {"digest", "sha256:" + std::string(64, 'b')}},
        {{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + digest}}}}};
  ::setenv("OLLAMA_MODELS", store.c_str(), 1);
  const json info = run_json("model info ollama:tiny:q8");
  EXPECT_EQ(info["architecture"], "llama");
  EXPECT_EQ(info["stored_type"], "Q8_0");
  EXPECT_EQ(run_json("model tokenize ollama:tiny:q8 'the cat'")["ids"], json({1, 32, 35}));
  expect_refused("model info ollama:tiny", "Ollama's store has no model tiny:latest");
  expect_refused("model info ollama:tiny", "`ollama list` shows the models it has");
  expect_refused("model info ollama:../../etc:q8", "is not an Ollama model name");
  std::ofstream(manifests / "bad") << json{
      {"layers",
       {{{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + std::string(64, 'g')}}}}};
  expect_refused("model info ollama:tiny:bad", "the model layer's digest is not sha256:<64 hex digits>");
  fs::remove(store / "blobs" / ("sha256-" + digest));
  expect_refused("model info ollama:tiny:q8", "is missing from Ollama's store");
  ::setenv("OLLAMA_MODELS", (store / "nowhere").c_str(), 1);
  expect_refused("model info ollama:tiny:q8", "there is no Ollama model store at");
  ::unsetenv("OLLAMA_MODELS");
  fs::remove_all(store);
}

TEST(GgufCli, ExportWritesAFileEveryCommandReadsWithTheFoldersTokenizer) {
  // GPT-2 with the real vocabulary and tokenizer files: the GGUF file carries them.
  const fs::path folder = attnlab::test::write_vocabulary_model(
      fs::path(ATTNLAB_TEST_TMP) / fmt::format("gguf-vocab-{}", getpid()), ATTNLAB_GPT2_VOCAB_DIR);
  const fs::path file = fs::path(ATTNLAB_TEST_TMP) / fmt::format("gguf-vocab-{}.gguf", getpid());
  const json written = run_json("model export " + folder.string() + " --gguf " + file.string() + " --type f32");
  EXPECT_EQ(written["type"], "F32");
  EXPECT_EQ(written["bytes"].get<std::size_t>(), fs::file_size(file));
  EXPECT_CONTAINS(written["tokenizer"].get<std::string>(), "vocab.json + merges.txt");
  const std::string text = "'Hello, world! The café of 2026 <|endoftext|> ok'";
  const json a = run_json("model tokenize " + file.string() + " " + text);
  const json b = run_json("model tokenize " + folder.string() + " " + text);
  EXPECT_EQ(a["ids"], b["ids"]);
  EXPECT_NE(std::find(a["ids"].begin(), a["ids"].end(), json(50256)), a["ids"].end())
      << "<|endoftext|> is one token: a control token in the file";
  const json run_file = run_json("model run " + file.string() + " --text 'The cat sat'");
  const json run_folder = run_json("model run " + folder.string() + " --text 'The cat sat'");
  // F32 and the same maths: the same logits, up to the order of the sums (the folder keeps
  // GPT-2's [in, out] weights and the file [out, in]: a product adds its terms in another order).
  ASSERT_EQ(run_file["last_logits"].size(), run_folder["last_logits"].size());
  for (std::size_t i = 0; i < run_file["last_logits"].size(); ++i)
    EXPECT_NEAR(run_file["last_logits"][i].get<double>(), run_folder["last_logits"][i].get<double>(), 1e-4) << i;
  const json info = run_json("model info " + file.string());
  EXPECT_EQ(info["architecture"], "gpt2");
  // Bad requests: the type, the file being read, a model of another kind.
  expect_refused("model export " + folder.string() + " --gguf " + file.string() + " --type q4_k", "--type");
  expect_refused("model export " + file.string() + " --gguf " + file.string(), "is the model being read");
  expect_refused("model export " + (kFixtures / "gemma3-f32").string() + " --gguf " + file.string() + ".x",
                 "attnlab writes GGUF for GPT-2, Llama, Qwen2 and Qwen3 models");
  EXPECT_FALSE(fs::exists(file.string() + ".x")) << "nothing written";
  fs::remove(file);
}

// A SentencePiece-style tokenizer.json (Llama 2's real one) is written with the end of text
// config.json names; a model with more embeddings than tokens gets the rest as unused tokens;
// exporting a GGUF file again keeps its own tokenizer, entry for entry.
TEST(GgufCli, ExportKeepsTheEndOfTextThePaddingAndAGgufFilesOwnTokenizer) {
  const fs::path folder = llama2_model(32008);
  const fs::path a = fs::path(ATTNLAB_TEST_TMP) / fmt::format("gguf-llama2-{}.gguf", getpid());
  const fs::path b = fs::path(ATTNLAB_TEST_TMP) / fmt::format("gguf-llama2-again-{}.gguf", getpid());
  EXPECT_CONTAINS(run_json("model export " + folder.string() + " --gguf " + a.string() + " --type f32")["tokenizer"]
                      .get<std::string>(),
                  "SentencePiece");
  const attnlab::GgufFile first(a.string());
  const json& meta = first.metadata();
  EXPECT_EQ(meta["tokenizer.ggml.eos_token_id"], 2) << "config.json's eos_token_id";
  EXPECT_EQ(meta["tokenizer.ggml.bos_token_id"], 1);
  ASSERT_EQ(meta["tokenizer.ggml.tokens"].size(), 32008u) << "padded to the embeddings";
  EXPECT_EQ(meta["tokenizer.ggml.tokens"][32007], "[PAD32007]");
  EXPECT_EQ(meta["tokenizer.ggml.token_type"][32007], 5) << "unused";
  EXPECT_EQ(meta["tokenizer.ggml.token_type"][32000 - 1], 1) << "the tokenizer's last token is a normal one";

  const json again = run_json("model export " + a.string() + " --gguf " + b.string() + " --type f32");
  EXPECT_CONTAINS(again["tokenizer"].get<std::string>(), "the GGUF file's own (\"llama\", copied)");
  const attnlab::GgufFile second(b.string());
  std::size_t copied = 0;
  for (const auto& [key, type] : first.metadata_types())
    if (key.starts_with("tokenizer.")) {
      ++copied;
      EXPECT_EQ(second.metadata_types().count(key) ? second.metadata_types().at(key) : "", type) << key;
      EXPECT_EQ(second.metadata().value(key, json()), meta[key]) << key;
    }
  EXPECT_GE(copied, 6u);
  const std::string text = "'Hello, world: the café, 2026'";
  EXPECT_EQ(run_json("model tokenize " + b.string() + " " + text)["ids"],
            run_json("model tokenize " + folder.string() + " " + text)["ids"]);
  fs::remove(a);
  fs::remove(b);
}

// An error the config reader raises names the metadata key the value came from.
TEST(GgufCli, AConfigErrorNamesTheMetadataKey) {
  std::ifstream in(kGguf / "llama-f32.gguf", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "llama.block_count";
  const std::size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::size_t value = at + key.size() + 4;  // after the key, its type (u32)
  ASSERT_EQ(bytes[at + key.size()], 4) << "a u32";
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(value), 4, '\0');
  const fs::path file = fs::path(ATTNLAB_TEST_TMP) / fmt::format("gguf-no-layers-{}.gguf", getpid());
  std::ofstream(file, std::ios::binary) << bytes;
  expect_refused("model info " + file.string(), "(read from the metadata's \"llama.block_count\")");
  fs::remove(file);
}
