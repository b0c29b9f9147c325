// The thread budget (attnlab/model/threads.hpp): what a budget sets while it lives, what it
// leaves after, and OpenBLAS's one setting while budgets on several threads overlap.
#include <gtest/gtest.h>
#include <omp.h>

#include <barrier>
#include <thread>

#include "attnlab/model/threads.hpp"

using attnlab::blas_threads;
using attnlab::budget_threads;
using attnlab::ThreadBudget;

TEST(ThreadBudget, SetsThisThreadsOpenMpAndOpenBlasThreadsAndRestoresBothNested) {
  const int omp_before = omp_get_max_threads(), blas_before = blas_threads();
  EXPECT_GE(attnlab::cores(), 1);
  {
    const ThreadBudget outer(3);
    EXPECT_EQ(budget_threads(), 3);
    EXPECT_EQ(blas_threads(), 3);
    int team = 0;
#pragma omp parallel
#pragma omp single
    team = omp_get_num_threads();
    EXPECT_EQ(team, 3) << "a region opened under the budget has its threads";
    {
      const ThreadBudget inner(1);
      EXPECT_EQ(budget_threads(), 1);
      EXPECT_EQ(blas_threads(), 1);
    }
    EXPECT_EQ(budget_threads(), 3);
    EXPECT_EQ(blas_threads(), 3);
  }
  EXPECT_EQ(omp_get_max_threads(), omp_before);
  EXPECT_EQ(blas_threads(), blas_before);
  const ThreadBudget none(0);
  EXPECT_EQ(budget_threads(), 1) << "a budget is at least one thread";
}

// Two jobs side by side, one on 4 threads and one on 1: each thread's OpenMP setting is its
// own; OpenBLAS's, the process's, is the smaller while both live and the other's after.
TEST(ThreadBudget, OverlappingBudgetsOnTwoThreadsLeaveOpenBlasTheSmallest) {
  const int blas_before = blas_threads();
  std::barrier both_live(2), checked(2), first_gone(2);
  int wide_sees = 0, narrow_sees = 0, blas_while_both = 0, blas_after_narrow = 0;
  std::thread wide([&] {
    const ThreadBudget b(4);
    both_live.arrive_and_wait();
    wide_sees = budget_threads();
    blas_while_both = blas_threads();
    checked.arrive_and_wait();
    first_gone.arrive_and_wait();  // the narrow budget has ended
    blas_after_narrow = blas_threads();
  });
  std::thread narrow([&] {
    {
      const ThreadBudget b(1);
      both_live.arrive_and_wait();
      narrow_sees = budget_threads();
      checked.arrive_and_wait();
    }
    first_gone.arrive_and_wait();
  });
  wide.join();
  narrow.join();
  EXPECT_EQ(wide_sees, 4);
  EXPECT_EQ(narrow_sees, 1);
  EXPECT_EQ(blas_while_both, 1);
  EXPECT_EQ(blas_after_narrow, 4);
  EXPECT_EQ(blas_threads(), blas_before);
}
