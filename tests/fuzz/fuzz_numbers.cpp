// The CLI's number and list parsers (src/cli/numbers.cpp): a count is read exactly when the
// text is digits whose value fits 64 bits, and then equals std::from_chars's reading; a
// list is its comma-separated counts, 1 to 64 of them.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.hpp"
#include "numbers.hpp"

using namespace attnlab;

namespace {

// The reading std::from_chars gives for plain digits, or nothing.
bool reference_count(std::string_view text, std::uint64_t& value) {
  if (text.empty()) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::uint64_t expected = 0;
  const bool valid = reference_count(text, expected);
  try {
    const std::uint64_t value = cli::parse_count(text, "--tokens");
    fuzz::check(valid && value == expected, "parse_count accepted or misread", text);
  } catch (const InputError& e) {
    fuzz::check(!valid, "parse_count refused a count", text);
    fuzz::check(e.field() == "--tokens", "parse_count's error does not name the flag", e.what());
  }

  std::size_t items = 0;
  bool list_valid = true;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    std::uint64_t v = 0;
    list_valid = list_valid && reference_count(text.substr(start, comma - start), v);
    ++items;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  list_valid = list_valid && items <= 64;
  try {
    const std::vector<std::uint64_t> values = cli::parse_count_list(text, "--context");
    fuzz::check(list_valid && values.size() == items, "parse_count_list accepted or miscounted", text);
  } catch (const InputError& e) {
    fuzz::check(!list_valid, "parse_count_list refused a list", text);
    (void)cli::with_flag_name(e);
  }
  return 0;
}
