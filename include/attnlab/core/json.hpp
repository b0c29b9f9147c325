// Numbers and matrices as JSON, the way every face writes them: a matrix is a list of rows
// (the row-vector convention), and a number JSON cannot hold (a masked logit's -inf) is null.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnlab/core/matrix.hpp"

namespace attnlab {

// x, or null when it is not finite (JSON has no infinities or NaN).
nlohmann::json number_or_null(double x);

// A matrix as a list of rows; non-finite entries (masked logits) become null.
nlohmann::json matrix_to_json(const Matrix& m);

// Untrusted JSON is nested at most this deep (a scenario needs 4 levels, a request 6).
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of [ and { in `text` (strings skipped), found in one pass without
// parsing, so a hostile document is refused before a parser or an error message walks it.
int json_nesting_depth(std::string_view text);

// A value for an error message, never walked: a scalar as written (cut at 40 characters),
// "a list of N items" or "an object of N fields" otherwise.
std::string describe_json(const nlohmann::json& value);

}  // namespace attnlab
