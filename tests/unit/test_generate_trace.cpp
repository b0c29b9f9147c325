// A traced generation (model/generate.hpp, GenerateOptions::trace): each step's weights over
// the cache are the full forward's attention row at that position, over the prompt and the
// tokens generated so far; its alternatives are the forward's most probable tokens there.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/generate.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/generate.hpp"

namespace {

namespace fs = std::filesystem;
using namespace attnlab;

const fs::path kTraceFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

TEST(GenerateTrace, EachStepIsTheForwardsAttentionRowAtItsPosition) {
  // GPT-2, Llama (GQA), Mistral (a sliding window), Gemma 3 (local and global layers).
  for (const char* fixture : {"tiny-f32", "llama-f32", "mistral-f32", "gemma3-f32"}) {
    SCOPED_TRACE(fixture);
    const Model model = load_model((kTraceFixtures / fixture).string());
    const ModelConfig& c = model.config;
    const std::vector<int> prompt = {1, 5, 9, 2, 5, 9, 30};
    GenerateOptions o;
    o.tokens = 6;
    o.trace = true;
    o.alternatives = 3;
    const std::vector<GeneratedToken> steps = generate(model, prompt, o);
    std::vector<int> all = prompt;
    for (const GeneratedToken& t : steps)
      all.push_back(t.id);
    const ForwardResult run = model_forward(model, all, {.keep_attention = true});
    const std::size_t n = all.size();
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const GeneratedToken& t = steps[k];
      ASSERT_EQ(t.position, prompt.size() - 1 + k);
      const std::size_t row = t.position + 1;
      ASSERT_EQ(t.attention.size(), c.n_layer * c.n_head * row);
      for (std::size_t l = 0; l < c.n_layer; ++l)
        for (std::size_t h = 0; h < c.n_head; ++h)
          for (std::size_t j = 0; j < row; ++j)
            ASSERT_NEAR(t.attention[(l * c.n_head + h) * row + j], run.attention[l][(h * n + t.position) * n + j], 1e-5)
                << "step " << k << " layer " << l << " head " << h << " key " << j;
      const std::vector<TokenProbability> top = top_k(run.logits_at(t.position), 3);
      ASSERT_EQ(t.alternatives.size(), 3u);
      EXPECT_EQ(t.alternatives[0].id, t.id);  // greedy: the most probable is the one chosen
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(t.alternatives[i].id, top[i].id);
        EXPECT_NEAR(t.alternatives[i].probability, top[i].probability, 1e-5);
      }
    }
  }
}

TEST(GenerateTrace, ItsSizeIsPricedAsLayersTimesHeadsTimesTheCache) {
  const Model model = load_model((kTraceFixtures / "tiny-f32").string());
  // 3 new tokens after 4: caches of 4, 5 and 6 tokens, 2 layers × 4 heads.
  EXPECT_EQ(trace_numbers(model.config, 4, 3), 2.0 * 4 * (4 + 5 + 6));
  GenerateOptions o;
  o.tokens = 2;  // untraced: nothing kept
  const std::vector<int> prompt = {1, 2};
  for (const GeneratedToken& t : generate(model, prompt, o)) {
    EXPECT_TRUE(t.attention.empty());
    EXPECT_TRUE(t.alternatives.empty());
  }
  // Priced before any work: over the face's limit, refused naming "trace" with the numbers.
  const ModelDir dir = open_model_dir((kTraceFixtures / "tiny-f32").string());
  GenerateRequest request;
  request.text.ids = std::vector<int>{1, 2, 3, 4};
  request.options.tokens = 3;
  request.options.trace = true;
  EXPECT_NO_THROW(price_generate(dir, request, {.max_trace_numbers = 120}));
  try {
    price_generate(dir, request, {.max_trace_numbers = 119});
    ADD_FAILURE() << "a trace over the limit was not refused";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "trace");
    EXPECT_NE(std::string(e.what()).find("120 attention weights"), std::string::npos) << e.what();
  }
}

}  // namespace
