// Which kernels OpenBLAS runs the model's linear layers with.
//
// OpenBLAS chooses its kernels once, when it loads, from the CPU's model number. Debian 12's
// OpenBLAS (0.3.21) does not know CPUs newer than it and then falls back to "Prescott",
// SSE3 code: on a virtual "Intel Xeon Processor" with AVX-512 measured here, GPT-2 small's
// forward over 1024 tokens took 6.5 s on Prescott and 1.6-2.1 s on SkylakeX kernels. The
// kernels can only be chosen before OpenBLAS loads (the OPENBLAS_CORETYPE variable), so the
// attnlab command restarts itself once with it set (src/cli/main.cpp).
#pragma once
#include <optional>
#include <string>

namespace attnlab {

// The kernels OpenBLAS runs, as it names them ("SkylakeX", "Haswell", "Prescott", ...).
std::string blas_core();

// The OPENBLAS_CORETYPE that fits this CPU when OpenBLAS fell back to generic code:
// "SkylakeX" with AVX-512, "Haswell" with AVX2; nullopt when OpenBLAS already runs fitting
// kernels or the user set OPENBLAS_CORETYPE themselves.
std::optional<std::string> blas_core_to_use();

}  // namespace attnlab
