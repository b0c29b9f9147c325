// OpenBLAS's kernels (attnlab/model/blas.hpp).
#include "attnlab/model/blas.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <type_traits>

#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

namespace {

// Once, before the first product or question about the kernels: OpenBLAS on one thread (the
// products share OpenMP's, shared_gemm below) and on the kernels this CPU runs.
void prepare_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    // OpenBLAS's OpenMP builds set this thread's OpenMP threads too: keep them as they were.
    const int team = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(team);
    if (const std::optional<std::string> core = blas_core_to_use()) use_blas_core(*core);
  });
}

}  // namespace

std::string blas_core() {
  prepare_blas();
  return openblas_get_corename();
}

bool use_blas_core(const std::string& core) {
  using Step = void (*)();
  const auto quit = reinterpret_cast<Step>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Step>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (!quit || !init) return false;  // not a build that chooses its kernels when it starts
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> before = set ? std::optional<std::string>(set) : std::nullopt;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  quit();  // forgets the kernels chosen, so that init chooses again, by OPENBLAS_CORETYPE
  init();
  if (before)
    setenv("OPENBLAS_CORETYPE", before->c_str(), 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
  return strcasecmp(openblas_get_corename(), core.c_str()) == 0;
}

std::optional<std::string> blas_core_to_use() {
  if (std::getenv("OPENBLAS_CORETYPE")) return std::nullopt;  // the user's choice stands
  const std::string core = openblas_get_corename();
  const Isa isa = best_isa();
  const bool avx512 = isa == Isa::avx512 || isa == Isa::avx512_bf16;
  // Cores that use AVX-512 or AVX2 as well as this CPU can: nothing to change.
  for (std::string_view fitting : {"SkylakeX", "Cooperlake", "SapphireRapids", "Zen"})
    if (avx512 && core == fitting) return std::nullopt;
  for (std::string_view fitting : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"})
    if (!avx512 && isa == Isa::avx2 && core == fitting) return std::nullopt;
  if (avx512) return "SkylakeX";
  if (isa == Isa::avx2) return "Haswell";
  return std::nullopt;
}

namespace {

// Below this many multiply-adds a product runs on the calling thread: an OpenMP team costs
// microseconds to wake, a product of 2^20 about as long again on one core.
constexpr double kShareFrom = double(1 << 20);

template <class T>
void blas_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda, const T* B,
               std::size_t ldb, T beta, T* C, std::size_t ldc) {
  const auto t = [](bool transposed) { return transposed ? CblasTrans : CblasNoTrans; };
  const auto i = [](std::size_t x) { return static_cast<int>(x); };
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, t(ta), t(tb), i(M), i(N), i(K), 1.0f, A, i(lda), B, i(ldb), beta, C, i(ldc));
  else
    cblas_dgemm(CblasRowMajor, t(ta), t(tb), i(M), i(N), i(K), 1.0, A, i(lda), B, i(ldb), beta, C, i(ldc));
}

template <class T>
void shared_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda, const T* B,
                 std::size_t ldb, T beta, T* C, std::size_t ldc) {
  prepare_blas();
  const std::size_t threads = omp_in_parallel() ? 1 : std::size_t(std::max(1, omp_get_max_threads()));
  const bool by_columns = N >= 64 * threads, by_rows = !by_columns && M >= 8 * threads;
  if (threads == 1 || double(M) * double(N) * double(K) < kShareFrom || !(by_columns || by_rows)) {
    blas_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Block k of C's columns [k·w, (k+1)·w) needs B's same columns (rows, when B is
  // transposed); block k of C's rows, A's same rows (columns, when A is transposed).
  // Column blocks a multiple of 16 wide (whole vectors of C's rows); row blocks as they fall.
  const std::size_t whole = by_columns ? N : M, width = (whole + threads - 1) / threads,
                    step = by_columns ? (width + 15) / 16 * 16 : width;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast <int>(threads))
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(threads); ++k) {
    const std::size_t first = std::size_t(k) * step, count = first < whole ? std::min(step, whole - first) : 0;
    if (count == 0) continue;
    if (by_columns)
      blas_gemm(ta, tb, M, count, K, A, lda, tb ? B + first * ldb : B + first, ldb, beta, C + first, ldc);
    else
      blas_gemm(ta, tb, count, N, K, ta ? A + first : A + first * lda, lda, B, ldb, beta, C + first * ldc, ldc);
  }
}

}  // namespace

void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  shared_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const double* A, std::size_t lda,
          const double* B, std::size_t ldb, double beta, double* C, std::size_t ldc) {
  shared_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace attnlab
