// Numbers and matrices as JSON (attnlab/core/json.hpp).
#include "attnlab/core/json.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

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

std::string json_kind(const json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "a list";
  return "an object";
}

void refuse_unknown_fields(const json& object, std::initializer_list<std::string_view> known, std::string_view where,
                           std::string_view what) {
  if (!object.is_object()) return;
  for (const auto& item : object.items()) {
    const std::string& key = item.key();  // a name, not a structured binding: clang 14 cannot capture those
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known)
      list += (list.empty() ? "" : ", ") + std::string(k);
    fail(where.empty() ? key : fmt::format("{}.{}", where, key), fmt::format("unknown {} (known: {})", what, list));
  }
}

namespace {

[[noreturn]] void out_of_range(std::string_view value, std::string_view field, const CountRange& range) {
  const std::string hint = range.hint.empty() ? "" : fmt::format(" {}", range.hint);
  if (range.high == std::numeric_limits<std::uint64_t>::max())
    fail(field, fmt::format("expected a whole number >= {} but got {}{}", range.low, value, hint));
  fail(field, fmt::format("{} is not a whole number from {} to {}{}", value, range.low, range.high, hint));
}

}  // namespace

std::uint64_t read_count(const json& j, std::string_view field, CountRange range) {
  const bool whole = j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
  const std::uint64_t value = whole ? j.get<std::uint64_t>() : 0;
  if (whole && value >= range.low && value <= range.high) return value;
  out_of_range(describe_json(j), field, range);
}

void check_count(std::uint64_t value, std::string_view field, CountRange range) {
  if (value < range.low || value > range.high) out_of_range(std::to_string(value), field, range);
}

std::vector<std::uint64_t> read_count_list(const json& j, std::string_view field, std::size_t max_items,
                                           CountRange range) {
  if (!j.is_array()) fail(field, fmt::format("expected a list of whole numbers but got {}", describe_json(j)));
  if (j.size() > max_items) fail(field, fmt::format("{} items is more than the limit of {}", j.size(), max_items));
  std::vector<std::uint64_t> out;
  out.reserve(j.size());
  for (std::size_t k = 0; k < j.size(); ++k)
    out.push_back(read_count(j[k], fmt::format("{}[{}]", field, k), range));
  return out;
}

double read_number(const json& j, std::string_view field) {
  if (!j.is_number()) fail(field, fmt::format("expected a number but got {} ({})", json_kind(j), describe_json(j)));
  const double value = j.get<double>();
  if (!std::isfinite(value)) fail(field, fmt::format("{} is not a finite number", value));
  return value;
}

bool read_flag(const json& j, std::string_view field) {
  if (!j.is_boolean())
    fail(field, fmt::format("expected true or false but got {} ({})", json_kind(j), describe_json(j)));
  return j.get<bool>();
}

std::string read_string(const json& j, std::string_view field) {
  if (!j.is_string()) fail(field, fmt::format("expected a string but got {}", json_kind(j)));
  return j.get<std::string>();
}

}  // namespace attnlab
