// attnlab's own f32 matrix product (attnlab/kernels/gemm.hpp) against the plain triple loop
// in double, on every instruction set this CPU runs: each transposition of A and B, beta 0
// (C's NaN ignored) and not, strides longer than the rows, shapes below one micro-tile and past
// every block (K past a slice of 256, M past a block of rows, N past a block of columns), and B
// stored as f16 and bf16 (widened exactly as it is packed); and the model's products
// (attnlab/model/blas.hpp's gemm and gemm_16bit) on the threads, on either kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/gemm.hpp"
#include "attnlab/model/blas.hpp"
#include "random_inputs.hpp"
#include "runnable_isas.hpp"

using namespace attnlab;
using attnlab::test::random_floats;

namespace gemm_test {  // named: the unit tests compile as unity batches

struct Shape {
  std::size_t M, N, K;
};

// op(A) and op(B)'s element (i, k) and (k, j), as gemm.hpp defines the layouts.
float a_at(const std::vector<float>& A, bool ta, std::size_t lda, std::size_t i, std::size_t k) {
  return ta ? A[k * lda + i] : A[i * lda + k];
}
float b_at(const std::vector<float>& B, bool tb, std::size_t ldb, std::size_t k, std::size_t j) {
  return tb ? B[j * ldb + k] : B[k * ldb + j];
}

// Each C[i][j] against beta · C + Σ_k op(A)(i, k) · op(B)(k, j) in double, within f32 sums'
// rounding (K · 2^-23 · Σ |terms|, the ordering free); C's padding past N untouched.
void expect_product(const Shape& s, bool ta, bool tb, const std::vector<float>& A, std::size_t lda,
                    const std::vector<float>& B, std::size_t ldb, float beta, const std::vector<float>& before,
                    const std::vector<float>& C, std::size_t ldc, const std::string& what) {
  for (std::size_t i = 0; i < s.M; ++i)
    for (std::size_t j = 0; j < ldc; ++j) {
      if (j >= s.N) {
        ASSERT_EQ(std::memcmp(&C[i * ldc + j], &before[i * ldc + j], sizeof(float)), 0) << what << " wrote padding";
        continue;
      }
      double exact = beta == 0.0f ? 0.0 : double(beta) * before[i * ldc + j], magnitude = std::abs(exact);
      for (std::size_t k = 0; k < s.K; ++k) {
        const double term = double(a_at(A, ta, lda, i, k)) * b_at(B, tb, ldb, k, j);
        exact += term, magnitude += std::abs(term);
      }
      ASSERT_NEAR(C[i * ldc + j], exact, 1e-6 * (s.K + 2) * magnitude + 1e-30)
          << what << " C[" << i << "][" << j << "]";
    }
}

class F32Gemm : public ::testing::TestWithParam<Isa> {};

TEST_P(F32Gemm, EveryLayoutBetaAndEdgeMatchesTheTripleLoop) {
  const Isa isa = GetParam();
  // No terms (C = beta · C); below a tile; tails of both; past a slice of K (256), a block of
  // rows (≥ 96) and of columns.
  for (const Shape s : {Shape{4, 5, 0}, Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{13, 50, 33}, Shape{130, 70, 300},
                        Shape{9, 1601, 20}, Shape{40, 17, 513}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 0.5f}) {
          const std::size_t pad = 3, lda = (ta ? s.M : s.K) + pad, ldb = (tb ? s.K : s.N) + pad, ldc = s.N + pad;
          const std::vector<float> A = random_floats((ta ? s.K : s.M) * lda, 1),
                                   B = random_floats((tb ? s.N : s.K) * ldb, 2);
          std::vector<float> C = random_floats(s.M * ldc, 3);
          if (beta == 0.0f)  // ignored, NaN and all
            for (std::size_t i = 0; i < s.M; ++i)
              C[i * ldc] = std::numeric_limits<float>::quiet_NaN();
          const std::vector<float> before = C;
          f32_gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, isa);
          const std::string what = to_string(isa) + " " + std::to_string(s.M) + "x" + std::to_string(s.N) + "x" +
                                   std::to_string(s.K) + (ta ? " ta" : "") + (tb ? " tb" : "") +
                                   (beta != 0 ? " beta" : "");
          expect_product(s, ta, tb, A, lda, B, ldb, beta, before, C, ldc, what);
        }
}

TEST_P(F32Gemm, SixteenBitBIsWidenedExactly) {
  const Isa isa = GetParam();
  for (const DType dtype : {DType::f16, DType::bf16})
    for (const Shape s : {Shape{5, 37, 19}, Shape{20, 100, 270}})
      for (const bool tb : {false, true}) {
        const std::size_t ldb = (tb ? s.K : s.N) + 1, ldc = s.N;
        const std::vector<float> A = random_floats(s.M * s.K, 4), values = random_floats((tb ? s.N : s.K) * ldb, 5);
        std::vector<std::uint16_t> stored(values.size());
        std::vector<float> widened(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
          stored[i] = dtype == DType::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
          widened[i] = dtype == DType::f16 ? f16_to_f32(stored[i]) : bf16_to_f32(stored[i]);
        }
        std::vector<float> C(s.M * ldc, 1.0f);
        const std::vector<float> before = C;
        f32_gemm(false, tb, s.M, s.N, s.K, A.data(), s.K, stored.data(), dtype, ldb, 0.25f, C.data(), ldc, isa);
        expect_product(s, false, tb, A, s.K, widened, ldb, 0.25f, before, C, ldc,
                       to_string(isa) + (dtype == DType::f16 ? " f16" : " bf16") + (tb ? " tb" : ""));
      }
  std::vector<float> C(1);
  const std::uint16_t one = 0;
  const float x = 1;
  EXPECT_THROW(f32_gemm(false, true, 1, 1, 1, &x, 1, &one, DType::f32, 1, 0.0f, C.data(), 1, isa),
               std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Isas, F32Gemm, ::testing::ValuesIn(attnlab::test::runnable_isas()), [](const auto& info) {
  return std::string(info.param == Isa::generic  ? "generic"
                     : info.param == Isa::avx2   ? "avx2"
                     : info.param == Isa::avx512 ? "avx512"
                                                 : "avx512_bf16");
});

// The model's products over the threads, on each kernels this CPU runs (UseF32Kernels): gemm
// and gemm_16bit on a product large enough to be shared (and for oneDNN's, to be theirs),
// against the triple loop; gemm_16bit refuses where OpenBLAS's or oneDNN's are asked for (the
// caller then widens).
TEST(ModelProducts, SharedOverTheThreadsMatchTheTripleLoopOnEachKernels) {
  const Shape s{70, 300, 200};  // 4.2 M multiply-adds: shared
  const std::vector<float> A = random_floats(s.M * s.K, 6), B = random_floats(s.N * s.K, 7);
  std::vector<std::uint16_t> stored(B.size());
  std::vector<float> widened(B.size());
  for (std::size_t i = 0; i < B.size(); ++i)
    stored[i] = f32_to_f16(B[i]), widened[i] = f16_to_f32(stored[i]);
  std::vector<F32Kernels> kernels{F32Kernels::openblas};
  if (best_isa() != Isa::generic) kernels.push_back(F32Kernels::attnlab);
  if (onednn_f32_available()) kernels.push_back(F32Kernels::onednn);
  for (const F32Kernels k : kernels) {
    const UseF32Kernels use(k);
    const bool ours = k == F32Kernels::attnlab;
    const std::string name = ours ? "attnlab's" : k == F32Kernels::onednn ? "oneDNN's" : "OpenBLAS's";
    EXPECT_EQ(f32_kernels(), k);
    EXPECT_NE(f32_products_kernels().find(name), std::string::npos) << f32_products_kernels();
    std::vector<float> C(s.M * s.N, 2.0f);
    const std::vector<float> before = C;
    gemm(false, true, s.M, s.N, s.K, A.data(), s.K, B.data(), s.K, 1.0f, C.data(), s.N);
    expect_product(s, false, true, A, s.K, B, s.K, 1.0f, before, C, s.N, "gemm, " + name);
    std::vector<float> D = before;
    ASSERT_EQ(gemm_16bit(s.M, s.N, s.K, A.data(), s.K, stored.data(), DType::f16, s.K, 1.0f, D.data(), s.N), ours);
    if (ours)
      expect_product(s, false, true, A, s.K, widened, s.K, 1.0f, before, D, s.N, "gemm_16bit");
    else
      EXPECT_EQ(D, before) << "a refused product wrote C";
  }
}

// oneDNN's f32 products, as the model and training make them: each transposition, beta 0 (a
// NaN in C ignored) and not, rows longer than the operands with C's padding untouched, on the
// threads and inside a parallel region (on the calling thread), above and below the size
// where they hand the product to the packed kernels; and the same shape again (its kernel kept).
TEST(ModelProducts, OneDnnsMatchTheTripleLoopInEveryLayout) {
  if (!onednn_f32_available()) GTEST_SKIP() << "oneDNN has no fast f32 product on this CPU";
  const UseF32Kernels use(F32Kernels::onednn);
  for (const Shape s : {Shape{67, 130, 150}, Shape{5, 40, 30}})  // 1.3 M multiply-adds (oneDNN's); 6000 (packed)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 0.5f})
          for (const bool nested : {false, true}) {
            const std::size_t lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 5, ldc = s.N + 2;
            const std::vector<float> A = random_floats((ta ? s.K : s.M) * lda, 8),
                                     B = random_floats((tb ? s.N : s.K) * ldb, 9);
            std::vector<float> C = random_floats(s.M * ldc, 10);
            if (beta == 0.0f) C[0] = std::numeric_limits<float>::quiet_NaN();
            const std::vector<float> before = C;
            const std::string what = std::string(ta ? "ta " : "") + (tb ? "tb " : "") + (nested ? "nested " : "") +
                                     "beta " + std::to_string(beta) + " M " + std::to_string(s.M);
            for (int again = 0; again < 2; ++again) {
              C = before;
              if (nested) {
#pragma omp parallel num_threads(2)
#pragma omp single
                gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
              } else {
                gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
              }
              expect_product(s, ta, tb, A, lda, B, ldb, beta, before, C, ldc, what);
            }
          }
}

// The packed kernels keep f32 weights on OpenBLAS's only while they are as wide as the CPU's
// vectors: told to run its Haswell kernels on an AVX-512 CPU, the products move to attnlab's,
// and back with its SkylakeX ones (the choice is kept between products and asked again on a
// change). oneDNN's, where it has a fast kernel, take the large ones whatever OpenBLAS runs.
TEST(ModelProducts, OpenBlasKeepsF32WeightsOnlyWhereItsKernelsFitTheCpu) {
  if (best_isa() != Isa::avx512 && best_isa() != Isa::avx512_bf16) GTEST_SKIP() << "an AVX-512 CPU's rule";
  if (std::getenv("ATTNLAB_GEMM")) GTEST_SKIP() << "ATTNLAB_GEMM chooses the kernels here";
  const std::string before = blas_core();
  if (!use_blas_core("Haswell")) GTEST_SKIP() << "this OpenBLAS cannot choose its kernels again";
  EXPECT_EQ(packed_f32_kernels(), F32Kernels::attnlab) << "OpenBLAS on Haswell kernels";
  EXPECT_EQ(f32_kernels(), onednn_f32_available() ? F32Kernels::onednn : F32Kernels::attnlab);
  ASSERT_TRUE(use_blas_core("SkylakeX"));
  EXPECT_EQ(packed_f32_kernels(), F32Kernels::openblas) << "OpenBLAS on SkylakeX kernels";
  EXPECT_EQ(f32_kernels(), onednn_f32_available() ? F32Kernels::onednn : F32Kernels::openblas);
  use_blas_core(before);
}

}  // namespace gemm_test
