// Numbers and matrices as JSON (attnlab/core/json.hpp).
#include "attnlab/core/json.hpp"

#include <algorithm>
#include <cmath>

namespace attnlab {

using nlohmann::json;

json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json matrix_to_json(const Matrix& m) {
  json rows = json::array();
  for (std::size_t i = 0; i < m.rows; ++i) {
    json row = json::array();
    for (double x : m.row(i))
      row.push_back(number_or_null(x));
    rows.push_back(std::move(row));
  }
  return rows;
}

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"')
      in_string = true;
    else if (ch == '[' || ch == '{')
      deepest = std::max(deepest, ++depth);
    else if (ch == ']' || ch == '}')
      --depth;
  }
  return deepest;
}

std::string describe_json(const json& value) {
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + " items";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  const std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

}  // namespace attnlab
