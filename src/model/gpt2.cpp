// GPT-2 checkpoints read and written (attnlab/model/model.hpp).
#include "attnlab/model/model.hpp"

#include <fmt/format.h>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnlab/core/error.hpp"
#include "attnlab/model/safetensors.hpp"
#include "config_json.hpp"
#include "mapped_files.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// The tensor called `name` (with or without the "transformer." prefix), checked to have
// `shape`: a matrix viewed in the mapped file, a vector as f32.
Tensor tensor(const std::shared_ptr<MappedFiles>& mapped, const std::string& name,
              const std::vector<std::size_t>& shape) {
  const SafetensorsFile& file = *mapped->files.front();
  const TensorInfo* t = file.find("transformer." + name);
  if (!t) t = file.find(name);
  if (!t)
    fail(file.path(), fmt::format("tensor \"{}\" is missing (looked for it with and without \"transformer.\")", name));
  check_shape(file.path(), t->name, t->shape, shape);
  return mapped_tensor(mapped, file, *t);
}

}  // namespace

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

Model load_gpt2(const std::string& dir) {
  const std::filesystem::path root(dir);
  if (!std::filesystem::is_directory(root))
    fail(dir, "not a directory; give the folder that holds config.json and model.safetensors");
  return gpt2_weights(dir, read_gpt2_config((root / "config.json").string()));
}

Model gpt2_weights(const std::string& dir, const ModelConfig& config) {
  const std::filesystem::path root(dir);
  Model m;
  m.config = config;
  const ModelConfig& c = m.config;
  const auto mapped = std::make_shared<MappedFiles>();
  mapped->files.push_back(std::make_unique<SafetensorsFile>((root / "model.safetensors").string()));
  m.blocks.resize(c.n_layer);
  for (const ParameterTensor& t : parameter_tensors(c))
    tensor_of(m, t) = tensor(mapped, t.name, t.shape);
  std::size_t largest = 0;
  for (const TensorInfo& t : mapped->files.front()->tensors())
    if (t.elements() > largest) largest = t.elements(), m.stored_dtype = t.dtype;
  return m;
}

void save_gpt2(const std::string& dir, const Model& m, DType dtype, bool prefix) {
  const ModelConfig& c = m.config;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail(dir, fmt::format("cannot create the directory: {}", error.message()));
  const std::string p = prefix ? "transformer." : "";
  std::vector<TensorToWrite> tensors;
  std::deque<std::vector<float>> widened;  // the values of tensors that are views of a checkpoint
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const Tensor& tensor = tensor_of(m, t);
    const std::span<const float> values =
        tensor.owned() ? std::span<const float>(tensor.data(), tensor.size()) : widened.emplace_back(tensor.to_f32());
    tensors.push_back({p + t.name, t.shape, values, dtype});
  }
  write_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  const json config = {{"model_type", "gpt2"},
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
  std::ofstream out(std::filesystem::path(dir) / "config.json");
  out << config.dump(2) << "\n";
  if (!out) fail(dir, "could not write config.json");
}

}  // namespace attnlab
