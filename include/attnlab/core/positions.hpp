// How token positions enter attention: nothing, added sinusoids, an appended
// (sin pω, cos pω) pair, or rotary embeddings. Positions p count from 0.
#pragma once
#include <cstddef>
#include <string>

#include "attnlab/core/matrix.hpp"

namespace attnlab {

enum class PositionKind { none, sinusoidal, sincos_pair, rope };

struct Positions {
  PositionKind kind = PositionKind::none;
  double omega = 0.0;  // sincos-pair only: the angle per position step

  bool operator==(const Positions&) const = default;
};

// "none", "sinusoidal", "sincos-pair(ω=0.5)", "rope".
std::string describe(const Positions& positions);

// The width of a token's input vector once positions are applied: d_model, or
// d_model + 2 for sincos-pair.
std::size_t input_width(std::size_t d_model, const Positions& positions);

// The vectors the heads project, one row per token at positions 0, 1, ...:
//   sinusoidal:  x_p + PE(p), PE(p, 2i) = sin(p / 10000^(2i/d_model)),
//                             PE(p, 2i+1) = cos(p / 10000^(2i/d_model));
//   sincos-pair: [x_p | sin pω, cos pω];
//   none, rope:  x_p unchanged (rope acts on queries and keys, see rotate_rope).
// embeddings: n × d_model -> n × input_width(d_model).
Matrix apply_positions(const Matrix& embeddings, const Positions& positions);

// Rotary position embedding (RoFormer) in place: each consecutive pair (2i, 2i+1) of row
// p is rotated by θ = p · 10000^(-2i/d), d = rows.cols (must be even):
//   (a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ).
void rotate_rope(Matrix& rows);

}  // namespace attnlab
