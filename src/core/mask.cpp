// Masks decide which logits become -inf before the softmax.
#include "attnlab/mask.hpp"

#include <cassert>

namespace attnlab {

Mask::Mask(const MaskSpec& spec, std::size_t n, std::size_t m) : spec_(spec), hidden_(m, false) {
  assert(!spec.causal || n == m);
  assert(!spec.window || *spec.window > 0);
  (void)n;
  for (std::size_t j : spec.hidden_keys) {
    assert(j < m);
    hidden_[j] = true;
  }
}

bool Mask::visible(std::size_t i, std::size_t j) const {
  if (hidden_[j]) return false;
  if (spec_.causal && j > i) return false;
  if (spec_.window) {
    const std::size_t distance = i > j ? i - j : j - i;
    if (distance >= *spec_.window) return false;
  }
  return true;
}

}  // namespace attnlab
