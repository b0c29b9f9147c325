// Tolerance comparisons for tests: |a - b| <= atol + rtol·|ref|, reporting the first few
// mismatching pairs and the largest difference when a comparison fails.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "attnlab/core/matrix.hpp"

namespace attnlab::test {

struct Tolerance {
  double atol = 1e-9;
  double rtol = 1e-9;
};

inline ::testing::AssertionResult all_close(const std::vector<double>& actual, const std::vector<double>& expected,
                                            Tolerance tol = {}) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " != expected " << expected.size();
  std::string pairs;
  int bad = 0;
  double largest = 0.0;
  for (std::size_t k = 0; k < actual.size(); ++k) {
    const double a = actual[k], e = expected[k];
    const bool same_inf = std::isinf(a) && std::isinf(e) && (a > 0) == (e > 0);
    const double diff = same_inf ? 0.0 : std::abs(a - e);
    if (!same_inf) largest = std::max(largest, std::isnan(diff) ? INFINITY : diff);
    if (same_inf || diff <= tol.atol + tol.rtol * std::abs(e)) continue;
    if (bad++ < 5) pairs += fmt::format("\n  [{}] got {:.17g}, expected {:.17g}", k, a, e);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << actual.size() << " values differ (atol " << tol.atol
                                       << ", rtol " << tol.rtol << "), largest |diff| " << largest << pairs;
}

// Float results (the fast kernels' outputs), compared in double.
inline ::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<float>& expected,
                                            Tolerance tol = {}) {
  return all_close(std::vector<double>(actual.begin(), actual.end()),
                   std::vector<double>(expected.begin(), expected.end()), tol);
}

inline ::testing::AssertionResult all_close(const Matrix& actual, const Matrix& expected, Tolerance tol = {}) {
  if (actual.rows != expected.rows || actual.cols != expected.cols)
    return ::testing::AssertionFailure() << "shape " << actual.rows << "×" << actual.cols << " != expected "
                                         << expected.rows << "×" << expected.cols;
  return all_close(actual.data, expected.data, tol);
}

// The InputError message calling f raises, or "" when it raises none.
template <class F>
std::string error_of_call(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace attnlab::test

#define EXPECT_ERROR_CONTAINS(message, expected) \
  EXPECT_NE((message).find(expected), std::string::npos) << "message was: \"" << (message) << "\""
