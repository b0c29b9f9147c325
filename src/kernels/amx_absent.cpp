// AMX's ceiling where the compiler or the processor family has no AMX (attnlab/kernels/peak.hpp).
#include "attnlab/kernels/peak.hpp"

namespace attnlab {

bool amx_bf16_available() { return false; }
bool amx_int8_available() { return false; }

double amx_bf16_peak_gflops(int, long) { return 0; }
double amx_int8_peak_gops(int, long) { return 0; }

}  // namespace attnlab
