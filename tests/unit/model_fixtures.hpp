// The NumPy-made model fixtures (tests/model/fixtures/*/expected.json) as the model tests
// read them: nested JSON lists flattened to one row of numbers in the forward's layouts.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

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

inline std::vector<double> widened(std::span<const float> x) { return {x.begin(), x.end()}; }

}  // namespace attnlab::test
