// Hugging Face checkpoints read and written (attnlab/model/model.hpp): a folder's
// model.safetensors, or the shards model.safetensors.index.json names, each tensor named as
// tensor_names.hpp's table says for the model's family. The shapes:
//
//   GPT-2 (Conv1D):  every tensor as attnlab holds it; c_attn [d, 3d] is q | k | v side by side
//   Llama-style:     nn.Linear's [out, in] (q_proj [H·hd, d], k_proj and v_proj [H_kv·hd, d],
//                    gate_proj and up_proj [I, d]), each transposed into attnlab's row-vector
//                    [in × out] in the view; the embedding and lm_head [V, d] as held
//
// Matrices are viewed where they lie in the mapped files, in their dtype; norms and biases,
// small, are read as f32.
#include <fmt/format.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/tensor_names.hpp"
#include "formats/config_json.hpp"
#include "formats/mapped_files.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxShards = 1024;

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

  // The tensor called `name` of exactly `shape`, and its file. Checkpoints differ in their
  // prefixes: GPT-2's names may have "transformer.", a Llama-style model's may lack "model.".
  std::pair<const SafetensorsFile*, const TensorInfo*> find_shaped(const std::string& name,
                                                                   const std::vector<std::size_t>& shape) const {
    const SafetensorsFile* file = files_.front().get();
    const TensorInfo* t = find(name, &file);
    if (!t) t = find("transformer." + name, &file);
    if (!t && name.starts_with("model.")) t = find(name.substr(6), &file);
    if (!t) fail(file->path(), fmt::format("tensor \"{}\" is missing (the config needs it)", name));
    check_shape(file->path(), t->name, t->shape, shape);
    return {file, t};
  }

  // The vector whose parts are `parts` (a norm's weight, a bias, q | k | v's) as f32.
  std::vector<float> vector(const std::vector<StoredTensor>& parts) const {
    std::vector<float> out;
    for (const StoredTensor& part : parts) {
      const auto [file, t] = find_shaped(part.name, {part.width});
      const std::vector<float> values = file->to_f32(*t);
      out.insert(out.end(), values.begin(), values.end());
    }
    return out;
  }

  // The row-vector [in × out] matrix whose columns are the nn.Linear weights `parts` ([out_i,
  // in] each) side by side, viewed where they lie in the files.
  Tensor linear(const std::vector<StoredTensor>& parts, std::size_t in) const {
    std::vector<Tensor::Piece> pieces;
    std::size_t out = 0;
    for (const StoredTensor& part : parts) {
      const auto [file, t] = find_shaped(part.name, {part.width, in});
      pieces.push_back(mapped_->piece(*file, *t, part.width, true));
      out += part.width;
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
    return find(name, &file) || find("model." + name, &file);
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

Model hf_weights(const std::string& dir, const ModelConfig& config) {
  Model m;
  m.config = config;
  const ModelConfig& c = m.config;
  const Checkpoint file{std::filesystem::path(dir)};
  if (!c.tied && !file.has("lm_head.weight"))
    fail(dir,
         "tensor \"lm_head.weight\" is missing and \"tie_word_embeddings\" is false; set it true if the unembedding is "
         "the token embedding");
  m.blocks.resize(c.n_layer);
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const std::vector<StoredTensor> parts = stored_tensors(t, c, WeightFormat::kHuggingFace);
    if (t.shape.size() == 1)
      tensor_of(m, t) = file.vector(parts);
    else if (c.family == Family::gpt2 || stored_as_rows(t.slot))
      tensor_of(m, t) = file.matrix(parts.at(0).name, t.shape[0], t.shape[1]);
    else
      tensor_of(m, t) = file.linear(parts, t.shape[0]);
  }
  m.stored_dtype = file.largest_dtype();
  m.stored_type = m.stored_dtype == DType::f16    ? GgmlType::f16
                  : m.stored_dtype == DType::bf16 ? GgmlType::bf16
                                                  : GgmlType::f32;
  return m;
}

Model load_gpt2(const std::string& dir) {
  if (!std::filesystem::is_directory(dir))
    fail(dir, "not a directory; give the folder that holds config.json and model.safetensors");
  return hf_weights(dir, read_gpt2_config((std::filesystem::path(dir) / "config.json").string()));
}

Model load_hf_family(const std::string& dir) {
  const std::string config = (std::filesystem::path(dir) / "config.json").string();
  return hf_weights(
      dir, hf_family_config(read_config_document(config, "a model directory holds config.json and model.safetensors"),
                            config));
}

namespace {

// Columns [first, first + out) of a row-major [in × width] matrix as an nn.Linear weight
// [out, in].
std::vector<float> take_transposed(std::span<const float> src, std::size_t in, std::size_t width, std::size_t first,
                                   std::size_t out) {
  std::vector<float> w(out * in);
  for (std::size_t o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i)
      w[o * in + i] = src[i * width + first + o];
  return w;
}

// DIR/model.safetensors and DIR/config.json: every tensor of `m` under its name for the
// family (GPT-2's with "transformer." when `prefix`), stored as `dtype`.
void save_checkpoint(const std::string& dir, const Model& m, DType dtype, bool prefix, const json& config) {
  const ModelConfig& c = m.config;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail(dir, fmt::format("cannot create the directory: {}", error.message()));
  std::vector<TensorToWrite> tensors;
  std::deque<std::vector<float>> kept;  // the values written that the model does not hold as f32
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const Tensor& tensor = tensor_of(m, t);
    const bool held = c.family == Family::gpt2 || stored_as_rows(t.slot);  // written as attnlab holds it
    const std::span<const float> values =
        held && tensor.owned() ? std::span(tensor.data(), tensor.size()) : kept.emplace_back(tensor.to_f32());
    for (const StoredTensor& part : stored_tensors(t, c, WeightFormat::kHuggingFace)) {
      const std::string name = (prefix ? "transformer." : "") + part.name;
      if (held) {
        tensors.push_back({name, t.shape, values, dtype});
      } else if (t.shape.size() == 1) {
        tensors.push_back({name, {part.width}, values.subspan(part.first, part.width), dtype});
      } else {
        const std::size_t in = t.shape[0];
        tensors.push_back({name,
                           {part.width, in},
                           kept.emplace_back(take_transposed(values, in, t.shape[1], part.first, part.width)),
                           dtype});
      }
    }
  }
  write_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream out(std::filesystem::path(dir) / "config.json");
  out << config.dump(2) << "\n";
  if (!out) fail(dir, "could not write config.json");
}

}  // namespace

void save_gpt2(const std::string& dir, const Model& m, DType dtype, bool prefix) {
  save_checkpoint(dir, m, dtype, prefix, gpt2_config_json(m.config));
}

void save_hf_family(const std::string& dir, const Model& m, DType dtype) {
  const ModelConfig& c = m.config;
  if (c.family != Family::llama || c.qk_norm || c.sandwich_norms || c.norm_plus_one || c.norm != NormKind::rms_norm ||
      !c.rotary || !c.sliding_window.empty() || c.qkv_bias != c.out_bias || c.embedding_scale != 1.0)
    fail(dir, fmt::format("attnlab writes GPT-2 and Llama checkpoints; this is {}", describe(c)));
  save_checkpoint(dir, m, dtype, false, llama_config_json(c));
}

}  // namespace attnlab
