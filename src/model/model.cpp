// The family-neutral config and the reader that picks a family (attnlab/model/model.hpp).
#include "attnlab/model/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/tensor_names.hpp"
#include "formats/config_json.hpp"

namespace attnlab {

using nlohmann::json;

const char* family_name(Family family) {
  switch (family) {
    case Family::gpt2: return "gpt2";
    case Family::llama: return "llama";
    case Family::mistral: return "mistral";
    case Family::qwen2: return "qwen2";
    case Family::qwen3: return "qwen3";
    case Family::gemma3: return "gemma3";
  }
  return "?";
}

std::vector<ParameterTensor> parameter_tensors(const ModelConfig& c) {
  const std::size_t d = c.n_embd, hd = c.head_dim();
  const bool layer_norm = c.norm == NormKind::layer_norm;  // RMSNorm has no bias
  std::vector<ParameterTensor> out;
  std::size_t offset = 0;
  // The slot's tensor (named as tensor_names() says, with its block's number), when present.
  const auto add = [&](TensorSlot slot, std::vector<std::size_t> shape, std::size_t layer, bool present = true) {
    if (!present) return;
    std::string name(tensor_names(slot).attnlab);
    if (layer != kNotInABlock) name.replace(name.find('#'), 1, std::to_string(layer));
    std::size_t size = 1;
    for (std::size_t s : shape)
      size *= s;
    out.push_back({std::move(name), std::move(shape), offset, size, slot, layer});
    offset += size;
  };
  using S = TensorSlot;
  add(S::wte, {c.vocab_size, d}, kNotInABlock);
  add(S::wpe, {c.n_positions, d}, kNotInABlock, !c.rotary);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    add(S::ln_1_weight, {d}, l);
    add(S::ln_1_bias, {d}, l, layer_norm);
    add(S::attn_weight, {d, c.qkv_width()}, l);
    add(S::attn_bias, {c.qkv_width()}, l, c.qkv_bias);
    add(S::q_norm_weight, {hd}, l, c.qk_norm);
    add(S::k_norm_weight, {hd}, l, c.qk_norm);
    add(S::attn_proj_weight, {c.attention_width(), d}, l);
    add(S::attn_proj_bias, {d}, l, c.out_bias);
    add(S::post_attn_norm_weight, {d}, l, c.sandwich_norms);
    add(S::ln_2_weight, {d}, l);
    add(S::ln_2_bias, {d}, l, layer_norm);
    add(S::mlp_fc_weight, {d, c.fc_width()}, l);
    add(S::mlp_fc_bias, {c.fc_width()}, l, c.mlp_bias);
    add(S::mlp_proj_weight, {c.n_inner, d}, l);
    add(S::mlp_proj_bias, {d}, l, c.mlp_bias);
    add(S::post_mlp_norm_weight, {d}, l, c.sandwich_norms);
  }
  add(S::ln_f_weight, {d}, kNotInABlock);
  add(S::ln_f_bias, {d}, kNotInABlock, layer_norm);
  add(S::lm_head, {c.vocab_size, d}, kNotInABlock, !c.tied);
  return out;
}

std::size_t ModelConfig::parameters() const {
  std::size_t total = 0;
  for (const ParameterTensor& t : parameter_tensors(*this))
    total += t.size;
  return total;
}

namespace {

const char* norm_name(const ModelConfig& c) {
  if (c.norm == NormKind::layer_norm) return "LayerNorm";
  return c.norm_plus_one ? "RMSNorm (1 + w)" : "RMSNorm";
}

const char* mlp_name(MlpKind mlp) {
  switch (mlp) {
    case MlpKind::gelu: return "GELU";
    case MlpKind::swiglu: return "SwiGLU";
    case MlpKind::geglu: return "GeGLU";
  }
  return "?";
}

const char* scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::none: return "none";
    case RopeScaling::linear: return "linear";
    case RopeScaling::llama3: return "llama3";
  }
  return "?";
}

// "window 4 on layers 0-1, 3-4" style: which layers slide and how far.
std::string windows_text(const ModelConfig& c) {
  std::vector<std::string> parts;
  for (std::size_t l = 0; l < c.n_layer; ++l)
    if (c.window(l)) parts.push_back(fmt::format("{}:{}", l, c.window(l)));
  return parts.size() == c.n_layer && !parts.empty()
             ? fmt::format("sliding window {} on every layer", c.window(0))
             : fmt::format("sliding windows (layer:width) {}", fmt::join(parts, " "));
}

}  // namespace

std::string describe(const ModelConfig& c) {
  const std::size_t kv = c.kv_heads();
  const std::string heads = kv == c.n_head ? fmt::format("{} heads", c.n_head)
                                           : fmt::format("{} query heads sharing {} KV head{} ({})", c.n_head, kv,
                                                         kv == 1 ? "" : "s", kv == 1 ? "multi-query" : "grouped-query");
  std::string positions = "learned positions";
  if (c.rotary) {
    positions = fmt::format("rotary θ {}", c.rope.theta);
    if (c.rope.scaling != RopeScaling::none)
      positions += fmt::format(" ({} × {})", scaling_name(c.rope.scaling), c.rope.factor);
    if (!c.rope.divisors.empty()) positions += " (scaled by the file's rope_freqs)";
    if (c.rope.local_theta > 0) positions += fmt::format(", θ {} on window layers", c.rope.local_theta);
  }
  std::string extras;
  if (c.qk_norm) extras += ", QK-norm";
  if (c.qkv_bias && c.rotary) extras += ", q/k/v biases";
  if (c.sandwich_norms) extras += ", four norms per block";
  if (!c.sliding_window.empty()) extras += ", " + windows_text(c);
  return fmt::format(
      "{}: {} layers × {}, d_model {}, head_dim {}, {}, {}{}, {} MLP {}, {}, {} positions, vocabulary {}",
      family_name(c.family), c.n_layer, heads, c.n_embd, c.head_dim(), norm_name(c), positions, extras, mlp_name(c.mlp),
      c.n_inner, c.tied ? "LM head tied to the embedding" : "separate LM head", c.n_positions, c.vocab_size);
}

json config_json(const ModelConfig& c) {
  json windows = json::array();
  for (std::size_t l = 0; l < c.n_layer; ++l)
    windows.push_back(c.window(l) ? json(c.window(l)) : json(nullptr));
  return {{"family", family_name(c.family)},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_kv_head", c.kv_heads()},
          {"n_embd", c.n_embd},
          {"head_dim", c.head_dim()},
          {"n_inner", c.n_inner},
          {"n_positions", c.n_positions},
          {"vocab_size", c.vocab_size},
          {"norm", c.norm == NormKind::layer_norm ? "layer_norm" : "rms_norm"},
          {"positions", c.rotary ? "rotary" : "learned"},
          {"rope_theta", c.rotary ? json(c.rope.theta) : json(nullptr)},
          {"rope_scaling", !c.rotary                 ? json(nullptr)
                           : c.rope.divisors.empty() ? json(scaling_name(c.rope.scaling))
                                                     : json("rope_freqs")},
          {"mlp", c.mlp == MlpKind::gelu     ? "gelu"
                  : c.mlp == MlpKind::swiglu ? "swiglu"
                                             : "geglu"},
          {"qk_norm", c.qk_norm},
          {"tied", c.tied},
          {"sliding_window", std::move(windows)},
          {"parameters", c.parameters()}};
}

json read_config_document(const std::string& path, std::string_view what) {
  constexpr std::size_t kMaxConfigBytes = 1 << 20;
  const json doc = parse_json_document(read_file_within(path, kMaxConfigBytes, path, what), path);
  if (!doc.is_object()) fail(path, "not a JSON object");
  return doc;
}

std::size_t config_count(const json& doc, const char* key, std::size_t limit, const std::string& path,
                         std::string_view family, std::size_t fallback) {
  if (!doc.contains(key) || doc[key].is_null()) {
    if (fallback) return fallback;
    fail(path, fmt::format("\"{}\" is missing; a {} config.json names it", key, family));
  }
  const json& v = doc[key];
  if (!v.is_number_unsigned() || v.get<std::size_t>() < 1 || v.get<std::size_t>() > limit)
    fail(path, fmt::format("\"{}\" must be a whole number from 1 to {}", key, limit));
  return v.get<std::size_t>();
}

double config_number(const json& doc, const char* key, double low, double high, double fallback,
                     const std::string& path) {
  if (!doc.contains(key) || doc[key].is_null()) return fallback;
  const json& v = doc[key];
  if (!v.is_number() || !(v.get<double>() >= low) || !(v.get<double>() <= high))
    fail(path, fmt::format("\"{}\" must be a number from {} to {}", key, low, high));
  return v.get<double>();
}

bool config_flag(const json& doc, const char* key, bool fallback, const std::string& path) {
  if (!doc.contains(key) || doc[key].is_null()) return fallback;
  if (!doc[key].is_boolean()) fail(path, fmt::format("\"{}\" must be true or false", key));
  return doc[key].get<bool>();
}

void check_shape(const std::string& path, const std::string& name, const std::vector<std::size_t>& have,
                 const std::vector<std::size_t>& want) {
  if (have == want) return;
  const auto text = [](const std::vector<std::size_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); };
  fail(path,
       fmt::format("tensor \"{}\" has shape {} but the config needs {}", text_excerpt(name), text(have), text(want)));
}

ModelConfig parse_model_config(const json& config, const std::string& path) {
  if (!config.is_object()) fail(path, "not a JSON object");
  return config.value("model_type", json("gpt2")) == "gpt2" ? gpt2_config(config, path)
                                                            : hf_family_config(config, path);
}

std::size_t Model::weight_bytes() const {
  std::size_t total = 0;
  for (const ParameterTensor& t : parameter_tensors(config))
    total += tensor_of(*this, t).bytes();
  return total;
}

Model::Read Model::read_per_token() const {
  Read read;
  for (const ParameterTensor& t : parameter_tensors(config)) {
    const Tensor& tensor = tensor_of(*this, t);
    const bool looked_up = t.slot == TensorSlot::wpe || (t.slot == TensorSlot::wte && !config.tied);
    const std::size_t parts = looked_up ? t.shape.front() : 1;  // a row of the table
    read.bytes += tensor.bytes() / parts;
    read.values += tensor.size() / parts;
  }
  return read;
}

void widen_to_f32(Model& model) {
  for (const ParameterTensor& t : parameter_tensors(model.config))
    if (Tensor& tensor = tensor_of(model, t); !tensor.owned()) tensor = tensor.to_f32();
}

bool is_gguf_path(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  if (std::filesystem::path(path).extension() == ".gguf") return true;
  char magic[4] = {};  // an Ollama blob has no extension: its first bytes say
  std::ifstream(path, std::ios::binary).read(magic, 4);
  return std::string_view(magic, 4) == "GGUF";
}

std::string resolve_model_path(const std::string& spec) {
  constexpr std::string_view prefix = "ollama:";
  if (!spec.starts_with(prefix)) return spec;
  // NAME[:TAG], NAMESPACE/NAME[:TAG] or HOST/NAMESPACE/NAME[:TAG], as `ollama pull` takes them.
  std::string name = spec.substr(prefix.size()), tag = "latest";
  if (const std::size_t colon = name.rfind(':');
      colon != std::string::npos && name.find('/', colon) == std::string::npos) {
    tag = name.substr(colon + 1);
    name.resize(colon);
  }
  const auto safe = [](std::string_view part) {
    return !part.empty() && part != "." && part != ".." &&
           part.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
               std::string_view::npos;
  };
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t slash = name.find('/', at);
    parts.push_back(name.substr(at, slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  if (parts.size() > 3 || !safe(tag) || !std::all_of(parts.begin(), parts.end(), safe))
    fail(spec, "is not an Ollama model name; write it as `ollama list` shows it, e.g. ollama:qwen2.5:0.5b");
  if (parts.size() == 1) parts.insert(parts.begin(), "library");
  if (parts.size() == 2) parts.insert(parts.begin(), "registry.ollama.ai");
  // The store: $OLLAMA_MODELS, else ~/.ollama/models (where `ollama serve` keeps it).
  std::filesystem::path store;
  if (const char* models = std::getenv("OLLAMA_MODELS"); models && *models)
    store = models;
  else if (const char* home = std::getenv("HOME"); home && *home)
    store = std::filesystem::path(home) / ".ollama" / "models";
  std::error_code error;
  if (store.empty() || !std::filesystem::is_directory(store / "manifests", error))
    fail(spec, fmt::format("there is no Ollama model store at {} (looked for its manifests folder); set "
                           "OLLAMA_MODELS to the folder `ollama serve` keeps models in",
                           store.empty() ? "$HOME/.ollama/models" : store.string()));
  const std::filesystem::path manifest = store / "manifests" / parts[0] / parts[1] / parts[2] / tag;
  if (!std::filesystem::is_regular_file(manifest, error))
    fail(spec, fmt::format("Ollama's store has no model {}:{} ({} is missing); `ollama list` shows the models it "
                           "has, `ollama pull {}:{}` fetches this one",
                           name, tag, manifest.string(), name, tag));
  const json doc = read_config_document(manifest.string(), "an Ollama manifest is a JSON object with \"layers\"");
  if (doc.contains("layers") && doc["layers"].is_array())
    for (const json& layer : doc["layers"])
      if (layer.is_object() && layer.contains("mediaType") &&
          layer["mediaType"] == "application/vnd.ollama.image.model") {
        const std::string digest =
            layer.contains("digest") && layer["digest"].is_string() ? layer["digest"].get<std::string>() : "";
        if (!digest.starts_with("sha256:") || digest.size() != 7 + 64 ||
            digest.find_first_not_of("0123456789abcdef", 7) != std::string::npos)
          fail(manifest.string(), "the model layer's digest is not sha256:<64 hex digits>");
        const std::filesystem::path blob = store / "blobs" / ("sha256-" + digest.substr(7));
        if (!std::filesystem::is_regular_file(blob, error))
          fail(spec, fmt::format("the model's blob {} is missing from Ollama's store; `ollama pull {}:{}` fetches "
                                 "it again",
                                 blob.string(), name, tag));
        return blob.string();
      }
  fail(manifest.string(), "names no model layer (mediaType application/vnd.ollama.image.model)");
}

Model load_model(const std::string& spec, const LoadOptions& options) {
  const std::string dir = resolve_model_path(spec);
  const std::filesystem::path root(dir);
  if (is_gguf_path(dir)) {
    Model model = load_gguf(dir);
    if (options.f32) widen_to_f32(model);
    return model;
  }
  if (!std::filesystem::is_directory(root))
    fail(dir, "not a directory; give the folder that holds config.json and model.safetensors, or a .gguf file");
  const std::string path = (root / "config.json").string();
  // config.json read once; its family decides the weights' reader.
  const ModelConfig config =
      parse_model_config(read_config_document(path, "a model directory holds config.json and model.safetensors"), path);
  Model model = hf_weights(dir, config);
  if (options.f32) widen_to_f32(model);
  return model;
}

void save_model(const std::string& dir, const Model& model, DType dtype) {
  if (model.config.family == Family::gpt2)
    save_gpt2(dir, model, dtype);
  else
    save_hf_family(dir, model, dtype);
}

}  // namespace attnlab
