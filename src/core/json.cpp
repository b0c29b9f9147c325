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

JsonShape json_shape(std::string_view text) {
  JsonShape shape;
  int depth = 0;
  bool in_string = false, escaped = false, in_literal = false;
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
    const bool literal_char = ch != '"' && ch != '[' && ch != '{' && ch != ']' && ch != '}' && ch != ',' && ch != ':' &&
                              ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r';
    if (literal_char && !in_literal) ++shape.values;  // a number, true, false or null begins
    in_literal = literal_char;
    if (ch == '"') {
      in_string = true;
      ++shape.values;
    } else if (ch == '[' || ch == '{') {
      ++shape.values;
      shape.depth = std::max(shape.depth, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return shape;
}

std::string valid_utf8(std::string_view text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

std::string text_excerpt(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return valid_utf8(text);
  return valid_utf8(text.substr(0, max_bytes)) + "...";
}

std::string describe_json(const json& value) {
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + " items";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  const std::string text = value.dump();
  return text.size() > 40 ? text_excerpt(text, 37) : text;  // the cut never splits a character
}

}  // namespace attnlab
