// Numbers and matrices as JSON, the way every face writes them: a matrix is a list of rows
// (the row-vector convention), and a number JSON cannot hold (a masked logit's -inf) is null.
#pragma once
#include <string>
#include <string_view>

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

}  // namespace attnlab
