// Which kernels OpenBLAS runs the model's linear layers with.
//
// OpenBLAS chooses its kernels when it loads, from the CPU's model number. Debian 12's
// OpenBLAS (0.3.21) does not know every CPU newer than it and then may fall back to
// "Prescott", SSE3 code: on a virtual "Intel Xeon Processor" with AVX-512 measured here,
// GPT-2 small's forward over 1024 tokens took 6.5 s on Prescott and 1.6-2.1 s on SkylakeX
// kernels. So before the first product (or the first blas_core()), wherever OpenBLAS chose
// kernels narrower than this CPU runs and the user has not chosen (OPENBLAS_CORETYPE), the
// library has OpenBLAS choose again, the fitting ones (use_blas_core): in the command, the
// server, a program linking the library and the Python module alike.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace attnlab {

// The kernels OpenBLAS runs, as it names them ("SkylakeX", "Haswell", "Prescott", ...).
std::string blas_core();

// Has OpenBLAS run `core`'s kernels from now on, as if OPENBLAS_CORETYPE had named it when
// it loaded: OpenBLAS's DYNAMIC_ARCH builds (Debian's among them) export the two steps that
// choose (gotoblas_dynamic_quit, gotoblas_dynamic_init), which read the variable, set only
// for the call. True if OpenBLAS then runs them; false where the build has no such steps or
// does not know the name. Not while a product runs.
bool use_blas_core(const std::string& core);

// The OPENBLAS_CORETYPE that fits this CPU when OpenBLAS fell back to generic code:
// "SkylakeX" with AVX-512, "Haswell" with AVX2; nullopt when OpenBLAS already runs fitting
// kernels or the user set OPENBLAS_CORETYPE themselves.
std::optional<std::string> blas_core_to_use();

// C[M × N] = beta · C + op(A) · op(B), row-major with rows lda, ldb and ldc apart, op
// transposing where asked: every product the model layer makes (the linear layers, the
// LM head, training's attention). OpenBLAS runs single-threaded, always: a product big enough
// to share is cut into blocks of C's columns (of its rows, when C is narrow), one OpenBLAS
// call per block, over this thread's OpenMP threads (its ThreadBudget, attnlab/model/
// threads.hpp). One pool of threads, OpenMP's, then runs the kernels and the products
// alike, and no pool spins while the other works (measured on 2 cores: GPT-2 small's
// 1024 × 768 × 2304 product ran at 226 GFLOP/s beside OpenBLAS's own spinning pool, 463
// with it idle). The first call sets OpenBLAS to one thread; threads its pool made when it
// loaded sleep once their spin timeout passes (the command starts with OPENBLAS_NUM_THREADS=1
// so that it makes none).
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc);
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const double* A, std::size_t lda,
          const double* B, std::size_t ldb, double beta, double* C, std::size_t ldc);

}  // namespace attnlab
