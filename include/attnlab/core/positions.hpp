// How token positions enter attention: nothing, added sinusoids, an appended
// (sin pω, cos pω) pair, or rotary embeddings. Positions p count from 0.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "attnlab/core/matrix.hpp"

namespace attnlab {

enum class PositionKind { none, sinusoidal, sincos_pair, rope };

// How rotary embeddings turn a row of q or k at position p: pair by pair, by the angle p · f_i.
// The default is RoFormer's: pairs (2i, 2i + 1) at f_i = 10000^(−2i/d). Models of the Llama
// family pair split halves (i, i + d/2) and have their own frequencies (θ, scaling): a real
// head carries them.
struct Rope {
  bool split_half = false;          // pairs (i, i + d/2); false: (2i, 2i + 1)
  std::vector<double> frequencies;  // f_i for i < d/2; empty: 10000^(−2i/d). Fewer than d/2: only the
                                    // first 2·size columns rotate (pairs (i, i + size) when split-half)

  // The frequency of each rotated pair of a d-wide vector: `frequencies`, or the default.
  std::vector<double> pair_frequencies(std::size_t d) const;

  bool operator==(const Rope&) const = default;
};

struct Positions {
  PositionKind kind = PositionKind::none;
  double omega = 0.0;  // sincos-pair only: the angle per position step
  Rope rope;           // rope only

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

// Rotary position embedding in place: each pair (a, b) of row p (by default (2i, 2i+1), or
// (i, i + d/2) when split_half) is rotated by θ = p · f_i, d = rows.cols (must be even):
//   (a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ).
// `inverse` rotates by −θ (the transpose: a gradient carried back through the rotation).
// A rope with frequencies needs d/2 of them (Scenario validation checks it).
void rotate_rope(Matrix& rows, const Rope& rope = {}, bool inverse = false);
// One row at `position`, as rotate_rope rotates row `position` of a matrix.
void rotate_rope_row(std::span<double> row, std::size_t position, const Rope& rope = {}, bool inverse = false);

}  // namespace attnlab
