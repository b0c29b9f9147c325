// What `attnlab cost` and `attnlab kv` share: size flags parsed as text (so "-5" gets a
// clear message rather than a conversion error), library errors renamed to the flags the
// user typed, and right-aligned tables.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/report/explain.hpp"

namespace attnlab::cli {

// A whole number written in digits ("4096"). Throws InputError naming `flag` for anything
// else ("-5", "4k", "", more than 2^64 - 1).
std::uint64_t parse_count(std::string_view text, std::string_view flag);

// A comma-separated list of whole numbers ("4096,32768,131072"), 1 to 64 of them.
std::vector<std::uint64_t> parse_count_list(std::string_view text, std::string_view flag);

// The library names request fields as the JSON API spells them ("d_model", "ids[1]"); the CLI says
// the flag instead ("--d-model"). Returns the error with its field renamed, or unchanged
// when its field is not a plain name.
InputError with_flag_name(const InputError& error);

// The CLI's figure tables through the one renderer (report/explain.hpp): a header row and
// rows of cells, each column right-aligned to its widest cell (the first column
// left-aligned when `first_left`), two spaces between, indented three.
inline std::string format_table(const std::vector<std::vector<std::string>>& rows, bool first_left = false) {
  return render_table(rows, {.indent = "   ", .gap = 2, .right_aligned = true, .first_left = first_left});
}

}  // namespace attnlab::cli
