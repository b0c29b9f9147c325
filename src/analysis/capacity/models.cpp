// The model presets. Parameter counts were summed from each config (and checked against
// the checkpoints' published totals, e.g. llama-3-8b 8,030,261,248):
//   gpt2          wte 50257·768 + wpe 1024·768 + 12 blocks of 7,087,872 + ln_f 1,536
//   gpt2-xl       wte 50257·1600 + wpe 1024·1600 + 48 blocks of 30,740,800 + ln_f 3,200
//   llama-2-7b    2 · 32000·4096 (embed, head) + 32 · 202,383,360 + norm 4,096
//   llama-3-8b    2 · 128256·4096 + 32 · 218,112,000 + 4,096
//   llama-3-70b   2 · 128256·8192 + 80 · 855,654,400 + 8,192
//   mistral-7b    2 · 32000·4096 + 32 · 218,112,000 + 4,096
//   qwen2.5-7b    2 · 152064·3584 + 28 · 233,057,792 (q/k/v biases included) + 3,584
//   gemma-2-9b    256000·3584 (tied) + 42 · 198,195,200 (four norms per block) + 3,584
#include "attnlab/analysis/models.hpp"

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

namespace attnlab {

const std::vector<ModelShape>& model_presets() {
  static const std::vector<ModelShape> presets{
      {"gpt2", "openai-community/gpt2", 12, 768, 12, 12, 64, 124'439'808, ""},
      {"gpt2-xl", "openai-community/gpt2-xl", 48, 1600, 25, 25, 64, 1'557'611'200, ""},
      {"llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 128, 6'738'415'616, ""},
      {"llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 8'030'261'248, ""},
      {"llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 70'553'706'496, ""},
      {"mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 7'241'732'096,
       "Mistral-7B-v0.1 attends within a sliding window of 4096 tokens; a rolling-buffer cache "
       "stops growing at 4096 tokens, the formula here assumes a full cache"},
      {"qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 28, 4, 128, 7'615'616'512, ""},
      {"gemma-2-9b", "google/gemma-2-9b", 42, 3584, 16, 8, 256, 9'241'705'984,
       "Gemma 2 alternates sliding-window (4096 tokens) and global layers; a cache that exploits "
       "this holds half the layers at 4096 tokens, the formula here counts every layer in full"},
  };
  return presets;
}

std::string model_names() {
  std::vector<std::string> names;
  for (const ModelShape& m : model_presets())
    names.push_back(m.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

const ModelShape& find_model(std::string_view name, std::string_view field) {
  for (const ModelShape& m : model_presets())
    if (m.name == name) return m;
  fail(field, fmt::format("unknown model \"{}\"; the known models are: {} (or give the shape itself: "
                          "layers, KV heads, head dim)",
                          name, model_names()));
}

}  // namespace attnlab
