// Size flags and flag names in errors for cost and kv.
#include "numbers.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>

namespace attnlab::cli {

std::uint64_t parse_count(std::string_view text, std::string_view flag) {
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!digits) fail(flag, fmt::format("expected a whole number >= 1 in digits (e.g. 4096) but got \"{}\"", text));
  std::uint64_t value = 0;
  for (char c : text) {
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10)
      fail(flag, fmt::format("{} is more than 2^64 - 1 = 18446744073709551615", text));
    value = value * 10 + digit;
  }
  return value;
}

std::vector<std::uint64_t> parse_count_list(std::string_view text, std::string_view flag) {
  std::vector<std::uint64_t> values;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    values.push_back(parse_count(item, flag));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (values.size() > 64) fail(flag, fmt::format("{} lengths; give at most 64", values.size()));
  return values;
}

InputError with_flag_name(const InputError& error) {
  // "d_model" -> "--d-model"; a list's item keeps its index: "ids[1]" -> "--ids[1]".
  const std::string& field = error.field();
  const std::string name = field.substr(0, field.find('['));
  const bool plain_name = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
  if (!plain_name) return error;
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return error.renamed(flag + field.substr(name.size()));
}

}  // namespace attnlab::cli
