// One pool of threads: OpenMP's, for attnlab's kernels and for the model's products alike
// (attnlab/model/blas.hpp's gemm shares a product over OpenMP's threads, OpenBLAS itself
// single-threaded). Work that runs several jobs side by side (a training batch split over
// the cores, the server's heavy requests) gives each job a share of the cores, so that
// jobs × threads per job ≤ cores and no job's threads wait, spinning, for cores another holds.
#pragma once

namespace attnlab {

// The cores this process may run on (its CPU affinity; at least 1).
int cores();

// The threads work started on this thread may use: the innermost ThreadBudget's, else
// OpenMP's default (OMP_NUM_THREADS, or the cores). The kernels, the products and the
// training's batch split take this many when not told otherwise.
int budget_threads();

// While it lives, the work started on the thread that made it (its OpenMP regions, and so
// its products and kernels) uses `threads` threads (at least 1); then what it was before.
class ThreadBudget {
 public:
  explicit ThreadBudget(int threads);
  ~ThreadBudget();
  ThreadBudget(const ThreadBudget&) = delete;
  ThreadBudget& operator=(const ThreadBudget&) = delete;

 private:
  int before_;
};

// OpenBLAS's own threads per call: 1 once the model layer has made a product.
int blas_threads();

}  // namespace attnlab
