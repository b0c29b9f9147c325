// attnlab's own f32 matrix product: packed panels and a register-blocked micro-kernel per
// instruction set (src/kernels/gemm_tiles.cpp says how), B in f32 or packed straight from
// stored 16-bit values. The model multiplies its 16-bit weights with it, and its small f32
// products where OpenBLAS's kernels are narrower than the CPU's vectors (OpenBLAS picks its
// own by CPU model, or by OPENBLAS_CORETYPE: measured on an AVX-512 machine, its Haswell
// kernels ran the model's products at 41-47% of the f32 peak, these 57-72%, `attnlab bench
// --products`); oneDNN's f32 matmul takes the large f32 ones (attnlab/model/blas.hpp).
// The reference is the plain triple loop; the tests compare the two for every
// transposition, stride, beta and edge.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

// C[M × N] = beta · C + op(A) · op(B) on the calling thread, row-major with rows lda, ldb and
// ldc apart: op(A) is A [M × K], or A stored [K × M] when ta; op(B) is B [K × N], or B stored
// [N × K] when tb (an nn.Linear's weight). beta = 0 ignores what C held (NaN included). `isa`:
// the instruction set (nullopt: the best this CPU has; a narrower one for tests and benchmarks).
void f32_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
              const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc, std::optional<Isa> isa = {});

// The same with B's values stored as f16 or bf16 (b_dtype; f32: std::invalid_argument), widened
// exactly to f32 as they are packed: a 16-bit weight multiplied with no widened copy of it.
void f32_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
              const std::uint16_t* B, DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc,
              std::optional<Isa> isa = {});

// Whether these kernels have vectors here (AVX2 or AVX-512): where not, the model's products
// stay on the BLAS library's.
inline bool f32_gemm_vectorized() { return best_isa() != Isa::generic; }

}  // namespace attnlab
