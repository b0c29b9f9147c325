// GPT-2's config.json read into the family-neutral config, and written back (config_json.hpp).
#include "attnlab/model/model.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "formats/config_json.hpp"

namespace attnlab {

using nlohmann::json;

ModelConfig read_gpt2_config(const std::string& path) {
  return gpt2_config(read_config_document(path, "a GPT-2 checkpoint directory holds config.json and model.safetensors"),
                     path);
}

ModelConfig gpt2_config(const json& doc, const std::string& path) {
  ModelConfig c;
  c.n_layer = config_count(doc, "n_layer", kMaxCheckpointLayers, path, "GPT-2");
  c.n_head = config_count(doc, "n_head", kMaxCheckpointHeads, path, "GPT-2");
  c.n_embd = config_count(doc, "n_embd", kMaxModelWidth, path, "GPT-2");
  c.n_positions = config_count(doc, "n_positions", kMaxModelPositions, path, "GPT-2");
  c.vocab_size = config_count(doc, "vocab_size", kMaxModelVocabulary, path, "GPT-2");
  c.n_inner = doc.contains("n_inner") && !doc["n_inner"].is_null()
                  ? config_count(doc, "n_inner", 4 * kMaxModelWidth, path, "GPT-2")
                  : 4 * c.n_embd;
  if (c.n_embd % c.n_head != 0)
    fail(path,
         fmt::format("n_embd {} is not divisible by n_head {}: heads must have equal widths", c.n_embd, c.n_head));
  if (doc.contains("layer_norm_epsilon")) {
    const json& e = doc["layer_norm_epsilon"];
    if (!e.is_number() || !(e.get<double>() > 0) || e.get<double>() > 1)
      fail(path, "\"layer_norm_epsilon\" must be a number in (0, 1]");
    c.layer_norm_epsilon = e.get<double>();
  }
  if (doc.contains("activation_function")) {
    const json& a = doc["activation_function"];
    if (!a.is_string() || (a != "gelu_new" && a != "gelu_pytorch_tanh"))
      fail(path, "\"activation_function\" must be \"gelu_new\" (the tanh GELU GPT-2 uses)");
  }
  if (c.parameters() > kMaxModelParameters)
    fail(path, fmt::format("{} parameters is more than attnlab's limit of {}", c.parameters(), kMaxModelParameters));
  return c;
}

json gpt2_config_json(const ModelConfig& c) {
  return {{"model_type", "gpt2"},
          {"architectures", {"GPT2LMHeadModel"}},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"n_positions", c.n_positions},
          {"n_ctx", c.n_positions},
          {"vocab_size", c.vocab_size},
          {"n_inner", c.n_inner == 4 * c.n_embd ? json(nullptr) : json(c.n_inner)},
          {"layer_norm_epsilon", c.layer_norm_epsilon},
          {"activation_function", "gelu_new"},
          {"tie_word_embeddings", true}};
}

}  // namespace attnlab
