// Numbers and matrices as JSON, the way every face writes them: a matrix is a list of rows
// (the row-vector convention), and a number JSON cannot hold (a masked logit's -inf) is null.
#pragma once
#include <nlohmann/json.hpp>

#include "attnlab/core/matrix.hpp"

namespace attnlab {

// x, or null when it is not finite (JSON has no infinities or NaN).
nlohmann::json number_or_null(double x);

// A matrix as a list of rows; non-finite entries (masked logits) become null.
nlohmann::json matrix_to_json(const Matrix& m);

}  // namespace attnlab
