// The family-neutral config and the reader that picks a family (attnlab/model/model.hpp).
#include "attnlab/model/model.hpp"

#include <fmt/format.h>
#include <filesystem>
#include <fstream>

#include "attnlab/core/error.hpp"
#include "config_json.hpp"

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

bool ModelConfig::is_gpt2_shaped() const {
  return family == Family::gpt2 && norm == NormKind::layer_norm && !rotary && kv_heads() == n_head &&
         head_dim() * n_head == n_embd && mlp == MlpKind::gelu && tied && qkv_bias && out_bias && mlp_bias &&
         !qk_norm && !sandwich_norms && query_scale == 0 && embedding_scale == 1.0 && sliding_window.empty();
}

std::size_t ModelConfig::parameters() const {
  const std::size_t d = n_embd, hd = head_dim();
  const std::size_t norm_size = norm == NormKind::layer_norm ? 2 * d : d;
  const std::size_t block = norm_size + d * qkv_width() + (qkv_bias ? qkv_width() : 0) + attention_width() * d +
                            (out_bias ? d : 0) + norm_size + d * fc_width() + (mlp_bias ? fc_width() : 0) +
                            n_inner * d + (mlp_bias ? d : 0) + (qk_norm ? 2 * hd : 0) + (sandwich_norms ? 2 * d : 0);
  return vocab_size * d + (rotary ? 0 : n_positions * d) + n_layer * block + norm_size + (tied ? 0 : vocab_size * d);
}

json read_config_document(const std::string& path, std::string_view what) {
  constexpr std::size_t kMaxConfigBytes = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open the file; {}", what));
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) fail(path, fmt::format("more than {} bytes; not a config file", kMaxConfigBytes));
  json doc;
  try {
    doc = json::parse(text, [&](int depth, json::parse_event_t, json&) {
      if (depth > 16) fail(path, "nested more than 16 levels deep; not a config file");
      return true;
    });
  } catch (const json::exception&) {
    fail(path, "not JSON");
  }
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

Model load_model(const std::string& dir) {
  const std::filesystem::path root(dir);
  if (!std::filesystem::is_directory(root))
    fail(dir, "not a directory; give the folder that holds config.json and model.safetensors");
  const std::string config = (root / "config.json").string();
  const json doc = read_config_document(config, "a model directory holds config.json and model.safetensors");
  const json type = doc.value("model_type", json("gpt2"));
  if (type == "gpt2") return load_gpt2(dir);
  return load_hf_family(dir);
}

}  // namespace attnlab
