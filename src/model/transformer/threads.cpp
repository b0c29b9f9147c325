// The thread budget (attnlab/model/threads.hpp).
#include "attnlab/model/threads.hpp"

#include <cblas.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>

namespace attnlab {

int cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, omp_get_num_procs());
}

int budget_threads() { return std::max(1, omp_get_max_threads()); }

ThreadBudget::ThreadBudget(int threads) : before_(omp_get_max_threads()) { omp_set_num_threads(std::max(1, threads)); }

ThreadBudget::~ThreadBudget() { omp_set_num_threads(before_); }

int blas_threads() { return openblas_get_num_threads(); }

}  // namespace attnlab
