// The activations' dispatch (attnlab/kernels/activation.hpp): the rows split between
// threads, each share run by the instruction set's kernel (activation_tiles.cpp).
#include "attnlab/kernels/activation.hpp"

#include <algorithm>

#include "attnlab/kernels/team.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

namespace {
// Below this many values the rows run on the calling thread.
constexpr std::size_t kParallelValues = std::size_t{1} << 15;
}  // namespace

void activation_rows(ActivationKind f, const float* gate, const float* up, std::size_t ld_in, std::size_t rows,
                     std::size_t cols, float* out, std::size_t ld_out, int threads, std::optional<Isa> isa) {
  const Isa use = usable_isa(isa);
  const auto run = [&](std::size_t first, std::size_t last) {
    switch (use) {
      case Isa::generic: return kernels::generic::activation_rows(f, gate, up, ld_in, first, last, cols, out, ld_out);
      case Isa::avx2: return kernels::avx2::activation_rows(f, gate, up, ld_in, first, last, cols, out, ld_out);
      case Isa::avx512:
      case Isa::avx512_bf16:
        return kernels::avx512::activation_rows(f, gate, up, ld_in, first, last, cols, out, ld_out);
    }
  };
  const std::size_t team = rows * cols < kParallelValues ? 1 : std::size_t(sharing_threads(threads));
  share_items(team, int(team), [&](std::size_t k) { run(rows * k / team, rows * (k + 1) / team); });
}

}  // namespace attnlab
