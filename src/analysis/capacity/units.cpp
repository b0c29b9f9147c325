// Byte sizes and counts as text, and overflow-checked 64-bit arithmetic.
#include "attnlab/analysis/units.hpp"

#include <fmt/format.h>
#include <array>
#include <cctype>
#include <cmath>

#include "attnlab/core/error.hpp"

namespace attnlab {

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::string format_count(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  static const std::array<const char*, 7> units{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t u = 0;
  while (u + 1 < units.size() && bytes >= (std::uint64_t{1} << (10 * (u + 1))))
    ++u;
  if (u == 0) return fmt::format("{} B", bytes);
  const double value = static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << (10 * u));
  std::string text = fmt::format("{:.2f}", value);
  while (text.back() == '0')
    text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text + " " + units[u];
}

std::uint64_t parse_byte_size(std::string_view text, std::string_view field) {
  const auto refuse = [&](std::string_view why) -> std::uint64_t {
    fail(field, fmt::format("\"{}\" {}; give a size such as 24GiB, 512MiB, 1.5GB or 8000000000 (bytes)", text, why));
  };
  std::size_t k = 0;
  while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k])))
    ++k;
  if (k < text.size() && (text[k] == '-' || text[k] == '+'))
    return text[k] == '-' ? refuse("is negative") : refuse("has a sign");
  // The number: digits, optionally a point and more digits.
  const std::size_t number_start = k;
  std::size_t digits = 0;
  while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])))
    ++k, ++digits;
  if (k < text.size() && text[k] == '.') {
    ++k;
    while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])))
      ++k, ++digits;
  }
  if (digits == 0) return refuse("does not start with a number");
  const std::string number(text.substr(number_start, k - number_start));
  while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k])))
    ++k;
  std::string written(text.substr(k));
  while (!written.empty() && std::isspace(static_cast<unsigned char>(written.back())))
    written.pop_back();
  std::string unit = written;
  for (char& c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  struct Unit {
    const char* name;
    long double scale;
  };
  static const std::array<Unit, 10> known{{{"", 1.0L},
                                           {"b", 1.0L},
                                           {"kb", 1e3L},
                                           {"mb", 1e6L},
                                           {"gb", 1e9L},
                                           {"tb", 1e12L},
                                           {"kib", 1024.0L},
                                           {"mib", 1048576.0L},
                                           {"gib", 1073741824.0L},
                                           {"tib", 1099511627776.0L}}};
  const Unit* found = nullptr;
  for (const Unit& u : known)
    if (unit == u.name) found = &u;
  if (!found)
    return refuse(fmt::format("has an unknown unit \"{}\" (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", written));

  // Whole part exactly when it is an integer (so 18446744073709551615 survives), else
  // through long double, which holds 64 bits of mantissa.
  long double value = std::strtold(number.c_str(), nullptr) * found->scale;
  if (!(value < 18446744073709551616.0L)) return refuse("is more than 2^64 - 1 bytes");
  std::uint64_t bytes = static_cast<std::uint64_t>(std::floor(value));
  if (number.find('.') == std::string::npos && found->scale == 1.0L) bytes = std::stoull(number);
  if (bytes == 0) return refuse("is 0 bytes");
  return bytes;
}

void require_in_range(std::string_view field, std::uint64_t value, std::uint64_t limit) {
  if (value < 1 || value > limit)
    fail(field, fmt::format("{} is outside 1..{}; give a whole number in that range", value, format_count(limit)));
}

}  // namespace attnlab
