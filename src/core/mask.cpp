// Masks decide which logits become -inf before the softmax.
#include "attnlab/core/mask.hpp"

#include <cassert>
#include <cstdlib>

namespace attnlab {

Mask::Mask(const MaskSpec& spec, std::size_t n, std::size_t m)
    : spec_(spec), offset_(static_cast<long>(m) - static_cast<long>(n)), hidden_(m, false) {
  assert(!spec.window || *spec.window > 0);
  for (std::size_t j : spec.hidden_keys) {
    assert(j < m);
    hidden_[j] = true;
  }
}

bool Mask::visible(std::size_t i, std::size_t j) const {
  if (hidden_[j]) return false;
  const long position = static_cast<long>(i) + offset_, key = static_cast<long>(j);
  if (spec_.causal && key > position) return false;
  // Compared unsigned: a window too large for a long hides nothing (it once hid everything).
  if (spec_.window && static_cast<std::size_t>(std::abs(position - key)) >= *spec_.window) return false;
  return true;
}

}  // namespace attnlab
