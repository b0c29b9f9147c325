// AMX where the compiler or the processor family has none (attnlab/kernels/peak.hpp): no ceiling,
// and the tiles' products (kernel_impl.hpp's amx namespace) never called.
#include <stdexcept>

#include "attnlab/kernels/peak.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

bool amx_bf16_available() { return false; }
bool amx_int8_available() { return false; }

double amx_bf16_peak_gflops(int, long) { return 0; }
double amx_int8_peak_gops(int, long) { return 0; }

// (Never called: amx_bf16_available() is false.)
bool kernels::amx::splittable(const float*, std::size_t) {
  throw std::logic_error("splittable: this build has no AMX tiles");
}
void kernels::amx::split_row_bf16(const float*, std::size_t, std::size_t, std::uint16_t*) {
  throw std::logic_error("split_row_bf16: this build has no AMX tiles");
}
void kernels::amx::bf16_weights(const Int8PanelsView&, std::size_t, std::size_t, std::uint16_t*) {
  throw std::logic_error("bf16_weights: this build has no AMX tiles");
}
void kernels::amx::bf16_tiles(const std::uint16_t*, std::size_t, const std::uint16_t*, std::size_t, std::size_t, float*,
                              std::size_t, std::size_t, float, float*) {
  throw std::logic_error("bf16_tiles: this build has no AMX tiles");
}

}  // namespace attnlab
