// What a context of n tokens costs in attention: the n×n score grid of one head, the
// FLOPs of one layer, and the bytes of a materialised grid, dense and beside two patterns
// that cut the grid (a sliding window, and the strided sparse pattern of Child et al.
// 2019). Every count is exact 64-bit integer arithmetic; a count that would not fit is
// refused, never wrapped.
//
// Cells (dot products) in one head's grid, n queries against n keys:
//   dense                    n²
//   causal                   n(n+1)/2                 query i sees keys j <= i
//   sliding window w         Σ_i min(i+1, w)          causal, the last w keys (i-w < j <= i)
//   strided (Child et al.)   Σ_i |A1(i) ∪ A2(i)|      causal, stride l = ⌈√n⌉ (or as given):
//                            A1(i) = {max(0, i-l), ..., i}, A2(i) = {j <= i : (i-j) mod l = 0};
//                            about 1.5·n·√n cells, the O(n·√n) of the paper
// FLOPs: each cell costs 2·d_k for its dot product q·k and 2·d_v for adding weight·v to
// the output, so 4·d_k per cell (d_v = d_k), per head; one layer has H heads, d_k·H = d_model.
// Grid bytes: one cell of the materialised grid is one value of the dtype.
#pragma once
#include <cstdint>

#include "attnlab/core/dtype.hpp"

namespace attnlab {

// Limits on the shape, so that only n can make a count overflow.
inline constexpr std::uint64_t kMaxCostWidth = 1u << 20;   // d_model
inline constexpr std::uint64_t kMaxCostHeads = 1u << 16;   // heads
inline constexpr std::uint64_t kMaxCostLayers = 1u << 16;  // layers

struct CostShape {
  std::uint64_t d_model = 4096;
  std::uint64_t heads = 32;
  std::uint64_t layers = 32;
  DType dtype = DType::f16;
  std::uint64_t window = 4096;  // w, keys per query in the sliding-window pattern
  std::uint64_t stride = 0;     // l of the strided pattern; 0: ⌈√n⌉ for each n, the paper's choice

  std::uint64_t d_k() const { return d_model / heads; }
};

// Checks d_model, heads, layers, window >= 1 and within the limits, and that heads divides
// d_model. Throws InputError naming the field (d_model, heads, layers, window).
void validate_cost_shape(const CostShape& shape);

struct GridCost {
  std::uint64_t n = 0;
  // cells of one head's grid (one dot product each)
  std::uint64_t dense_cells = 0;
  std::uint64_t causal_cells = 0;
  std::uint64_t window_cells = 0;
  std::uint64_t strided_stride = 0;  // l = ⌈√n⌉, or the shape's stride
  std::uint64_t strided_cells = 0;
  // FLOPs of one layer's attention (H heads): 4·cells·d_k·H
  std::uint64_t flops_layer_dense = 0;
  std::uint64_t flops_layer_causal = 0;
  std::uint64_t flops_layer_window = 0;
  std::uint64_t flops_layer_strided = 0;
  // FLOPs of all L layers, dense and causal
  std::uint64_t flops_model_dense = 0;
  std::uint64_t flops_model_causal = 0;
  // bytes of one materialised dense grid: n²·dtype bytes per head, ·H per layer
  std::uint64_t grid_bytes_head = 0;
  std::uint64_t grid_bytes_layer = 0;
};

// The cost of n tokens (n >= 1) for a valid shape. Throws InputError naming "tokens" when
// n is 0 or a count does not fit in 64 bits (the message gives the largest n that fits).
GridCost grid_cost(std::uint64_t n, const CostShape& shape);

// The largest n whose counts all fit in 64 bits for this shape.
std::uint64_t largest_costable_tokens(const CostShape& shape);

}  // namespace attnlab
