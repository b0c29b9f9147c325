// One thread budget for the process's two pools: OpenMP's (attnlab's kernels, the MLP's
// activation) and OpenBLAS's (the linear layers' products). Work that runs several jobs
// side by side (a training batch split over the cores, the server's heavy requests) gives
// each job a share of the cores, so that jobs × threads per job ≤ cores and no pool's
// threads wait, spinning, for cores another pool holds.
#pragma once

namespace attnlab {

// The cores this process may run on (its CPU affinity; at least 1).
int cores();

// The threads work started on this thread may use: the innermost ThreadBudget's, else
// OpenMP's default (OMP_NUM_THREADS, or the cores). The kernels and the training's batch
// split take this many when not told otherwise.
int budget_threads();

// While it lives, the work started on the thread that made it uses `threads` threads:
// OpenMP regions it opens (this thread's OpenMP setting) and OpenBLAS's products. OpenBLAS
// has one setting for the whole process, so while several budgets live (on several
// threads) it takes the smallest of them: a budget of 1 (each of a training's workers)
// keeps every product on the thread that asked for it instead of queueing for OpenBLAS's
// pool. Both settings return to what they were when the budgets end.
class ThreadBudget {
 public:
  explicit ThreadBudget(int threads);
  ~ThreadBudget();
  ThreadBudget(const ThreadBudget&) = delete;
  ThreadBudget& operator=(const ThreadBudget&) = delete;

 private:
  int threads_, omp_before_;
};

// OpenBLAS's threads per product now (what the live budgets leave it).
int blas_threads();

}  // namespace attnlab
