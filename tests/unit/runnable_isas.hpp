// The kernels' instruction sets this CPU can run, so that every fast path is compared with
// the reference on each of them, not only on the best one.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab::test {

inline std::vector<Isa> runnable_isas() {
  std::vector<Isa> isas{Isa::generic};
  const Isa best = best_isa();
  if (best >= Isa::avx2) isas.push_back(Isa::avx2);
  if (best >= Isa::avx512) isas.push_back(Isa::avx512);
  if (best >= Isa::avx512_bf16) isas.push_back(Isa::avx512_bf16);  // paths of their own (Q4_K products)
  return isas;
}

// How much further than an f32 loop's rounding the int8 dot products of Q4_K and Q8_0 (the
// avx512_bf16 path, matvec_tiles.cpp) may be from the exact sum x · w: they hold each 32
// values of x within max|x| / 32512 of them, so Σ over the 32s of max|x| / 32512 · Σ |w|.
// x: `length` values; w: `length` values `w_step` apart.
inline double int8_parts_bound(const float* x, const float* w, std::size_t length, std::size_t w_step = 1) {
  double bound = 0;
  for (std::size_t g = 0; g < length; g += 32) {
    double largest = 0, weights = 0;
    for (std::size_t i = g; i < std::min(length, g + 32); ++i)
      largest = std::max(largest, std::abs(double(x[i]))), weights += std::abs(double(w[i * w_step]));
    bound += largest / 32512 * weights;
  }
  return bound;
}

}  // namespace attnlab::test
