// config.json of a Llama-style Hugging Face folder read into the family-neutral config, and
// written back for a Llama model (config_json.hpp): Llama 2 and 3.x, SmolLM2 and TinyLlama
// (model_type "llama"), Mistral, Qwen2 / Qwen2.5, Qwen3 and Gemma 3 ("gemma3_text", or
// "gemma3" with its text_config), its keys read as transformers writes them. The tensors'
// names are tensor_names.hpp's; hf_checkpoint.cpp reads them.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/model/model.hpp"
#include "formats/config_json.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// The families this reader knows, by config.json's model_type.
Family family_of(const json& type, const std::string& path) {
  static const std::map<std::string, Family> known = {{"llama", Family::llama},        {"mistral", Family::mistral},
                                                      {"qwen2", Family::qwen2},        {"qwen3", Family::qwen3},
                                                      {"gemma3_text", Family::gemma3}, {"gemma3", Family::gemma3}};
  if (type.is_string())
    if (const auto it = known.find(type.get<std::string>()); it != known.end()) return it->second;
  fail(path, fmt::format("\"model_type\" {} is not a family attnlab reads; it reads gpt2, llama (Llama 2 and 3, "
                         "SmolLM2, TinyLlama), mistral, qwen2, qwen3 and gemma3_text",
                         type.is_string() ? "\"" + type.get<std::string>().substr(0, 40) + "\"" : type.dump()));
}

// rope_scaling: null, {"rope_type" (or "type"): "default" | "linear" | "llama3", "factor", ...}.
void read_rope_scaling(const json& doc, RopeConfig& rope, const std::string& path) {
  if (!doc.contains("rope_scaling") || doc["rope_scaling"].is_null()) return;
  const json& s = doc["rope_scaling"];
  if (!s.is_object()) fail(path, "\"rope_scaling\" must be null or an object with \"rope_type\"");
  const json type = s.contains("rope_type") ? s["rope_type"] : s.value("type", json("default"));
  if (type == "default") return;
  if (type != "linear" && type != "llama3")
    fail(path, fmt::format("\"rope_scaling\": rope type {} is not one attnlab computes (it computes default, linear "
                           "and llama3)",
                           type.dump().substr(0, 40)));
  rope.factor = config_number(s, "factor", 1.0, 1e6, 1.0, path);
  if (type == "linear") {
    rope.scaling = RopeScaling::linear;
    return;
  }
  rope.scaling = RopeScaling::llama3;
  rope.low_freq_factor = config_number(s, "low_freq_factor", 1e-6, 1e6, 1.0, path);
  rope.high_freq_factor = config_number(s, "high_freq_factor", 1e-6, 1e6, 4.0, path);
  if (!(rope.high_freq_factor > rope.low_freq_factor))
    fail(path, "\"rope_scaling\": high_freq_factor must be larger than low_freq_factor");
  rope.original_positions =
      config_count(s, "original_max_position_embeddings", kMaxModelPositions, path, "llama3 rope_scaling");
}

// Which layers attend through a sliding window, and how wide: Mistral's sliding_window (every
// layer), Qwen2's (when use_sliding_window, the layers from max_window_layers on), Gemma 3's
// (layer_types, or every layer but each sliding_window_pattern-th).
std::vector<std::size_t> read_windows(const json& doc, const ModelConfig& c, const std::string& path) {
  if (!doc.contains("sliding_window") || doc["sliding_window"].is_null()) return {};
  if (c.family == Family::llama) return {};  // Llama configs carry none; a stray key means nothing to it
  const std::size_t w = config_count(doc, "sliding_window", kMaxModelPositions, path, family_name(c.family));
  std::vector<std::size_t> windows(c.n_layer, 0);
  if (doc.contains("layer_types") && doc["layer_types"].is_array()) {
    const json& types = doc["layer_types"];
    if (types.size() != c.n_layer)
      fail(path, fmt::format("\"layer_types\" has {} entries for {} layers", types.size(), c.n_layer));
    for (std::size_t l = 0; l < c.n_layer; ++l) {
      if (types[l] != "sliding_attention" && types[l] != "full_attention")
        fail(path, fmt::format("\"layer_types\"[{}] must be \"sliding_attention\" or \"full_attention\"", l));
      windows[l] = types[l] == "sliding_attention" ? w : 0;
    }
    return windows;
  }
  if (c.family == Family::qwen2 || c.family == Family::qwen3) {
    if (!config_flag(doc, "use_sliding_window", false, path)) return {};
    const std::size_t first = doc.contains("max_window_layers") && doc["max_window_layers"].is_number_unsigned()
                                  ? doc["max_window_layers"].get<std::size_t>()
                                  : 0;
    for (std::size_t l = first; l < c.n_layer; ++l)
      windows[l] = w;
    return windows;
  }
  if (c.family == Family::gemma3) {
    const std::size_t pattern = config_count(doc, "sliding_window_pattern", kMaxCheckpointLayers, path, "Gemma 3", 6);
    for (std::size_t l = 0; l < c.n_layer; ++l)
      windows[l] = (l + 1) % pattern != 0 ? w : 0;
    return windows;
  }
  windows.assign(c.n_layer, w);  // Mistral: every layer
  return windows;
}

}  // namespace

ModelConfig hf_family_config(const json& top, const std::string& path) {
  const Family family = family_of(top.value("model_type", json()), path);
  // A multimodal Gemma 3 keeps the language model's keys under text_config.
  const json& doc = family == Family::gemma3 && top.contains("text_config") && top["text_config"].is_object()
                        ? top["text_config"]
                        : top;
  const std::string name = family_name(family);
  ModelConfig c;
  c.family = family;
  c.n_layer = config_count(doc, "num_hidden_layers", kMaxCheckpointLayers, path, name);
  c.n_head = config_count(doc, "num_attention_heads", kMaxCheckpointHeads, path, name);
  c.n_kv_head = config_count(doc, "num_key_value_heads", kMaxCheckpointHeads, path, name, c.n_head);
  c.n_embd = config_count(doc, "hidden_size", kMaxModelWidth, path, name);
  c.n_inner = config_count(doc, "intermediate_size", 4 * kMaxModelWidth, path, name);
  c.n_positions = config_count(doc, "max_position_embeddings", kMaxModelPositions, path, name);
  c.vocab_size = config_count(doc, "vocab_size", kMaxModelVocabulary, path, name);
  if (c.n_head % c.n_kv_head != 0)
    fail(path, fmt::format("\"num_key_value_heads\" {} does not divide \"num_attention_heads\" {}: each KV head must "
                           "serve the same number of query heads",
                           c.n_kv_head, c.n_head));
  if (doc.contains("head_dim") && !doc["head_dim"].is_null())
    c.head_width = config_count(doc, "head_dim", kMaxModelWidth, path, name);
  else if (c.n_embd % c.n_head != 0)
    fail(path, fmt::format("\"hidden_size\" {} is not divisible by \"num_attention_heads\" {} and there is no "
                           "\"head_dim\"",
                           c.n_embd, c.n_head));
  if (c.head_dim() % 2 != 0)
    fail(path, fmt::format("head_dim {} is odd; rotary pairs need an even width", c.head_dim()));
  c.norm = NormKind::rms_norm;
  c.layer_norm_epsilon = config_number(doc, "rms_norm_eps", 1e-12, 1.0, 1e-6, path);
  c.rotary = true;
  c.rope.theta = config_number(doc, "rope_theta", 1.0, 1e12, 10000.0, path);
  const double partial = config_number(doc, "partial_rotary_factor", 0.0, 1.0, 1.0, path);
  c.rope.rotated = static_cast<std::size_t>(std::lround(partial * static_cast<double>(c.head_dim()))) / 2 * 2;
  if (c.rope.rotated == 0) fail(path, "\"partial_rotary_factor\" leaves no rotated pairs");
  read_rope_scaling(doc, c.rope, path);
  // Biases: Qwen2 on q, k, v; Llama and Mistral where attention_bias says (q, k, v and o).
  const bool attention_bias = config_flag(doc, "attention_bias", false, path);
  c.qkv_bias = family == Family::qwen2 || attention_bias;
  c.out_bias = attention_bias && family != Family::qwen2;
  c.mlp_bias = config_flag(doc, "mlp_bias", false, path);
  c.qk_norm = family == Family::qwen3 || family == Family::gemma3;
  // The MLP: SiLU-gated (hidden_act "silu") or GELU-gated (Gemma's "gelu_pytorch_tanh").
  const json act = doc.contains("hidden_activation")
                       ? doc["hidden_activation"]
                       : doc.value("hidden_act", json(family == Family::gemma3 ? "gelu_pytorch_tanh" : "silu"));
  if (act == "silu" || act == "swish")
    c.mlp = MlpKind::swiglu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast")
    c.mlp = MlpKind::geglu;
  else
    fail(path, fmt::format("the activation {} is not one attnlab computes (silu, gelu_pytorch_tanh)",
                           act.dump().substr(0, 40)));
  c.tied = config_flag(top, "tie_word_embeddings", family == Family::gemma3, path);
  if (top.contains("bos_token_id") && top["bos_token_id"].is_number_unsigned() &&
      top["bos_token_id"].get<std::size_t>() < c.vocab_size)
    c.bos_id = top["bos_token_id"].get<int>();
  c.sliding_window = read_windows(doc, c, path);
  if (family == Family::gemma3) {
    c.norm_plus_one = true;
    c.sandwich_norms = true;
    c.embedding_scale = std::sqrt(static_cast<double>(c.n_embd));
    c.rope.local_theta = config_number(doc, "rope_local_base_freq", 1.0, 1e12, 10000.0, path);
    const double scalar = config_number(doc, "query_pre_attn_scalar", 1e-6, 1e9, double(c.head_dim()), path);
    c.query_scale = 1.0 / std::sqrt(scalar);
    for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"})
      if (doc.contains(key) && !doc[key].is_null())
        fail(path, fmt::format("\"{}\" is set; attnlab runs Gemma 3, which has none (Gemma 2's soft-capping is not "
                               "computed)",
                               key));
  }
  if (c.parameters() > kMaxModelParameters)
    fail(path, fmt::format("{} parameters is more than attnlab's limit of {}", c.parameters(), kMaxModelParameters));
  return c;
}

json llama_config_json(const ModelConfig& c) {
  const std::size_t hd = c.head_dim();
  json config = {{"model_type", "llama"},
                 {"architectures", {"LlamaForCausalLM"}},
                 {"num_hidden_layers", c.n_layer},
                 {"num_attention_heads", c.n_head},
                 {"num_key_value_heads", c.kv_heads()},
                 {"hidden_size", c.n_embd},
                 {"head_dim", hd},
                 {"intermediate_size", c.n_inner},
                 {"max_position_embeddings", c.n_positions},
                 {"vocab_size", c.vocab_size},
                 {"rms_norm_eps", c.layer_norm_epsilon},
                 {"rope_theta", c.rope.theta},
                 {"hidden_act", c.mlp == MlpKind::swiglu ? "silu" : "gelu_pytorch_tanh"},
                 {"attention_bias", c.qkv_bias},
                 {"mlp_bias", c.mlp_bias},
                 {"tie_word_embeddings", c.tied},
                 {"torch_dtype", "float32"}};
  if (c.rope.rotated && c.rope.rotated != hd) config["partial_rotary_factor"] = double(c.rope.rotated) / double(hd);
  if (c.rope.scaling == RopeScaling::linear)
    config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope.factor}};
  if (c.rope.scaling == RopeScaling::llama3)
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", c.rope.factor},
                              {"low_freq_factor", c.rope.low_freq_factor},
                              {"high_freq_factor", c.rope.high_freq_factor},
                              {"original_max_position_embeddings", c.rope.original_positions}};
  if (c.bos_id >= 0) config["bos_token_id"] = c.bos_id;
  return config;
}

}  // namespace attnlab
