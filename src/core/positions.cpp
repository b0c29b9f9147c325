// Positional information: the one thing attention cannot see on its own (without it the
// operation is permutation-equivariant: docs/worked-example.md, Yun et al. 2020). Each kind is a few lines of the
// formula it implements.
#include "attnlab/core/positions.hpp"

#include <fmt/format.h>
#include <cmath>

namespace attnlab {

std::string describe(const Positions& positions) {
  switch (positions.kind) {
    case PositionKind::none: return "none";
    case PositionKind::sinusoidal: return "sinusoidal";
    case PositionKind::sincos_pair: return fmt::format("sincos-pair (ω = {:g})", positions.omega);
    case PositionKind::rope: return "rope";
  }
  return "?";
}

std::size_t input_width(std::size_t d_model, const Positions& positions) {
  return positions.kind == PositionKind::sincos_pair ? d_model + 2 : d_model;
}

Matrix apply_positions(const Matrix& embeddings, const Positions& positions) {
  const std::size_t n = embeddings.rows, d_model = embeddings.cols;
  switch (positions.kind) {
    case PositionKind::none:
    case PositionKind::rope: return embeddings;
    case PositionKind::sinusoidal: {
      Matrix out = embeddings;
      for (std::size_t p = 0; p < n; ++p)
        for (std::size_t dim = 0; dim < d_model; ++dim) {
          const std::size_t two_i = dim - dim % 2;  // 2i for both dims of the pair
          const double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(two_i) / d_model);
          out(p, dim) += dim % 2 == 0 ? std::sin(angle) : std::cos(angle);
        }
      return out;
    }
    case PositionKind::sincos_pair: {
      Matrix pair(n, 2);
      for (std::size_t p = 0; p < n; ++p) {
        pair(p, 0) = std::sin(static_cast<double>(p) * positions.omega);
        pair(p, 1) = std::cos(static_cast<double>(p) * positions.omega);
      }
      return concat_columns(embeddings, pair);
    }
  }
  return embeddings;
}

std::vector<double> Rope::pair_frequencies(std::size_t d) const {
  if (!frequencies.empty()) return frequencies;
  std::vector<double> f(d / 2);
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(10000.0, -static_cast<double>(2 * i) / static_cast<double>(d));
  return f;
}

namespace {

// Row `row` rotated as at `position` by these pair frequencies: over the first 2·half
// columns (all of them unless the frequencies say fewer: a partially rotated head), the rest
// passed through.
void rotate(std::span<double> row, std::size_t position, std::span<const double> frequencies, bool split_half,
            bool inverse) {
  const std::size_t half = frequencies.size();
  assert(row.size() % 2 == 0 && 2 * half <= row.size());
  for (std::size_t i = 0; i < half; ++i) {
    const double theta = (inverse ? -1.0 : 1.0) * static_cast<double>(position) * frequencies[i];
    const std::size_t first = split_half ? i : 2 * i, second = split_half ? i + half : 2 * i + 1;
    const double a = row[first], b = row[second];
    row[first] = a * std::cos(theta) - b * std::sin(theta);
    row[second] = a * std::sin(theta) + b * std::cos(theta);
  }
}

}  // namespace

void rotate_rope_row(std::span<double> row, std::size_t position, const Rope& rope, bool inverse) {
  rotate(row, position, rope.pair_frequencies(row.size()), rope.split_half, inverse);
}

void rotate_rope(Matrix& rows, const Rope& rope, bool inverse) {
  const std::vector<double> frequencies = rope.pair_frequencies(rows.cols);
  for (std::size_t p = 0; p < rows.rows; ++p)
    rotate(std::span<double>(rows.data.data() + p * rows.cols, rows.cols), p, frequencies, rope.split_half, inverse);
}

}  // namespace attnlab
