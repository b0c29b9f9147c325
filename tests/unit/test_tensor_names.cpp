// The one table of tensor names (attnlab/model/tensor_names.hpp) against files attnlab did not
// write: the fixtures tests/model/make_family_fixtures.py, make_gpt2_fixtures.py and
// make_gguf_fixtures.py write from transformers' and llama.cpp's names. For every fixture, the
// names the table gives for the parameter table are exactly the names in the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "attnlab/core/error.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/tensor_names.hpp"
#include "compare.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;

const fs::path kNameFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

std::set<std::string> table_names(const ModelConfig& c, WeightFormat format) {
  std::set<std::string> out;
  for (const ParameterTensor& t : parameter_tensors(c)) {
    std::size_t width = 0;
    for (const StoredTensor& part : stored_tensors(t, c, format)) {
      EXPECT_TRUE(out.insert(part.name).second) << part.name << " is named twice";
      EXPECT_EQ(part.first, width) << part.name;
      width += part.width;
    }
    EXPECT_EQ(width, t.shape.back()) << t.name << "'s parts do not cover it";
  }
  return out;
}

std::set<std::string> file_names(const fs::path& path, const std::string& strip) {
  std::set<std::string> out;
  for (const CheckpointTensor& t : checkpoint_summary(path.string()).tensors)
    out.insert(t.name.starts_with(strip) ? t.name.substr(strip.size()) : t.name);
  return out;
}

TEST(TensorNames, AreTheNamesInHuggingFaceFoldersOfEveryFamily) {
  for (const char* fixture :
       {"tiny-f32", "llama-f32", "mistral-f32", "qwen2-f16", "qwen3-f32-sharded", "gemma3-f32", "smollm-bf16"}) {
    SCOPED_TRACE(fixture);
    const ModelConfig c = load_model((kNameFixtures / fixture).string()).config;
    EXPECT_EQ(table_names(c, WeightFormat::kHuggingFace), file_names(kNameFixtures / fixture, "transformer."));
  }
}

TEST(TensorNames, AreTheNamesInGgufFilesOfEveryArchitecture) {
  for (const char* fixture : {"llama-f32", "mistral-f32", "qwen2-f16", "qwen3-f32", "gemma3-f32"}) {
    SCOPED_TRACE(fixture);
    const fs::path path = kNameFixtures / "gguf" / (std::string(fixture) + ".gguf");
    const ModelConfig c = load_model(path.string()).config;
    std::set<std::string> in_file = file_names(path, "");
    in_file.erase("rope_freqs.weight");  // Llama 3's frequencies: not a weight of the table
    EXPECT_EQ(table_names(c, WeightFormat::kGguf), in_file);
  }
}

TEST(TensorNames, SplitSlotsAsTheFilesDoAndMarkTheRotaryRows) {
  const ModelConfig c = load_model((kNameFixtures / "llama-f32").string()).config;
  const std::size_t hd = c.head_dim();
  for (const ParameterTensor& t : parameter_tensors(c)) {
    if (t.slot != TensorSlot::attn_weight || t.layer != 1) continue;
    const std::vector<StoredTensor> gguf = stored_tensors(t, c, WeightFormat::kGguf);
    ASSERT_EQ(gguf.size(), 3u);
    EXPECT_EQ(gguf[0].name, "blk.1.attn_q.weight");
    EXPECT_EQ(gguf[1].name, "blk.1.attn_k.weight");
    EXPECT_EQ(gguf[2].name, "blk.1.attn_v.weight");
    EXPECT_EQ(gguf[0].width, c.n_head * hd);
    EXPECT_EQ(gguf[1].first, c.n_head * hd);
    EXPECT_EQ(gguf[1].width, c.kv_heads() * hd);
    EXPECT_EQ(gguf[0].rotary_heads, c.n_head);  // q's and k's rows are reordered in a llama file
    EXPECT_EQ(gguf[1].rotary_heads, c.kv_heads());
    EXPECT_EQ(gguf[2].rotary_heads, 0u);
    EXPECT_EQ(stored_tensors(t, c, WeightFormat::kHuggingFace)[2].name, "model.layers.1.self_attn.v_proj.weight");
  }
  // A slot a format has no name for is refused naming it.
  const ParameterTensor position{"wpe.weight", {8, 8}, 0, 64, TensorSlot::wpe, kNotInABlock};
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { stored_tensors(position, c, WeightFormat::kHuggingFace); }),
                        "a llama model's tensor has no name in Hugging Face's files");
}

}  // namespace
