// OpenBLAS's kernels (attnlab/model/blas.hpp).
#include "attnlab/model/blas.hpp"

#include <cblas.h>

#include <cstdlib>
#include <string_view>

#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

std::string blas_core() { return openblas_get_corename(); }

std::optional<std::string> blas_core_to_use() {
  if (std::getenv("OPENBLAS_CORETYPE")) return std::nullopt;  // the user's choice stands
  const std::string core = blas_core();
  const Isa isa = best_isa();
  const bool avx512 = isa == Isa::avx512 || isa == Isa::avx512_bf16;
  // Cores that use AVX-512 or AVX2 as well as this CPU can: nothing to change.
  for (std::string_view fitting : {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen"})
    if (avx512 && core == fitting) return std::nullopt;
  for (std::string_view fitting : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"})
    if (!avx512 && isa == Isa::avx2 && core == fitting) return std::nullopt;
  if (avx512) return "SkylakeX";
  if (isa == Isa::avx2) return "Haswell";
  return std::nullopt;
}

}  // namespace attnlab
