// Path patching (analysis/attribution.hpp, PatchPath): one head's q, k or v read from another
// stream (ForwardOptions::replace_inputs). Checked by identities the engine must keep, each
// through a second path: a head whose inputs read the run's own stream is the run; a head whose
// three inputs read the clean stream is the head's clean output patched in (replace_heads). The
// trained model's known answers (the induction head's key reads the previous-token head, its
// query does not) are in TrainCli.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "compare.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;

const fs::path kPathFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

ForwardResult path_run(const Model& model, const std::vector<int>& ids) {
  return model_forward(model, ids, {.logits = LogitRows::last, .keep_stream = true});
}

TEST(PathPatching, AHeadWhoseInputsReadItsOwnStreamIsTheRunItself) {
  for (const char* fixture : {"tiny-f32", "llama-f32", "gemma3-f32"}) {
    SCOPED_TRACE(fixture);
    const Model model = load_model((kPathFixtures / fixture).string());
    const std::vector<int> ids = {1, 5, 9, 2, 5, 9, 30, 4};
    const ForwardResult run = path_run(model, ids);
    const std::size_t layer = model.config.n_layer - 1;
    ForwardOptions same;
    for (char input : {'q', 'k', 'v'})
      same.replace_inputs.push_back({{layer, 1}, input, run.stream[layer].x_in});
    const std::vector<float> plain = forward_from(model, layer, run.stream[layer].x_in, {}, ids.size() - 1),
                             replaced = forward_from(model, layer, run.stream[layer].x_in, same, ids.size() - 1);
    EXPECT_EQ(plain, replaced);
  }
}

TEST(PathPatching, AllThreeInputsFromTheCleanStreamAreTheHeadsCleanOutput) {
  for (const char* fixture : {"tiny-f32", "llama-f32", "gemma3-f32"}) {
    SCOPED_TRACE(fixture);
    const Model model = load_model((kPathFixtures / fixture).string());
    const ModelConfig& c = model.config;
    const std::vector<int> clean = {1, 5, 9, 2, 5, 9, 30, 4}, corrupt = {1, 5, 9, 2, 7, 9, 30, 4};
    const ForwardResult a = path_run(model, clean), b = path_run(model, corrupt);
    const std::size_t layer = c.n_layer - 1, head = c.n_head - 1, hd = c.head_dim(), Z = c.attention_width();
    ForwardOptions inputs, output;
    for (char input : {'q', 'k', 'v'})
      inputs.replace_inputs.push_back({{layer, head}, input, a.stream[layer].x_in});
    HeadReplacement& r = output.replace_heads.emplace_back(HeadReplacement{{layer, head}, {}});
    for (std::size_t i = 0; i < clean.size(); ++i)
      r.z.insert(r.z.end(), a.stream[layer].z.begin() + std::ptrdiff_t(i * Z + head * hd),
                 a.stream[layer].z.begin() + std::ptrdiff_t(i * Z + (head + 1) * hd));
    if (c.kv_heads() != c.n_head) {     // a shared KV head: its k and v reach the other heads too; keep to one
      inputs.replace_inputs.resize(1);  // q alone
      inputs.replace_inputs[0] = {{layer, head}, 'q', a.stream[layer].x_in};
      const std::vector<float> q_only = forward_from(model, layer, b.stream[layer].x_in, inputs, clean.size() - 1);
      const std::vector<float> untouched = forward_from(model, layer, b.stream[layer].x_in, {}, clean.size() - 1);
      EXPECT_NE(q_only, untouched) << "the query read another stream";
      continue;
    }
    const std::vector<float> x = forward_from(model, layer, b.stream[layer].x_in, inputs, clean.size() - 1),
                             y = forward_from(model, layer, b.stream[layer].x_in, output, clean.size() - 1);
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t k = 0; k < x.size(); ++k)
      EXPECT_NEAR(x[k], y[k], 2e-5) << k;
  }
}

TEST(PathPatching, PathsAreReadCheckedAndEachOneReported) {
  const Model model = load_model((kPathFixtures / "tiny-f32").string());
  const ModelConfig& c = model.config;
  EXPECT_EQ(to_string(parse_patch_path("0.1:1.2:k", c, "path")), "0.1:1.2:k");
  EXPECT_ERROR_CONTAINS(
      test::error_of_call([&] { parse_patch_path("1.0:0.0:k", c, "path[0]"); }),
      "path[0]: \"1.0:0.0:k\" does not go forward: the sender's layer 1 is not below the receiver's 0");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { parse_patch_path("0.0:1.0:x", c, "path"); }), "names no input");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { parse_patch_path("0.0", c, "path"); }), "is not a path");
  EXPECT_ERROR_CONTAINS(test::error_of_call([&] { parse_patch_path("0.0:3.0:q", c, "path"); }), "does not exist");
  // Only the last token differs: the sender's output there differs, so the receiver's query at
  // the last position, which the metric reads, changes.
  const std::vector<int> clean = {3, 17, 5, 9, 3, 17, 5, 9, 22}, corrupt = {3, 17, 5, 9, 3, 17, 5, 9, 30};
  const ResidualPatching p =
      patch_residual(model, clean, corrupt, -1, -1, {},
                     {parse_patch_path("0.1:1.2:q", c, "path"), parse_patch_path("0.1:1.2:k", c, "path")});
  ASSERT_EQ(p.paths_restored.size(), 2u);
  EXPECT_EQ(to_string(p.paths[1]), "0.1:1.2:k");
  for (double share : p.paths_restored)
    EXPECT_TRUE(std::isfinite(share));
  EXPECT_NE(p.paths_restored[0], 0.0) << "the sender's output at the last token differs";
}

}  // namespace
