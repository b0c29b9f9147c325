// The thread budget (attnlab/model/threads.hpp) and the one pool: what a budget sets while
// it lives and leaves after, per thread; products shared over OpenMP's threads with OpenBLAS
// on one (attnlab/model/blas.hpp), equal to one OpenBLAS call; the held team
// (attnlab/kernels/team.hpp): every item shared once, the same products as without it.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/kernels/matvec.hpp"
#include "attnlab/kernels/team.hpp"
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

namespace {

// Shares [0, count) over `threads` and checks each item was run once, in runs inside it.
void expect_each_item_once(std::size_t count, int threads, const std::string& where) {
  std::vector<std::atomic<int>> runs_of(count);
  std::atomic<bool> runs_inside{true};
  attnlab::share_runs(count, threads, [&](std::size_t first, std::size_t end) {
    if (!(first < end && end <= count)) runs_inside = false;
    for (std::size_t i = first; i < end && i < count; ++i)
      runs_of[i].fetch_add(1);
  });
  EXPECT_TRUE(runs_inside) << where;
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_EQ(runs_of[i].load(), 1) << where << ": item " << i << " of " << count << ", " << threads << " threads";
}

// About `micros` microseconds of this thread's time.
void busy(int micros) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

TEST(Team, SharesEveryItemOnceHeldOrNot) {
  const ThreadBudget budget(2);
  for (std::size_t count : {0, 1, 2, 5, 64, 1000})
    for (int threads : {0, 1, 2, 3, 4})
      expect_each_item_once(count, threads, "not held");
  attnlab::hold_team([&] {
    EXPECT_TRUE(omp_in_parallel()) << "the step runs in the team's region";
    EXPECT_EQ(attnlab::sharing_threads(), 2) << "the held team: the budget's threads";
    EXPECT_EQ(attnlab::sharing_threads(4), 2) << "the held team, whatever is asked for";
    EXPECT_EQ(attnlab::sharing_threads(1), 1) << "one thread asked for: this one";
    for (int round = 0; round < 50; ++round)  // one team, share after share
      for (std::size_t count : {0, 1, 2, 5, 64, 1000})
        for (int threads : {0, 1, 3})
          expect_each_item_once(count, threads, "held");
    // Items that share again: each inner share runs on the item's own thread, whole.
    std::vector<std::atomic<int>> inner(8 * 100);
    attnlab::share_items(8, 0, [&](std::size_t outer) {
      attnlab::share_items(100, 0, [&](std::size_t i) { inner[outer * 100 + i].fetch_add(1); });
    });
    for (std::size_t i = 0; i < inner.size(); ++i)
      ASSERT_EQ(inner[i].load(), 1) << "inner item " << i;
  });
#pragma omp parallel num_threads(2)
  {
    EXPECT_EQ(attnlab::sharing_threads(), 1) << "inside another region: the calling thread alone";
    expect_each_item_once(100, 0, "inside a region");
  }
}

TEST(Team, HeldThreadsTakeItems) {
  const ThreadBudget budget(2);
  std::mutex lock;
  std::set<std::thread::id> takers;
  attnlab::hold_team([&] {
    attnlab::share_items(200, 0, [&](std::size_t) {
      busy(50);
      const std::lock_guard<std::mutex> hold(lock);
      takers.insert(std::this_thread::get_id());
    });
  });
  EXPECT_EQ(takers.size(), 2u) << "10 ms of items, and the held thread took none";
}

TEST(Team, AStepsExceptionComesOutAndTheTeamCanBeHeldAgain) {
  const ThreadBudget budget(2);
  EXPECT_THROW(attnlab::hold_team([] {
                 attnlab::share_items(10, 0, [](std::size_t) {});
                 throw std::runtime_error("the step failed");
               }),
               std::runtime_error);
  int steps = 0;
  attnlab::hold_team([&] {
    attnlab::hold_team([&] { ++steps; });  // held already: runs as it is
    ++steps;
  });
  EXPECT_EQ(steps, 2);
  {
    const ThreadBudget alone(1);
    attnlab::hold_team([&] {
      EXPECT_FALSE(omp_in_parallel()) << "a budget of one holds no team";
      EXPECT_EQ(attnlab::sharing_threads(), 1);
    });
  }
  // More threads than cores would spin waiting for each other's cores: no team, and the
  // shares open OpenMP's regions as they would without hold_team.
  const ThreadBudget more_than_cores(omp_get_num_procs() + 1);
  attnlab::hold_team([&] {
    EXPECT_FALSE(omp_in_parallel());
    EXPECT_EQ(attnlab::sharing_threads(), omp_get_num_procs() + 1);
    expect_each_item_once(1000, 0, "a budget above the cores");
  });
}

// The kernels take their pieces from the team inside hold_team; each piece's sums are the
// same whichever thread runs it, so the products are equal bit for bit: matvec_dot's to one
// thread's (a piece is whole outputs), matvec_axpy's to two threads' without a team (a piece is
// a run of the input rows, summed apart and added in thread order).
TEST(Team, ProductsInAHeldTeamAreTheProductsWithout) {
  attnlab::SplitMix64 rng(11);
  const std::size_t rows = 1200, width = 256, n = 2;  // 1.2 MB of f32: shared over threads
  std::vector<float> w(rows * width), x(n * width);
  for (auto* buffer : {&w, &x})
    for (float& v : *buffer)
      v = static_cast<float>(rng.normal());
  const attnlab::StoredRows stored{attnlab::RowFormat::f32, reinterpret_cast<const std::byte*>(w.data()), rows, width,
                                   width * sizeof(float)};
  const ThreadBudget budget(2);
  std::vector<float> alone(n * rows), held(n * rows), by_columns(n * width), by_columns_held(n * width);
  attnlab::matvec_dot(stored, x.data(), n, width, alone.data(), rows, 0.0f, {1});
  // The same weights as inputs: x'[n × rows] · w[rows × width].
  std::vector<float> x_rows(n * rows);
  for (float& v : x_rows)
    v = static_cast<float>(rng.normal());
  const attnlab::StoredRows as_inputs{attnlab::RowFormat::f32, reinterpret_cast<const std::byte*>(w.data()), rows,
                                      width, width * sizeof(float)};
  attnlab::matvec_axpy(as_inputs, x_rows.data(), n, rows, by_columns.data(), width, 0.0f, {2});
  attnlab::hold_team([&] {
    for (int round = 0; round < 20; ++round) {
      attnlab::matvec_dot(stored, x.data(), n, width, held.data(), rows, 0.0f);
      ASSERT_EQ(held, alone) << "round " << round;
      attnlab::matvec_axpy(as_inputs, x_rows.data(), n, rows, by_columns_held.data(), width, 0.0f);
      ASSERT_EQ(by_columns_held, by_columns) << "round " << round;
    }
  });
}
