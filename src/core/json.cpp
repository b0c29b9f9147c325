// Numbers and matrices as JSON (attnlab/core/json.hpp).
#include "attnlab/core/json.hpp"

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

}  // namespace attnlab
