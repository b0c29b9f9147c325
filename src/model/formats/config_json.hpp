// Reading a checkpoint's config.json (private to the model layer): bounded in bytes and depth.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab {

// The JSON object in `path` (at most 1 MiB, nested at most 16 deep); InputError naming the
// file otherwise, with `what` saying what the file should be.
nlohmann::json read_config_document(const std::string& path, std::string_view what);

// Each family's config.json read into the family-neutral config (gpt2_config.cpp,
// hf_config.cpp), and written for a model attnlab saves.
struct ModelConfig;
ModelConfig gpt2_config(const nlohmann::json& config, const std::string& path);
ModelConfig hf_family_config(const nlohmann::json& config, const std::string& path);
nlohmann::json gpt2_config_json(const ModelConfig& config);
nlohmann::json llama_config_json(const ModelConfig& config);

// A Hugging Face folder's weights, its config.json already read into `config` (load_model
// reads it once, then the tensors: hf_checkpoint.cpp).
struct Model;
Model hf_weights(const std::string& dir, const ModelConfig& config);

// config[key] as a whole number from 1 to `limit`; when absent, `fallback` (0: the key is
// required, and its absence is refused naming it and `family`).
std::size_t config_count(const nlohmann::json& config, const char* key, std::size_t limit, const std::string& path,
                         std::string_view family, std::size_t fallback = 0);

// config[key] as a number in [low, high] (`fallback` when absent or null).
double config_number(const nlohmann::json& config, const char* key, double low, double high, double fallback,
                     const std::string& path);

// config[key] as true or false (`fallback` when absent or null).
bool config_flag(const nlohmann::json& config, const char* key, bool fallback, const std::string& path);

// Refuses tensor `name` of `path` when its shape is not `want` ("tensor \"x\" has shape [2, 3]
// but the config needs [3, 2]"): the one check every checkpoint reader makes of each tensor.
void check_shape(const std::string& path, const std::string& name, const std::vector<std::size_t>& have,
                 const std::vector<std::size_t>& want);

}  // namespace attnlab
