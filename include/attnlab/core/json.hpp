// Numbers and matrices as JSON, the way every face writes them: a matrix is a list of rows
// (the row-vector convention), and a number JSON cannot hold (a masked logit's -inf) is null.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/core/limits.hpp"
#include "attnlab/core/matrix.hpp"

namespace attnlab {

// x, or null when it is not finite (JSON has no infinities or NaN).
nlohmann::json number_or_null(double x);

// A matrix as a list of rows; non-finite entries (masked logits) become null.
nlohmann::json matrix_to_json(const Matrix& m);

// What parsing `text` would build, found in one pass without parsing, so that a hostile
// document is refused (kMaxJsonDepth, kMaxJsonValues, kMaxRequestJsonValues) before a
// parser or an error message walks it.
struct JsonShape {
  int depth = 0;           // the deepest nesting of [ and { (strings skipped)
  std::size_t values = 0;  // numbers, strings (keys too), literals, lists and objects
};
JsonShape json_shape(std::string_view text);

// A value for an error message, never walked: a scalar as written (cut at 40 characters),
// "a list of N items" or "an object of N fields" otherwise.
std::string describe_json(const nlohmann::json& value);

// Text as JSON can carry it: bytes that are not valid UTF-8 (a byte-level BPE token's part
// of a character, a URL path with %FF) become U+FFFD.
std::string valid_utf8(std::string_view text);

// Text from a client for an error message: its first `max_bytes` bytes ("..." after a cut),
// as valid UTF-8.
std::string text_excerpt(std::string_view text, std::size_t max_bytes = 80);

// Parses any JSON document, turning syntax errors into an InputError that gives `origin`,
// line and column, and numbers too large for a double into one that says so. A document
// nested deeper than kMaxJsonDepth or holding more than `max_values` JSON values is
// refused before it is parsed (a request body has kMaxRequestJsonValues).
nlohmann::json parse_json_document(std::string_view text, std::string_view origin,
                                   std::size_t max_values = kMaxJsonValues);

// Where byte `index` of `text` is, for a message: "line 3, column 14".
std::string line_and_column(std::string_view text, std::size_t index);

// Reading JSON that someone else wrote (a scenario file, a request body), one field at a
// time: each reader raises InputError naming `field`, saying what it expected and showing
// what came (describe_json), so every face words the same mistake the same way.

// What kind of value j is, for a message: "a string", "a number", "a list", ...
std::string json_kind(const nlohmann::json& j);

// Refuses the first key of `object` that is not in `known`: "where.key: unknown field
// (known: a, b, c)"; `what` replaces "field" where the keys are something else ("option").
void refuse_unknown_fields(const nlohmann::json& object, std::initializer_list<std::string_view> known,
                           std::string_view where = "", std::string_view what = "field");

// A whole number in [low, high]. Without an upper limit the message says "expected a whole
// number >= low but got -1"; with one, "5 is not a whole number from 1 to 4", then `hint`.
struct CountRange {
  std::uint64_t low = 0;
  std::uint64_t high = std::numeric_limits<std::uint64_t>::max();
  std::string_view hint = "";  // appended to the message after a space, e.g. "(the lab's limit)"
};
std::uint64_t read_count(const nlohmann::json& j, std::string_view field, CountRange range = {});
// A count that did not come as JSON (a flag, a setting) against `range`, worded as read_count
// words it ("13 is not a whole number from 1 to 12").
void check_count(std::uint64_t value, std::string_view field, CountRange range);
// A list of whole numbers, each in `range`, at most `max_items` of them; field[k] named.
std::vector<std::uint64_t> read_count_list(const nlohmann::json& j, std::string_view field, std::size_t max_items,
                                           CountRange range = {});
double read_number(const nlohmann::json& j, std::string_view field);  // finite
bool read_flag(const nlohmann::json& j, std::string_view field);      // true or false
std::string read_string(const nlohmann::json& j, std::string_view field);

}  // namespace attnlab
