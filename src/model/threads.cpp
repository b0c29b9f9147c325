// The thread budget (attnlab/model/threads.hpp).
#include "attnlab/model/threads.hpp"

#include <cblas.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <mutex>
#include <set>

namespace attnlab {

namespace {
std::mutex blas_mutex;
std::multiset<int> live_budgets;  // each live ThreadBudget's threads
int blas_before = 1;              // OpenBLAS's setting before the first of them

// OpenBLAS's setting for the budgets alive now: the smallest, or what it was before them.
void settle_blas(const std::lock_guard<std::mutex>&) {
  const int wanted = live_budgets.empty() ? blas_before : *live_budgets.begin();
  if (openblas_get_num_threads() != wanted) openblas_set_num_threads(wanted);
}
}  // namespace

int cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, omp_get_num_procs());
}

int budget_threads() { return std::max(1, omp_get_max_threads()); }

ThreadBudget::ThreadBudget(int threads) : threads_(std::max(1, threads)), omp_before_(omp_get_max_threads()) {
  omp_set_num_threads(threads_);
  const std::lock_guard lock(blas_mutex);
  if (live_budgets.empty()) blas_before = openblas_get_num_threads();
  live_budgets.insert(threads_);
  settle_blas(lock);
}

ThreadBudget::~ThreadBudget() {
  omp_set_num_threads(omp_before_);
  const std::lock_guard lock(blas_mutex);
  live_budgets.erase(live_budgets.find(threads_));
  settle_blas(lock);
}

int blas_threads() {
  const std::lock_guard lock(blas_mutex);
  return openblas_get_num_threads();
}

}  // namespace attnlab
