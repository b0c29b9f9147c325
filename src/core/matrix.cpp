// Dense matrix helpers for the reference path: plain loops, written for clarity.
#include "attnlab/core/matrix.hpp"

namespace attnlab {

Matrix::Matrix(std::initializer_list<std::initializer_list<double>> list)
    : rows(list.size()), cols(list.size() ? list.begin()->size() : 0) {
  data.reserve(rows * cols);
  for (const auto& r : list) {
    assert(r.size() == cols);
    data.insert(data.end(), r.begin(), r.end());
  }
}

double dot(std::span<const double> a, std::span<const double> b) {
  assert(a.size() == b.size());
  double sum = 0.0;
  for (std::size_t t = 0; t < a.size(); ++t)
    sum += a[t] * b[t];
  return sum;
}

Matrix matmul(const Matrix& a, const Matrix& b) {
  assert(a.cols == b.rows);
  Matrix out(a.rows, b.cols);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t t = 0; t < a.cols; ++t) {
      const double a_it = a(i, t);
      for (std::size_t j = 0; j < b.cols; ++j)
        out(i, j) += a_it * b(t, j);
    }
  return out;
}

Matrix matmul_transposed(const Matrix& a, const Matrix& b) {
  assert(a.cols == b.cols);
  Matrix out(a.rows, b.rows);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.rows; ++j)
      out(i, j) = dot(a.row(i), b.row(j));
  return out;
}

Matrix concat_columns(const Matrix& a, const Matrix& b) {
  assert(a.rows == b.rows);
  Matrix out(a.rows, a.cols + b.cols);
  for (std::size_t i = 0; i < a.rows; ++i) {
    for (std::size_t j = 0; j < a.cols; ++j)
      out(i, j) = a(i, j);
    for (std::size_t j = 0; j < b.cols; ++j)
      out(i, a.cols + j) = b(i, j);
  }
  return out;
}

Matrix take_rows(const Matrix& m, std::span<const std::size_t> order) {
  Matrix out(order.size(), m.cols);
  for (std::size_t k = 0; k < order.size(); ++k) {
    assert(order[k] < m.rows);
    for (std::size_t j = 0; j < m.cols; ++j)
      out(k, j) = m(order[k], j);
  }
  return out;
}

}  // namespace attnlab
