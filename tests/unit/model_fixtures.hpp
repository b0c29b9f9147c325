// The NumPy-made model fixtures (tests/model/fixtures/*/expected.json) as the model tests
// read them: nested JSON lists flattened to one row of numbers in the forward's layouts.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "attnlab/core/rng.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/training.hpp"

namespace attnlab::test {

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// [[1, 2], [3]] -> 1 2 3: row-major, as the forward keeps [n × vocab], [H × n × n], ...
inline std::vector<double> flat(const nlohmann::json& nested) {
  std::vector<double> out;
  if (nested.is_array())
    for (const nlohmann::json& x : nested) {
      const std::vector<double> inner = flat(x);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  else
    out.push_back(nested.get<double>());
  return out;
}

// A small model made here, of `positions` positions (the fixtures have 16 to 64): `family`'s
// config.json with 2 layers, d_model 16, 4 query heads sharing 2 KV heads, an MLP of 32, a
// vocabulary of 64 and the embedding tied; a sliding window where `window` > 0; each parameter
// 0.3 · N(0, 1) from `seed`.
inline Model seeded_model(const std::string& family, std::size_t positions, std::size_t window, std::uint64_t seed) {
  nlohmann::json config = nlohmann::json::parse(R"({"hidden_size": 16, "intermediate_size": 32,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64,
      "tie_word_embeddings": true})");
  config["model_type"] = family;
  config["max_position_embeddings"] = positions;
  if (window) config["sliding_window"] = window;
  const ModelConfig c = parse_model_config(config, "config.json");
  std::vector<float> parameters(c.parameters());
  SplitMix64 rng(seed);
  for (float& x : parameters)
    x = static_cast<float>(0.3 * rng.normal());
  return unflatten(c, parameters);
}

inline std::vector<double> widened(std::span<const float> x) { return {x.begin(), x.end()}; }

}  // namespace attnlab::test
