// The scenarios bundled with attnlab: scenarios/*.json, compiled into the binary.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "attnlab/core/embedded.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

namespace {

std::vector<BundledScenario> list_bundled() {
  std::vector<BundledScenario> out;
  for (const EmbeddedFile& file : bundled_scenario_files()) {
    std::string_view name = file.name;
    if (!name.ends_with(".json")) continue;
    name.remove_suffix(5);
    // Bundled files are checked by the tests; a broken one still lists, with no description.
    const auto doc = nlohmann::json::parse(file.bytes, nullptr, /*allow_exceptions=*/false);
    std::string description;
    if (doc.is_object() && doc.contains("description") && doc["description"].is_string())
      description = doc["description"].get<std::string>();
    out.push_back({std::string(name), description, file.bytes});
  }
  std::sort(out.begin(), out.end(), [](const BundledScenario& a, const BundledScenario& b) {
    const bool a_default = a.name == kDefaultScenario, b_default = b.name == kDefaultScenario;
    return a_default != b_default ? a_default : a.name < b.name;
  });
  return out;
}

}  // namespace

// Listed once: the server asks on every request that names a scenario.
std::vector<BundledScenario> bundled_scenarios() {
  static const std::vector<BundledScenario> all = list_bundled();
  return all;
}

std::vector<std::string> bundled_scenario_names() {
  std::vector<std::string> names;
  for (const BundledScenario& b : bundled_scenarios())
    names.push_back(b.name);
  return names;
}

}  // namespace attnlab
