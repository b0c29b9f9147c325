// The API's handlers: validate the request, build the scenario the options describe, run
// the reference computation, and return the trace.
#include "attnlab/api.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "attnlab/error.hpp"
#include "attnlab/scenario.hpp"
#include "attnlab/trace_json.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

[[noreturn]] void fail(std::string_view field, std::string_view message) {
  throw InputError(fmt::format("{}: {}", field, message));
}

std::size_t as_index(const json& j, std::string_view field) {
  if (!j.is_number_integer() || (!j.is_number_unsigned() && j.get<std::int64_t>() < 0))
    fail(field, fmt::format("expected a whole number >= 0 but got {}", j.dump()));
  return j.get<std::size_t>();
}

std::vector<std::size_t> as_index_list(const json& j, std::string_view field) {
  if (!j.is_array()) fail(field, fmt::format("expected a list of indices but got {}", j.dump()));
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < j.size(); ++k) out.push_back(as_index(j[k], fmt::format("{}[{}]", field, k)));
  return out;
}

Scenario requested_scenario(const json& request) {
  if (!request.contains("scenario")) fail("scenario", "missing; give a bundled name (e.g. \"three-tokens\") or a scenario object");
  const json& s = request["scenario"];
  if (s.is_string()) {
    const std::string name = s.get<std::string>();
    if (!api_scenario_file(name)) {
      std::string names;
      for (const auto& b : bundled_scenarios()) names += (names.empty() ? "" : ", ") + b.name;
      fail("scenario", fmt::format("unknown scenario \"{}\"; the bundled ones are: {}", name, names));
    }
    return load_scenario(name);
  }
  if (!s.is_object()) fail("scenario", "expected a bundled scenario name or a scenario object");
  try {
    return scenario_from_json(s);
  } catch (const InputError& e) {
    throw InputError(fmt::format("scenario.{}", e.what()));
  }
}

// Applies the request's options in a fixed order: sentence, remove_heads,
// add_random_heads, then causal/temperature/window/mask_tokens, then permute.
Scenario apply_options(Scenario s, const json& options) {
  if (!options.is_object()) fail("options", "expected an object");
  static const char* const known[] = {"causal",   "temperature", "window",          "mask_tokens",
                                      "permute",  "sentence",    "add_random_heads", "remove_heads"};
  for (const auto& [key, value] : options.items())
    if (std::find(std::begin(known), std::end(known), key) == std::end(known))
      fail("options." + key, "unknown option (known: causal, temperature, window, mask_tokens, permute, sentence, "
                             "add_random_heads, remove_heads)");

  if (options.contains("sentence")) {
    if (!options["sentence"].is_string()) fail("options.sentence", "expected a string of words");
    s = with_sentence(s, options["sentence"].get<std::string>());
  }
  if (options.contains("remove_heads")) {
    std::vector<std::size_t> drop = as_index_list(options["remove_heads"], "options.remove_heads");
    std::sort(drop.begin(), drop.end());
    drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
    for (std::size_t h : drop)
      if (h >= s.heads.size())
        fail("options.remove_heads", fmt::format("head {} does not exist; heads run from 0 to {}", h, s.heads.size() - 1));
    for (auto it = drop.rbegin(); it != drop.rend(); ++it) s.heads.erase(s.heads.begin() + *it);
  }
  if (options.contains("add_random_heads")) {
    const json& add = options["add_random_heads"];
    if (!add.is_array()) fail("options.add_random_heads", "expected a list like [{\"seed\": 7}]");
    for (std::size_t k = 0; k < add.size(); ++k) {
      const std::string field = fmt::format("options.add_random_heads[{}]", k);
      if (!add[k].is_object() || !add[k].contains("seed")) fail(field, "expected {\"seed\": N} (optionally \"d_k\", \"d_v\")");
      const auto width = [&](const char* key) {
        if (!add[k].contains(key)) return s.d_in();
        const std::size_t w = as_index(add[k][key], field + "." + key);
        if (w < 1 || w > kMaxWidth) fail(field + "." + key, fmt::format("{} is outside 1..{}", w, kMaxWidth));
        return w;
      };
      if (s.heads.size() >= kMaxHeads) fail(field, fmt::format("a scenario has at most {} heads", kMaxHeads));
      s.heads.push_back(random_head(as_index(add[k]["seed"], field + ".seed"), s.d_in(), width("d_k"), width("d_v")));
    }
  }
  if (s.heads.empty()) fail("options.remove_heads", "every head would be removed; keep at least one");
  if (s.w_o && (options.contains("remove_heads") || options.contains("add_random_heads")))
    s.w_o.reset();  // W_O's rows belong to the original heads' outputs

  Overrides o;
  if (options.contains("causal")) {
    if (!options["causal"].is_boolean()) fail("options.causal", "expected true or false");
    o.causal = options["causal"].get<bool>();
  }
  if (options.contains("temperature")) {
    if (!options["temperature"].is_number()) fail("options.temperature", "expected a number > 0, e.g. 0.1 to 3");
    o.temperature = options["temperature"].get<double>();
  }
  if (options.contains("window") && !options["window"].is_null()) o.window = as_index(options["window"], "options.window");
  if (options.contains("mask_tokens")) o.mask_tokens = as_index_list(options["mask_tokens"], "options.mask_tokens");
  try {
    apply_overrides(s, o);
  } catch (const InputError& e) {
    throw InputError(fmt::format("options: {}", e.what()));
  }
  if (options.contains("permute")) {
    const std::vector<std::size_t> order = as_index_list(options["permute"], "options.permute");
    std::string text;
    for (std::size_t k : order) text += (text.empty() ? "" : ",") + std::to_string(k);
    s = permute_tokens(s, parse_permutation(text, s.n()));
  }
  return s;
}

}  // namespace

json api_health() { return {{"ok", true}, {"version", ATTNLAB_VERSION}}; }

json api_scenarios() {
  json list = json::array();
  for (const auto& b : bundled_scenarios())
    list.push_back({{"name", b.name}, {"description", b.description}, {"default", b.name == kDefaultScenario}});
  return {{"scenarios", list}};
}

std::optional<std::string_view> api_scenario_file(std::string_view name) {
  for (const auto& b : bundled_scenarios())
    if (b.name == name) return b.text;
  return std::nullopt;
}

json api_attention(const json& request) {
  if (!request.is_object()) fail("body", "expected a JSON object {\"scenario\": ..., \"options\": {...}}");
  for (const auto& [key, value] : request.items())
    if (key != "scenario" && key != "options") fail(key, "unknown field (known: scenario, options)");
  Scenario s = requested_scenario(request);
  if (request.contains("options")) s = apply_options(std::move(s), request["options"]);

  std::size_t cells = 0;
  for (std::size_t h = 0; h < s.heads.size(); ++h) cells += s.n() * s.m();
  if (cells > kMaxApiTraceCells)
    fail("scenario", fmt::format("{} heads × {} × {} tokens is {} score cells; the API returns at most {} (e.g. 8 heads "
                                 "of 180 tokens); use `attnlab run --json` for larger traces",
                                 s.heads.size(), s.n(), s.m(), cells, kMaxApiTraceCells));
  json reply = trace_to_json(s, run_scenario(s));
  for (std::size_t h = 0; h < s.heads.size(); ++h)
    reply["heads"][h]["random_seed"] = s.heads[h].random_seed ? json(*s.heads[h].random_seed) : json(nullptr);
  reply["scenario_json"] = scenario_to_json(s);
  return reply;
}

}  // namespace attnlab
