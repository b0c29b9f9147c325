// The MLP's activations over whole rows at once, in f32 vector registers (the fast path of
// transformer.hpp's activation_forward, which keeps the formula for f64):
//   GELU, GPT-2's tanh form: 0.5·x·(1 + tanh(u)) = x / (1 + e^(−2u)), u = √(2/π)·(x + 0.044715·x³)
//   SiLU: x / (1 + e^(−x))
// each alone or gated (f(gate) · up: GeGLU, SwiGLU). The exponential is the attention
// kernels' (Cephes' polynomial for 2^x), taken of −|·| only, so it never overflows:
// x / (1 + e^(−a)) for a ≥ 0, x · e^(a) / (1 + e^(a)) for a < 0. Within 2e-6·|x| of the
// formula in double (both functions are smaller than |x|), tests/unit/test_activation.cpp.
#pragma once
#include <cstddef>
#include <optional>

#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

enum class ActivationKind { gelu, silu };

// out[i·ld_out + j] = f(gate[i·ld_in + j]) · (up ? up[i·ld_in + j] : 1) for i < rows, j < cols,
// the rows shared over OpenMP's threads when there are enough of them (threads 0: OpenMP's
// default; isa nullopt: the best this CPU has).
void activation_rows(ActivationKind f, const float* gate, const float* up, std::size_t ld_in, std::size_t rows,
                     std::size_t cols, float* out, std::size_t ld_out, int threads = 0, std::optional<Isa> isa = {});

}  // namespace attnlab
