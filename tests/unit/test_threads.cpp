// The thread budget (attnlab/model/threads.hpp) and the one pool: what a budget sets while
// it lives and leaves after, per thread; products shared over OpenMP's threads with OpenBLAS
// on one (attnlab/model/blas.hpp), equal to one OpenBLAS call.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <barrier>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/threads.hpp"

using attnlab::blas_threads;
using attnlab::budget_threads;
using attnlab::ThreadBudget;

TEST(ThreadBudget, SetsThisThreadsOpenMpThreadsAndRestoresThemNested) {
  const int before = omp_get_max_threads();
  EXPECT_GE(attnlab::cores(), 1);
  {
    const ThreadBudget outer(3);
    EXPECT_EQ(budget_threads(), 3);
    int team = 0;
#pragma omp parallel
#pragma omp single
    team = omp_get_num_threads();
    EXPECT_EQ(team, 3) << "a region opened under the budget has its threads";
    {
      const ThreadBudget inner(1);
      EXPECT_EQ(budget_threads(), 1);
    }
    EXPECT_EQ(budget_threads(), 3);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
  const ThreadBudget none(0);
  EXPECT_EQ(budget_threads(), 1) << "a budget is at least one thread";
}

// Two jobs side by side, on 4 threads and on 1: each thread's budget is its own.
TEST(ThreadBudget, BudgetsOnTwoThreadsAreEachTheirOwn) {
  std::barrier both_live(2);
  int wide_sees = 0, narrow_sees = 0;
  std::thread wide([&] {
    const ThreadBudget b(4);
    both_live.arrive_and_wait();
    wide_sees = budget_threads();
  });
  std::thread narrow([&] {
    const ThreadBudget b(1);
    both_live.arrive_and_wait();
    narrow_sees = budget_threads();
  });
  wide.join();
  narrow.join();
  EXPECT_EQ(wide_sees, 4);
  EXPECT_EQ(narrow_sees, 1);
}

// A product shared over 1, 2 and 3 threads, cut by columns (C wide) or by rows (C narrow),
// each operand transposed or not, with strides wider than the matrices and beta ≠ 0, against
// the sum written out in double: each element within float rounding of Σ |a|·|b|. (Not bit
// for bit: OpenBLAS takes other kernels for a block than for the whole.)
TEST(SharedProduct, IsTheProductForEveryCutAndTransposition) {
  attnlab::SplitMix64 rng(3);
  for (const auto& [M, N, K] : {std::array<std::size_t, 3>{300, 257, 40}, std::array<std::size_t, 3>{700, 20, 90},
                                std::array<std::size_t, 3>{3, 5, 7}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const std::size_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
        std::vector<float> A((ta ? K : M) * lda), B((tb ? N : K) * ldb), C0(M * ldc);
        for (auto* buffer : {&A, &B, &C0})
          for (float& x : *buffer)
            x = static_cast<float>(rng.normal());
        const auto a = [&](std::size_t i, std::size_t k) { return double(ta ? A[k * lda + i] : A[i * lda + k]); };
        const auto b = [&](std::size_t k, std::size_t j) { return double(tb ? B[j * ldb + k] : B[k * ldb + j]); };
        for (int threads : {1, 2, 3}) {
          const ThreadBudget budget(threads);
          std::vector<float> got = C0;
          attnlab::gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.5f, got.data(), ldc);
          for (std::size_t i = 0; i < M; ++i)
            for (std::size_t j = 0; j < N; ++j) {
              double sum = 0.5 * C0[i * ldc + j], size = std::abs(sum);
              for (std::size_t k = 0; k < K; ++k)
                sum += a(i, k) * b(k, j), size += std::abs(a(i, k) * b(k, j));
              ASSERT_NEAR(got[i * ldc + j], sum, 1e-6 * size + 1e-30)
                  << M << "x" << N << "x" << K << " ta " << ta << " tb " << tb << ", " << threads << " threads, C[" << i
                  << "][" << j << "]";
            }
          EXPECT_EQ(got[M * ldc - 1], C0[M * ldc - 1]) << "the stride's padding is left as it was";
        }
      }
  EXPECT_EQ(blas_threads(), 1) << "OpenBLAS itself runs on one thread once a product was made";
}

// The library has OpenBLAS choose its kernels again in this process (what it does before its
// first product where OpenBLAS fell back to narrower ones than the CPU runs): named kernels
// are then the ones that run, products stay right on them, and the user's OPENBLAS_CORETYPE
// is as it was.
TEST(BlasCore, OpenBlasRunsTheKernelsChosenInTheProcess) {
  const std::string original = attnlab::blas_core();
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const std::string user = set ? set : "";
  const attnlab::Isa isa = attnlab::best_isa();
  std::vector<std::string> cores = {"Prescott"};
  if (isa >= attnlab::Isa::avx2) cores.push_back("Haswell");
  if (isa >= attnlab::Isa::avx512) cores.push_back("SkylakeX");
  attnlab::SplitMix64 rng(5);
  std::vector<float> A(64 * 48), B(48 * 80), C(64 * 80);
  for (auto* buffer : {&A, &B})
    for (float& x : *buffer)
      x = static_cast<float>(rng.normal());
  for (const std::string& core : cores) {
    ASSERT_TRUE(attnlab::use_blas_core(core)) << core;
    EXPECT_EQ(attnlab::blas_core(), core);
    EXPECT_EQ(std::string(std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : ""), user)
        << "the variable as it was";
    attnlab::gemm(false, false, 64, 80, 48, A.data(), 48, B.data(), 80, 0.0f, C.data(), 80);
    for (std::size_t i = 0; i < 64; ++i)
      for (std::size_t j = 0; j < 80; j += 7) {
        double sum = 0, size = 0;
        for (std::size_t k = 0; k < 48; ++k)
          sum += double(A[i * 48 + k]) * B[k * 80 + j], size += std::abs(double(A[i * 48 + k]) * B[k * 80 + j]);
        ASSERT_NEAR(C[i * 80 + j], sum, 1e-6 * size) << core << " C[" << i << "][" << j << "]";
      }
  }
  EXPECT_FALSE(attnlab::use_blas_core("NoSuchCore")) << "a name OpenBLAS does not know";
  EXPECT_TRUE(attnlab::use_blas_core(original));
  EXPECT_EQ(attnlab::blas_core(), original);
}
