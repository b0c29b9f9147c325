// Llama-family checkpoints in Hugging Face's layout (attnlab/model/model.hpp): Llama 2 and 3.x,
// SmolLM2 and TinyLlama (model_type "llama"), Mistral, Qwen2 / Qwen2.5, Qwen3 and Gemma 3
// ("gemma3_text", or "gemma3" with its text_config). config.json's keys and the tensor names
// are read as transformers writes them:
//
//   model.embed_tokens.weight                         [V, d]
//   model.layers.N.input_layernorm.weight             [d]      the attention's input norm
//   model.layers.N.self_attn.{q,k,v}_proj.weight      [H·hd | H_kv·hd | H_kv·hd, d]  (+ .bias: Qwen2)
//   model.layers.N.self_attn.{q,k}_norm.weight        [hd]     Qwen3, Gemma 3
//   model.layers.N.self_attn.o_proj.weight            [d, H·hd]
//   model.layers.N.post_attention_layernorm.weight    [d]      Llama: the MLP's input norm;
//                                                              Gemma 3: the attention output's norm
//   model.layers.N.{pre,post}_feedforward_layernorm   [d]      Gemma 3
//   model.layers.N.mlp.{gate,up}_proj.weight          [I, d];  mlp.down_proj.weight [d, I]
//   model.norm.weight [d];  lm_head.weight [V, d] (absent when tie_word_embeddings)
//
// Each [out, in] weight is transposed into attnlab's row-vector [in × out].
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/safetensors.hpp"
#include "config_json.hpp"
#include "mapped_files.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxShards = 1024;

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

namespace {

// The checkpoint's files: model.safetensors, or the shards model.safetensors.index.json names.
class Checkpoint {
 public:
  explicit Checkpoint(const std::filesystem::path& root) {
    const std::filesystem::path single = root / "model.safetensors", index = root / "model.safetensors.index.json";
    if (std::filesystem::exists(single) || !std::filesystem::exists(index)) {
      files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
      return;
    }
    const json doc = read_config_document(index.string(), "a sharded checkpoint's index names each tensor's file");
    if (!doc.contains("weight_map") || !doc["weight_map"].is_object())
      fail(index.string(), "\"weight_map\" is missing; the index maps each tensor name to its shard's file name");
    std::map<std::string, std::size_t> opened;
    for (const auto& item : doc["weight_map"].items()) {
      if (!item.value().is_string())
        fail(index.string(), fmt::format("\"weight_map\".\"{}\" is not a file name", item.key().substr(0, 80)));
      const std::string file = item.value().get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos)
        fail(index.string(), fmt::format("shard \"{}\" must be a file name in the same folder", file.substr(0, 80)));
      if (!opened.count(file)) {
        if (opened.size() >= kMaxShards) fail(index.string(), fmt::format("more than {} shards", kMaxShards));
        opened[file] = files_.size();
        files_.push_back(std::make_unique<SafetensorsFile>((root / file).string()));
      }
      where_[item.key()] = opened[file];
    }
  }

  const TensorInfo* find(const std::string& name, const SafetensorsFile** file) const {
    if (const auto it = where_.find(name); it != where_.end()) {
      *file = files_[it->second].get();
      return (*file)->find(name);
    }
    for (const auto& f : files_)
      if (const TensorInfo* t = f->find(name)) {
        *file = f.get();
        return t;
      }
    return nullptr;
  }

  // The tensor called `name` (with or without the "model." prefix) of exactly `shape`, and its file.
  std::pair<const SafetensorsFile*, const TensorInfo*> find_shaped(const std::string& name,
                                                                   const std::vector<std::size_t>& shape) const {
    const SafetensorsFile* file = files_.front().get();
    const TensorInfo* t = find("model." + name, &file);
    if (!t) t = find(name, &file);
    if (!t) fail(file->path(), fmt::format("tensor \"model.{}\" is missing (the config needs it)", name));
    check_shape(file->path(), t->name, t->shape, shape);
    return {file, t};
  }

  // A vector (a norm's weight, a bias) as f32.
  std::vector<float> tensor(const std::string& name, const std::vector<std::size_t>& shape) const {
    const auto [file, t] = find_shaped(name, shape);
    return file->to_f32(*t);
  }

  // The row-vector [in × out] matrix whose columns are the nn.Linear weights `names` ([out_i,
  // in] each) side by side, viewed where they lie in the files.
  Tensor linear(const std::vector<std::pair<std::string, std::size_t>>& names, std::size_t in) const {
    std::vector<Tensor::Piece> pieces;
    std::size_t out = 0;
    for (const auto& [name, width] : names) {
      const auto [file, t] = find_shaped(name, {width, in});
      pieces.push_back(mapped_->piece(*file, *t, width, true));
      out += width;
    }
    return Tensor::view(in, out, std::move(pieces), mapped_);
  }

  // A [rows × cols] matrix stored as it is held (the embedding, the LM head).
  Tensor matrix(const std::string& name, std::size_t rows, std::size_t cols) const {
    const auto [file, t] = find_shaped(name, {rows, cols});
    return mapped_tensor(mapped_, *file, *t);
  }

  bool has(const std::string& name) const {
    const SafetensorsFile* file = nullptr;
    return find("model." + name, &file) || find(name, &file);
  }

  CheckpointSummary summary() const {
    CheckpointSummary out;
    out.files = files_.size();
    out.format = "safetensors";
    for (const auto& f : files_) {
      out.bytes += f->file_bytes();
      for (const TensorInfo& t : f->tensors())
        out.tensors.push_back({t.name, ggml_type_of(t.dtype), t.shape, t.end - t.begin});
    }
    return out;
  }

  DType largest_dtype() const {
    std::size_t largest = 0;
    DType dtype = DType::f32;
    for (const auto& f : files_)
      for (const TensorInfo& t : f->tensors())
        if (t.elements() > largest) largest = t.elements(), dtype = t.dtype;
    return dtype;
  }

 private:
  std::shared_ptr<MappedFiles> mapped_ = std::make_shared<MappedFiles>();
  std::vector<std::unique_ptr<SafetensorsFile>>& files_ = mapped_->files;
  std::map<std::string, std::size_t> where_;
};

}  // namespace

CheckpointSummary checkpoint_summary(const std::string& spec) {
  const std::string path = resolve_model_path(spec);
  return is_gguf_path(path) ? gguf_summary(path) : Checkpoint(path).summary();
}

Model load_hf_family(const std::string& dir) {
  const std::string config = (std::filesystem::path(dir) / "config.json").string();
  return hf_family_weights(
      dir, hf_family_config(read_config_document(config, "a model directory holds config.json and model.safetensors"),
                            config));
}

Model hf_family_weights(const std::string& dir, const ModelConfig& config) {
  const std::filesystem::path root(dir);
  Model m;
  m.config = config;
  const ModelConfig& c = m.config;
  const Checkpoint file(root);
  const std::size_t d = c.n_embd, hd = c.head_dim(), H = c.n_head, Hkv = c.kv_heads(), I = c.n_inner;
  m.wte = file.matrix("embed_tokens.weight", c.vocab_size, d);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    Block b;
    b.ln_1_weight = file.tensor(p + "input_layernorm.weight", {d});
    const std::string attn = p + "self_attn.";
    b.attn_weight = file.linear(
        {{attn + "q_proj.weight", H * hd}, {attn + "k_proj.weight", Hkv * hd}, {attn + "v_proj.weight", Hkv * hd}}, d);
    if (c.qkv_bias) {
      std::vector<float> bias;
      for (const auto& [name, width] : {std::pair{"q_proj", H * hd}, {"k_proj", Hkv * hd}, {"v_proj", Hkv * hd}}) {
        const std::vector<float> part = file.tensor(attn + name + ".bias", {width});
        bias.insert(bias.end(), part.begin(), part.end());
      }
      b.attn_bias = std::move(bias);
    }
    b.attn_proj_weight = file.linear({{attn + "o_proj.weight", d}}, H * hd);
    if (c.out_bias) b.attn_proj_bias = file.tensor(attn + "o_proj.bias", {d});
    if (c.qk_norm) {
      b.q_norm_weight = file.tensor(attn + "q_norm.weight", {hd});
      b.k_norm_weight = file.tensor(attn + "k_norm.weight", {hd});
    }
    if (c.sandwich_norms) {
      b.post_attn_norm_weight = file.tensor(p + "post_attention_layernorm.weight", {d});
      b.ln_2_weight = file.tensor(p + "pre_feedforward_layernorm.weight", {d});
      b.post_mlp_norm_weight = file.tensor(p + "post_feedforward_layernorm.weight", {d});
    } else {
      b.ln_2_weight = file.tensor(p + "post_attention_layernorm.weight", {d});
    }
    b.mlp_fc_weight = file.linear({{p + "mlp.gate_proj.weight", I}, {p + "mlp.up_proj.weight", I}}, d);
    b.mlp_proj_weight = file.linear({{p + "mlp.down_proj.weight", d}}, I);
    if (c.mlp_bias) {
      std::vector<float> bias;
      for (const char* name : {"gate_proj", "up_proj"}) {
        const std::vector<float> part = file.tensor(p + "mlp." + name + ".bias", {I});
        bias.insert(bias.end(), part.begin(), part.end());
      }
      b.mlp_fc_bias = std::move(bias);
      b.mlp_proj_bias = file.tensor(p + "mlp.down_proj.bias", {d});
    }
    m.blocks.push_back(std::move(b));
  }
  m.ln_f_weight = file.tensor("norm.weight", {d});
  if (!c.tied) {
    if (!file.has("lm_head.weight"))
      fail(dir,
           "tensor \"lm_head.weight\" is missing and \"tie_word_embeddings\" is false; set it true if the "
           "unembedding is the token embedding");
    m.lm_head = file.matrix("lm_head.weight", c.vocab_size, d);
  }
  m.stored_dtype = file.largest_dtype();
  return m;
}

}  // namespace attnlab

namespace attnlab {

namespace {

// Columns [first, first + out) of a row-major [in × width] matrix as an nn.Linear weight
// [out, in]: put_transposed's inverse.
std::vector<float> take_transposed(const std::vector<float>& src, std::size_t in, std::size_t width, std::size_t first,
                                   std::size_t out) {
  std::vector<float> w(out * in);
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i)
      w[o * in + i] = src[i * width + first + o];
  return w;
}

}  // namespace

void save_hf_family(const std::string& dir, const Model& m, DType dtype) {
  const ModelConfig& c = m.config;
  if (c.family != Family::llama || c.qk_norm || c.sandwich_norms || c.norm_plus_one || c.norm != NormKind::rms_norm ||
      !c.rotary || !c.sliding_window.empty() || c.qkv_bias != c.out_bias || c.embedding_scale != 1.0)
    fail(dir, fmt::format("attnlab writes GPT-2 and Llama checkpoints; this is {}", describe(c)));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail(dir, fmt::format("cannot create the directory: {}", error.message()));
  const std::size_t d = c.n_embd, hd = c.head_dim(), H = c.n_head, Hkv = c.kv_heads(), I = c.n_inner;
  const std::size_t qkv = c.qkv_width();
  // The tensors' values live here until written: TensorToWrite holds views.
  std::vector<std::vector<float>> kept;
  kept.reserve(16 * c.n_layer + 4);
  std::vector<TensorToWrite> tensors;
  const auto add = [&](const std::string& name, std::vector<std::size_t> shape, std::vector<float> values) {
    kept.push_back(std::move(values));
    tensors.push_back({name, std::move(shape), kept.back(), dtype});
  };
  add("model.embed_tokens.weight", {c.vocab_size, d}, m.wte.to_f32());
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const Block& b = m.blocks[l];
    const std::vector<float> qkv_w = b.attn_weight.to_f32(), out_w = b.attn_proj_weight.to_f32(),
                             fc_w = b.mlp_fc_weight.to_f32(), proj_w = b.mlp_proj_weight.to_f32();
    add(p + "input_layernorm.weight", {d}, b.ln_1_weight.to_f32());
    add(p + "self_attn.q_proj.weight", {H * hd, d}, take_transposed(qkv_w, d, qkv, 0, H * hd));
    add(p + "self_attn.k_proj.weight", {Hkv * hd, d}, take_transposed(qkv_w, d, qkv, H * hd, Hkv * hd));
    add(p + "self_attn.v_proj.weight", {Hkv * hd, d}, take_transposed(qkv_w, d, qkv, (H + Hkv) * hd, Hkv * hd));
    if (c.qkv_bias) {
      const auto part = [&](std::size_t first, std::size_t width) {
        return std::vector<float>(b.attn_bias.begin() + std::ptrdiff_t(first),
                                  b.attn_bias.begin() + std::ptrdiff_t(first + width));
      };
      add(p + "self_attn.q_proj.bias", {H * hd}, part(0, H * hd));
      add(p + "self_attn.k_proj.bias", {Hkv * hd}, part(H * hd, Hkv * hd));
      add(p + "self_attn.v_proj.bias", {Hkv * hd}, part((H + Hkv) * hd, Hkv * hd));
      add(p + "self_attn.o_proj.bias", {d}, b.attn_proj_bias.to_f32());
    }
    add(p + "self_attn.o_proj.weight", {d, H * hd}, take_transposed(out_w, H * hd, d, 0, d));
    add(p + "post_attention_layernorm.weight", {d}, b.ln_2_weight.to_f32());
    add(p + "mlp.gate_proj.weight", {I, d}, take_transposed(fc_w, d, 2 * I, 0, I));
    add(p + "mlp.up_proj.weight", {I, d}, take_transposed(fc_w, d, 2 * I, I, I));
    add(p + "mlp.down_proj.weight", {d, I}, take_transposed(proj_w, I, d, 0, d));
    if (c.mlp_bias) {
      add(p + "mlp.gate_proj.bias", {I}, std::vector<float>(b.mlp_fc_bias.begin(), b.mlp_fc_bias.begin() + I));
      add(p + "mlp.up_proj.bias", {I}, std::vector<float>(b.mlp_fc_bias.begin() + I, b.mlp_fc_bias.end()));
      add(p + "mlp.down_proj.bias", {d}, b.mlp_proj_bias.to_f32());
    }
  }
  add("model.norm.weight", {d}, m.ln_f_weight.to_f32());
  if (!c.tied) add("lm_head.weight", {c.vocab_size, d}, m.lm_head.to_f32());
  write_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  json config = {{"model_type", "llama"},
                 {"architectures", {"LlamaForCausalLM"}},
                 {"num_hidden_layers", c.n_layer},
                 {"num_attention_heads", c.n_head},
                 {"num_key_value_heads", Hkv},
                 {"hidden_size", d},
                 {"head_dim", hd},
                 {"intermediate_size", I},
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
  std::ofstream out(std::filesystem::path(dir) / "config.json");
  out << config.dump(2) << "\n";
  if (!out) fail(dir, "could not write config.json");
}

}  // namespace attnlab
