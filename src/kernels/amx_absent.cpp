// AMX's ceiling where the compiler or the processor family has no AMX (attnlab/kernels/peak.hpp).
#include <stdexcept>

#include "attnlab/kernels/peak.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

bool amx_bf16_available() { return false; }
bool amx_int8_available() { return false; }

double amx_bf16_peak_gflops(int, long) { return 0; }
double amx_int8_peak_gops(int, long) { return 0; }

void kernels::amx::int8_panels(const Int8PanelsView&, const avx512::Int8Rows&, std::size_t, std::size_t, float*,
                               std::size_t, std::size_t, float) {
  throw std::logic_error("int8_panels: this build has no AMX tiles (amx_int8_available() is false)");
}

}  // namespace attnlab
