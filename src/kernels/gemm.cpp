// The f32 matrix product's choice of instruction set (attnlab/kernels/gemm.hpp).
#include "attnlab/kernels/gemm.hpp"

#include <stdexcept>

#include "kernel_impl.hpp"

namespace attnlab {

namespace {

void product(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
             const void* B, DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc,
             std::optional<Isa> isa) {
  switch (usable_isa(isa)) {
    case Isa::generic: return kernels::generic::gemm_f32(ta, tb, M, N, K, A, lda, B, b_dtype, ldb, beta, C, ldc);
    case Isa::avx2: return kernels::avx2::gemm_f32(ta, tb, M, N, K, A, lda, B, b_dtype, ldb, beta, C, ldc);
    case Isa::avx512:
    case Isa::avx512_bf16: return kernels::avx512::gemm_f32(ta, tb, M, N, K, A, lda, B, b_dtype, ldb, beta, C, ldc);
  }
}

}  // namespace

void f32_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
              const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc, std::optional<Isa> isa) {
  product(ta, tb, M, N, K, A, lda, B, DType::f32, ldb, beta, C, ldc, isa);
}

void f32_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
              const std::uint16_t* B, DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc,
              std::optional<Isa> isa) {
  if (b_dtype == DType::f32) throw std::invalid_argument("f32_gemm: 16-bit B stored as f32? Pass it as floats");
  product(ta, tb, M, N, K, A, lda, B, b_dtype, ldb, beta, C, ldc, isa);
}

}  // namespace attnlab
