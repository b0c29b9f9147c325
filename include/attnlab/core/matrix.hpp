// A dense row-major matrix of doubles, the reference path's only container.
//
// Row-vector convention throughout, as in docs/worked-example.md: a token is a row, and a projection
// is x · W with W of shape d_in × d_out. A matrix in JSON is a list of rows.
#pragma once
#include <cassert>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

namespace attnlab {

struct Matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> data;  // rows * cols values, row after row

  Matrix() = default;
  Matrix(std::size_t r, std::size_t c, double fill = 0.0) : rows(r), cols(c), data(r * c, fill) {}
  // From a list of rows; all rows must have the same length.
  Matrix(std::initializer_list<std::initializer_list<double>> list);

  double& operator()(std::size_t i, std::size_t j) {
    assert(i < rows && j < cols);
    return data[i * cols + j];
  }
  double operator()(std::size_t i, std::size_t j) const {
    assert(i < rows && j < cols);
    return data[i * cols + j];
  }
  std::span<double> row(std::size_t i) { return {data.data() + i * cols, cols}; }
  std::span<const double> row(std::size_t i) const { return {data.data() + i * cols, cols}; }

  bool operator==(const Matrix&) const = default;
};

// a · b: (r × k) · (k × c) -> r × c.
Matrix matmul(const Matrix& a, const Matrix& b);

// a · bᵀ: (r × k) · (c × k)ᵀ -> r × c; row i, column j is the dot product of a_i and b_j.
Matrix matmul_transposed(const Matrix& a, const Matrix& b);

// The dot product of two equally long vectors.
double dot(std::span<const double> a, std::span<const double> b);

// [a | b]: the columns of b appended to those of a (same number of rows).
Matrix concat_columns(const Matrix& a, const Matrix& b);

// The rows of m in a new order: result row k is m's row order[k].
Matrix take_rows(const Matrix& m, std::span<const std::size_t> order);

}  // namespace attnlab
