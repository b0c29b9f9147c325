// The grid counts of include/attnlab/analysis/cost.hpp, in closed form with checked arithmetic.
#include "attnlab/analysis/cost.hpp"

#include <fmt/format.h>
#include <cmath>

#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

struct Overflow {};

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  if (const auto p = checked_mul(a, b)) return *p;
  throw Overflow{};
}
std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  if (const auto s = checked_add(a, b)) return *s;
  throw Overflow{};
}

// n(n+1)/2 without overflowing in the intermediate n(n+1) when the result fits.
std::uint64_t triangle(std::uint64_t n) { return n % 2 == 0 ? mul(n / 2, n + 1) : mul(n, (n + 1) / 2); }

// ⌈√n⌉ exactly (the double estimate corrected by integer checks).
std::uint64_t ceil_sqrt(std::uint64_t n) {
  std::uint64_t r = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(n)));
  while (r > 0 && r * r >= n)
    --r;  // r < √n (r ≤ 2^32, r·r fits)
  while ((r + 1) * (r + 1) < n)
    ++r;  // (r+1)² ≥ n
  return r + 1;
}

// Σ_{i=0}^{count-1} ⌊i/l⌋ = l·q(q-1)/2 + r·q with q = ⌊count/l⌋, r = count mod l.
std::uint64_t sum_floor_div(std::uint64_t count, std::uint64_t l) {
  const std::uint64_t q = count / l, r = count % l;
  const std::uint64_t pairs = q % 2 == 0 ? mul(q / 2, q == 0 ? 0 : q - 1) : mul(q, (q - 1) / 2);
  return add(mul(l, pairs), mul(r, q));
}

GridCost compute(std::uint64_t n, const CostShape& s) {
  GridCost c;
  c.n = n;
  c.dense_cells = mul(n, n);
  c.causal_cells = triangle(n);
  const std::uint64_t w = s.window;
  c.window_cells = n <= w ? c.causal_cells : add(triangle(w), mul(n - w, w));
  // Strided: query i < l sees keys 0..i (i+1 cells); query i >= l sees l + ⌊i/l⌋ cells
  // (l+1 local keys, ⌊i/l⌋+1 strided keys, two of them, i and i-l, in both sets).
  const std::uint64_t l = s.stride ? s.stride : ceil_sqrt(n);
  c.strided_stride = l;
  c.strided_cells = n <= l ? c.causal_cells : add(add(triangle(l), mul(n - l, l)), sum_floor_div(n, l));

  const std::uint64_t per_cell_layer = mul(mul(4, s.d_k()), s.heads);  // 4·d_k·H FLOPs per cell
  c.flops_layer_dense = mul(c.dense_cells, per_cell_layer);
  c.flops_layer_causal = mul(c.causal_cells, per_cell_layer);
  c.flops_layer_window = mul(c.window_cells, per_cell_layer);
  c.flops_layer_strided = mul(c.strided_cells, per_cell_layer);
  c.flops_model_dense = mul(c.flops_layer_dense, s.layers);
  c.flops_model_causal = mul(c.flops_layer_causal, s.layers);
  c.grid_bytes_head = mul(c.dense_cells, dtype_bytes(s.dtype));
  c.grid_bytes_layer = mul(c.grid_bytes_head, s.heads);
  return c;
}

bool fits(std::uint64_t n, const CostShape& s) {
  try {
    compute(n, s);
    return true;
  } catch (const Overflow&) {
    return false;
  }
}

}  // namespace

void validate_cost_shape(const CostShape& s) {
  require_in_range("d_model", s.d_model, kMaxCostWidth);
  require_in_range("heads", s.heads, kMaxCostHeads);
  require_in_range("layers", s.layers, kMaxCostLayers);
  require_in_range("window", s.window, std::uint64_t{1} << 62);
  if (s.d_model % s.heads != 0)
    fail("heads", fmt::format("{} heads do not divide d_model {} into equal heads (d_k = d_model / heads); "
                              "give a number of heads that divides it, e.g. {}",
                              s.heads, s.d_model, s.d_model % 32 == 0 ? 32 : 1));
}

std::uint64_t largest_costable_tokens(const CostShape& s) {
  std::uint64_t lo = 1, hi = std::uint64_t{1} << 32;  // n² overflows at 2^32
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid, s))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

GridCost grid_cost(std::uint64_t n, const CostShape& s) {
  validate_cost_shape(s);
  if (n == 0) fail("tokens", "0 tokens has no grid; give lengths >= 1");
  try {
    return compute(n, s);
  } catch (const Overflow&) {
    fail("tokens", fmt::format("{} tokens make the FLOPs (4·n²·d_k·H·L = 4·n²·{}·{}·{}) overflow 64 bits "
                               "(more than {}); the largest n with this shape is {}",
                               format_count(n), s.d_k(), s.heads, s.layers, format_count(UINT64_MAX),
                               format_count(largest_costable_tokens(s))));
  }
}

}  // namespace attnlab
