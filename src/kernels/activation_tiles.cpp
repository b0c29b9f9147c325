// The activations' per-instruction-set part (attnlab/kernels/activation.hpp): a range of
// rows, a vector (W values) at a time. Compiled once per instruction set, like flash_tiles.cpp.
#include <algorithm>
#include <cstring>

#include "attnlab/kernels/activation.hpp"
#include "kernel_impl.hpp"
#include "simd.hpp"

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kGeluK = 0.7978845608028654f;  // √(2/π)
constexpr float kGeluC = 0.044715f;

// x / (1 + e^(−a)), with e^(−|a|) only.
inline VF x_over_one_plus_exp_minus(VF x, VF a) {
  const VF magnitude = a < 0.0f ? -a : a;
  const VF t = exp2_vec(-magnitude * kLog2e);  // e^(−|a|) in (0, 1]
  const VF over = 1.0f / (1.0f + t);
  return a < 0.0f ? x * t * over : x * over;
}

template <ActivationKind F>
inline VF activate(VF x) {
  if constexpr (F == ActivationKind::gelu)
    return x_over_one_plus_exp_minus(x, 2.0f * kGeluK * (x + kGeluC * x * x * x));
  else
    return x_over_one_plus_exp_minus(x, x);
}

template <ActivationKind F>
void rows_as(const float* gate, const float* up, std::size_t ld_in, std::size_t first, std::size_t last,
             std::size_t cols, float* out, std::size_t ld_out) {
  for (std::size_t i = first; i < last; ++i) {
    const float* g = gate + i * ld_in;
    const float* u = up ? up + i * ld_in : nullptr;
    float* o = out + i * ld_out;
    std::size_t j = 0;
    for (; j + W <= cols; j += W) {
      const VF a = activate<F>(load(g + j));
      store(o + j, u ? a * load(u + j) : a);
    }
    if (j < cols) {  // the zero-padded rest
      float padded[W] = {}, ups[W] = {}, result[W];
      std::memcpy(padded, g + j, (cols - j) * sizeof(float));
      if (u) std::memcpy(ups, u + j, (cols - j) * sizeof(float));
      const VF a = activate<F>(load(padded));
      store(result, u ? a * load(ups) : a);
      std::memcpy(o + j, result, (cols - j) * sizeof(float));
    }
  }
}

}  // namespace

void activation_rows(ActivationKind f, const float* gate, const float* up, std::size_t ld_in, std::size_t first,
                     std::size_t last, std::size_t cols, float* out, std::size_t ld_out) {
  if (f == ActivationKind::gelu)
    rows_as<ActivationKind::gelu>(gate, up, ld_in, first, last, cols, out, ld_out);
  else
    rows_as<ActivationKind::silu>(gate, up, ld_in, first, last, cols, out, ld_out);
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
