// The kernels' instruction sets this CPU can run, so that every fast path is compared with
// the reference on each of them, not only on the best one.
#pragma once
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

}  // namespace attnlab::test
