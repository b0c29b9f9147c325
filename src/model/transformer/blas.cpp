// OpenBLAS's kernels (attnlab/model/blas.hpp).
#include "attnlab/model/blas.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <omp.h>
#include <strings.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/kernels/gemm.hpp"
#include "attnlab/kernels/matvec.hpp"
#include "attnlab/kernels/peak.hpp"
#include "attnlab/kernels/team.hpp"

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

// oneDNN's f32 product (defined with its bf16 one below): the kernel it runs here
// ("brg:avx512_core", "gemm:jit", ...), nullopt where it has only its reference loops or the
// CPU has neither AVX2 nor AVX-512; and one product by it.
const std::optional<std::string>& onednn_f32_kernel();
void onednn_gemm(dnnl::memory::data_type type, bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K,
                 const void* A, std::size_t lda, const void* B, std::size_t ldb, float beta, float* C, std::size_t ldc);

// The kernels the environment asks for (ATTNLAB_GEMM=attnlab, openblas or onednn), read once;
// nullopt: f32_kernels' rule.
std::optional<F32Kernels> kernels_from_environment() {
  static const std::optional<F32Kernels> kernels = []() -> std::optional<F32Kernels> {
    const char* chosen = std::getenv("ATTNLAB_GEMM");
    if (!chosen) return std::nullopt;
    if (std::string_view(chosen) == "openblas") return F32Kernels::openblas;
    if (std::string_view(chosen) == "attnlab" && f32_gemm_vectorized()) return F32Kernels::attnlab;
    if (std::string_view(chosen) == "onednn" && onednn_f32_kernel()) return F32Kernels::onednn;
    return std::nullopt;
  }();
  return kernels;
}

// blas_kernels_fit's answer, kept (every f32 product asks) until use_blas_core has OpenBLAS
// choose again; -1: not known yet.
std::atomic<int> kernels_fit{-1};

// Whether OpenBLAS runs kernels as wide as this CPU's vectors: its AVX-512 ones on an AVX-512
// CPU, its AVX2 ones on an AVX2 CPU.
bool blas_kernels_fit() {
  int known = kernels_fit.load(std::memory_order_relaxed);
  if (known < 0) {
    const std::string core = blas_core();
    const Isa isa = best_isa();
    const auto among = [&](std::initializer_list<std::string_view> names) {
      return std::find(names.begin(), names.end(), core) != names.end();
    };
    known = (isa == Isa::avx512 || isa == Isa::avx512_bf16)
                ? among({"SkylakeX", "Cooperlake", "SapphireRapids"})
                : isa == Isa::avx2 && among({"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"});
    kernels_fit.store(known, std::memory_order_relaxed);
  }
  return known == 1;
}

// What a UseF32Kernels on this thread asks for, if any.
thread_local std::optional<F32Kernels> f32_kernels_asked;

}  // namespace

std::string blas_core() {
  prepare_blas();
  return openblas_get_corename();
}

bool onednn_f32_available() { return onednn_f32_kernel().has_value(); }

F32Kernels packed_f32_kernels() {
  return !f32_gemm_vectorized() || blas_kernels_fit() ? F32Kernels::openblas : F32Kernels::attnlab;
}

F32Kernels f32_kernels() {
  if (f32_kernels_asked) return *f32_kernels_asked;
  if (const std::optional<F32Kernels> chosen = kernels_from_environment()) return *chosen;
  return onednn_f32_kernel() ? F32Kernels::onednn : packed_f32_kernels();
}

namespace {

// Whether gemm_16bit multiplies (by attnlab's kernels) on this thread, now.
bool sixteen_bit_products_run() {
  const F32Kernels asked = f32_kernels_asked.value_or(kernels_from_environment().value_or(F32Kernels::attnlab));
  return asked == F32Kernels::attnlab && f32_gemm_vectorized() && !bf16_products();
}

}  // namespace

std::string f32_products_kernels() {
  const std::string ours = fmt::format("attnlab's ({})", to_string(best_isa()));
  const F32Kernels kernels = f32_kernels();
  const std::string f32 = kernels == F32Kernels::attnlab  ? ours
                          : kernels == F32Kernels::onednn ? fmt::format("oneDNN's ({})", *onednn_f32_kernel())
                                                          : fmt::format("OpenBLAS's ({})", blas_core());
  const std::string sixteen = sixteen_bit_products_run() ? ours : "widened for the f32 ones";
  return f32 == sixteen ? f32 : fmt::format("{}, of 16-bit weights {}", f32, sixteen);
}

UseF32Kernels::UseF32Kernels(F32Kernels kernels) : before_(f32_kernels_asked) {
  if (kernels == F32Kernels::attnlab && !f32_gemm_vectorized())
    throw std::logic_error("UseF32Kernels: attnlab's f32 kernels need AVX2 or AVX-512");
  if (kernels == F32Kernels::onednn && !onednn_f32_kernel())
    throw std::logic_error("UseF32Kernels: oneDNN has no fast f32 product on this CPU");
  f32_kernels_asked = kernels;
}

UseF32Kernels::~UseF32Kernels() { f32_kernels_asked = before_; }

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
  kernels_fit.store(-1, std::memory_order_relaxed);  // f32_kernels asks again
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

// Below this many multiply-adds an f32 product stays on the packed kernels even where oneDNN's
// are chosen: a call to oneDNN costs microseconds, and each new shape half a millisecond to
// make its kernel (a tiny model's products, training's attention).
constexpr double kOnednnFrom = double(1 << 20);

// One product on this thread, by `kernels` (f32; doubles are always OpenBLAS's).
template <class T>
void blas_gemm(F32Kernels kernels, bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A,
               std::size_t lda, const T* B, std::size_t ldb, T beta, T* C, std::size_t ldc) {
  const auto t = [](bool transposed) { return transposed ? CblasTrans : CblasNoTrans; };
  const auto i = [](std::size_t x) { return static_cast<int>(x); };
  if constexpr (std::is_same_v<T, float>) {
    if (kernels == F32Kernels::attnlab) return f32_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    cblas_sgemm(CblasRowMajor, t(ta), t(tb), i(M), i(N), i(K), 1.0f, A, i(lda), B, i(ldb), beta, C, i(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, t(ta), t(tb), i(M), i(N), i(K), 1.0, A, i(lda), B, i(ldb), beta, C, i(ldc));
  }
}

// Calls block(by_columns, first, count) for the blocks of C's columns (of its rows, when C is
// narrow) that this thread's OpenMP threads share, each on its thread; once with the whole of
// C on the calling thread where the product is small, the threads one, or this thread already
// in a parallel region.
template <class Block>
void share_product(std::size_t M, std::size_t N, std::size_t K, const Block& block) {
  prepare_blas();
  const std::size_t threads = omp_in_parallel() ? 1 : std::size_t(std::max(1, omp_get_max_threads()));
  const bool by_columns = N >= 64 * threads, by_rows = !by_columns && M >= 8 * threads;
  if (threads == 1 || double(M) * double(N) * double(K) < kShareFrom || !(by_columns || by_rows)) {
    block(true, 0, N);
    return;
  }
  // Column blocks a multiple of 16 wide (whole vectors of C's rows); row blocks as they fall.
  const std::size_t whole = by_columns ? N : M, width = (whole + threads - 1) / threads,
                    step = by_columns ? (width + 15) / 16 * 16 : width;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast <int>(threads))
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(threads); ++k) {
    const std::size_t first = std::size_t(k) * step, count = first < whole ? std::min(step, whole - first) : 0;
    if (count > 0) block(by_columns, first, count);
  }
}

template <class T>
void shared_gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, std::size_t lda, const T* B,
                 std::size_t ldb, T beta, T* C, std::size_t ldc) {
  // Block k of C's columns [k·w, (k+1)·w) needs B's same columns (rows, when B is
  // transposed); block k of C's rows, A's same rows (columns, when A is transposed).
  F32Kernels kernels = f32_kernels();  // this thread's choice, for the team's threads too
  if constexpr (std::is_same_v<T, float>)
    if (kernels == F32Kernels::onednn) {
      if (M > 0 && N > 0 && K > 0 && double(M) * double(N) * double(K) >= kOnednnFrom)
        return onednn_gemm(dnnl::memory::data_type::f32, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
      kernels = packed_f32_kernels();
    }
  share_product(M, N, K, [&](bool by_columns, std::size_t first, std::size_t count) {
    if (by_columns)
      blas_gemm(kernels, ta, tb, M, count, K, A, lda, tb ? B + first * ldb : B + first, ldb, beta, C + first, ldc);
    else
      blas_gemm(kernels, ta, tb, count, N, K, ta ? A + first : A + first * lda, lda, B, ldb, beta, C + first * ldc,
                ldc);
  });
}

}  // namespace

namespace {

// Products with fewer multiply-adds than this stay f32 under Bf16Products: rounding the
// operands (M·K + K·N values) would cost about what the bf16 units save.
constexpr double kBf16From = double(1 << 18);

}  // namespace

void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,
          const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  // Not for generation's few rows, nor inside a parallel region: a product shared over a
  // team's threads (tensor.cpp's widened blocks) would be bf16 on the thread that asked and
  // f32 on the others.
  if (bf16_products() && M > kMatvecMaxRows && !omp_in_parallel() && double(M) * double(N) * double(K) >= kBf16From) {
    // op(A) [M × K] is stored as ta ? K rows of M : M rows of K; op(B) [K × N] as tb ? N rows of K : K rows of N.
    thread_local std::vector<std::uint16_t> a_bf16, b_bf16;
    const std::size_t a_width = ta ? M : K, b_width = tb ? K : N;
    a_bf16.resize((ta ? K : M) * a_width);
    b_bf16.resize((tb ? N : K) * b_width);
    round_rows_to_bf16(A, ta ? K : M, a_width, lda, a_bf16.data());
    round_rows_to_bf16(B, tb ? N : K, b_width, ldb, b_bf16.data());
    gemm_bf16(ta, tb, M, N, K, a_bf16.data(), a_width, b_bf16.data(), b_width, beta, C, ldc);
    for (std::vector<std::uint16_t>* kept : {&a_bf16, &b_bf16})
      if (kept->size() > (1u << 21)) std::vector<std::uint16_t>().swap(*kept);  // a large one is given back
    return;
  }
  shared_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

bool gemm_16bit(std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda, const std::uint16_t* B,
                DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  if (!sixteen_bit_products_run()) return false;
  share_product(M, N, K, [&](bool by_columns, std::size_t first, std::size_t count) {
    if (by_columns)
      f32_gemm(false, true, M, count, K, A, lda, B + first * ldb, b_dtype, ldb, beta, C + first, ldc);
    else
      f32_gemm(false, true, count, N, K, A + first * lda, lda, B, b_dtype, ldb, beta, C + first * ldc, ldc);
  });
  return true;
}

void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const double* A, std::size_t lda,
          const double* B, std::size_t ldb, double beta, double* C, std::size_t ldc) {
  shared_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// ---- bf16 products (oneDNN) ----

namespace {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The operands' type, shape, layout and beta of one product and the threads it runs on:
// oneDNN makes a primitive per key (choosing and generating its kernel for that many threads,
// about half a millisecond), kept for the next call (onednn_product below).
using ProductKey = std::tuple<dnnl::memory::data_type, bool, bool, std::size_t, std::size_t, std::size_t, std::size_t,
                              std::size_t, std::size_t, float, int>;

dnnl::matmul::primitive_desc product_desc(const ProductKey& key) {
  using dnnl::memory;
  const auto [type, ta, tb, M, N, K, lda, ldb, ldc, beta, threads] = key;
  const auto dim = [](std::size_t x) { return static_cast<memory::dim>(x); };
  const memory::desc a({dim(M), dim(K)}, type, ta ? memory::dims{1, dim(lda)} : memory::dims{dim(lda), 1});
  const memory::desc b({dim(K), dim(N)}, type, tb ? memory::dims{1, dim(ldb)} : memory::dims{dim(ldb), 1});
  const memory::desc c({dim(M), dim(N)}, memory::data_type::f32, memory::dims{dim(ldc), 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);  // C = beta · C + A · B
    attr.set_post_ops(sum);
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
}

// One product's primitive, made once per key for the whole process (training's workers are
// new threads every step) and shared between threads: each call brings its own scratch
// space (scratchpad_mode::user), so that several threads may run one primitive at once.
struct OnednnProduct {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul product;
};

std::shared_ptr<const OnednnProduct> onednn_product(const ProductKey& key) {
  static std::mutex guard;
  static std::map<ProductKey, std::shared_ptr<const OnednnProduct>> made;
  const std::lock_guard<std::mutex> lock(guard);
  auto it = made.find(key);
  if (it == made.end()) {
    if (made.size() >= 256) made.clear();  // prompts of many lengths: start again (callers hold theirs)
    dnnl::matmul::primitive_desc desc = product_desc(key);
    dnnl::matmul product(desc);
    it = made.emplace(key, std::make_shared<const OnednnProduct>(OnednnProduct{std::move(desc), std::move(product)}))
             .first;
  }
  return it->second;
}

// C = beta · C + op(A) · op(B) by oneDNN, A and B of `type` (f32 or bf16), C f32: over this
// thread's OpenMP threads, or on the calling thread alone inside a parallel region (oneDNN
// would otherwise plan for OpenMP's team and run one share). M, N and K at least 1.
void onednn_gemm(dnnl::memory::data_type type, bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K,
                 const void* A, std::size_t lda, const void* B, std::size_t ldb, float beta, float* C,
                 std::size_t ldc) {
  const bool nested = omp_in_parallel();
  const int team = omp_get_max_threads();
  if (nested) omp_set_num_threads(1);
  struct Restore {
    bool nested;
    int team;
    ~Restore() {
      if (nested) omp_set_num_threads(team);
    }
  } restore{nested, team};
  const std::shared_ptr<const OnednnProduct> made =
      onednn_product({type, ta, tb, M, N, K, lda, ldb, ldc, beta, nested ? 1 : team});
  const dnnl::matmul::primitive_desc& pd = made->desc;
  // Scratch space of this call's own (the primitives are shared between threads).
  thread_local std::vector<std::byte> scratch;
  const std::size_t scratch_bytes = pd.scratchpad_desc().get_size();
  if (scratch.size() < scratch_bytes) scratch.resize(scratch_bytes);
  const dnnl::memory a(pd.src_desc(), cpu_engine(), const_cast<void*>(A));
  const dnnl::memory b(pd.weights_desc(), cpu_engine(), const_cast<void*>(B));
  const dnnl::memory c(pd.dst_desc(), cpu_engine(), C);
  const dnnl::memory pad(pd.scratchpad_desc(), cpu_engine(), scratch.data());
  dnnl::stream stream(cpu_engine());
  made->product.execute(stream,
                        {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, pad}});
  stream.wait();
}

// What oneDNN's bf16 product runs on here, or nullopt where it makes none (or only emulates
// one: an ISA without BF16 instructions, where f32 is faster).
const std::optional<std::string>& bf16_unit() {
  static const std::optional<std::string> unit = []() -> std::optional<std::string> {
    try {
      using dnnl::cpu_isa;
      (void)amx_bf16_available();  // asks the kernel for the tiles (where there are some) before oneDNN looks
      const cpu_isa isa = dnnl::get_effective_cpu_isa();
      if (isa != cpu_isa::avx512_core_bf16 && isa != cpu_isa::avx512_core_amx) return std::nullopt;
      (void)product_desc(
          {dnnl::memory::data_type::bf16, false, false, 32, 32, 32, 32, 32, 32, 0.0f, 1});  // it can make one
      return isa == cpu_isa::avx512_core_amx ? "avx512_core_amx" : "avx512_core_bf16";
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  }();
  return unit;
}

const std::optional<std::string>& onednn_f32_kernel() {
  static const std::optional<std::string> kernel = []() -> std::optional<std::string> {
    if (!f32_gemm_vectorized()) return std::nullopt;
    try {
      const std::string made =
          product_desc({dnnl::memory::data_type::f32, false, true, 256, 256, 256, 256, 256, 256, 0.0f, 1})
              .impl_info_str();
      if (made.rfind("ref", 0) == 0) return std::nullopt;  // oneDNN's reference loops: slower than ours
      return made;
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  }();
  return kernel;
}

thread_local bool bf16_products_asked = false;

}  // namespace

bool bf16_products_available() { return bf16_unit().has_value(); }

void check_bf16_products(std::string_view field) {
  if (!bf16_products_available())
    fail(field, "this CPU has no bf16 units that oneDNN multiplies with (AVX-512 BF16 or AMX tiles); leave it out");
}

void round_rows_to_bf16(const float* values, std::size_t rows, std::size_t width, std::size_t ld, std::uint16_t* out) {
  share_items(rows, rows * width >= (1 << 16) ? 0 : 1, [&](std::size_t r) {
    f32_to_bf16(std::span<const float>(values + r * ld, width), std::span<std::uint16_t>(out + r * width, width));
  });
}

std::string bf16_products_isa() { return bf16_unit().value_or("none"); }

void gemm_bf16(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const std::uint16_t* A, std::size_t lda,
               const std::uint16_t* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
  if (!bf16_products_available()) throw std::logic_error("gemm_bf16: this CPU makes no bf16 products");
  if (M == 0 || N == 0) return;
  if (K == 0) {  // no terms: C = beta · C, as the f32 product makes it
    f32_gemm(false, false, M, N, 0, nullptr, 1, static_cast<const float*>(nullptr), N, beta, C, ldc);
    return;
  }
  onednn_gemm(dnnl::memory::data_type::bf16, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// Every operand in memory oneDNN allocates itself (aligned to its liking: the packed weight
// in a std::vector, 16 bytes past a page, ran the AMX bf16 product at two thirds the speed).
struct VendorProduct::Made {
  dnnl::matmul product;
  std::string kernel;
  std::unordered_map<int, dnnl::memory> arguments;
};

std::unique_ptr<VendorProduct> VendorProduct::make(UnitOperands operands, std::size_t M, std::size_t N, std::size_t K) {
  using dnnl::memory;
  const bool bf16 = operands == UnitOperands::bf16;
  if (bf16 && !bf16_products_available()) return nullptr;
  (void)amx_bf16_available();  // asks the kernel for the tiles (where there are some) before oneDNN looks
  const auto dim = [](std::size_t x) { return static_cast<memory::dim>(x); };
  const memory::data_type x_type = bf16 ? memory::data_type::bf16 : memory::data_type::u8,
                          w_type = bf16 ? memory::data_type::bf16 : memory::data_type::s8,
                          c_type = bf16 ? memory::data_type::f32 : memory::data_type::s32;
  auto made = std::make_unique<Made>();
  try {
    const memory::desc x({dim(M), dim(K)}, x_type, memory::format_tag::ab);
    const memory::desc w_any({dim(K), dim(N)}, w_type, memory::format_tag::any);
    const memory::desc w_stored({dim(K), dim(N)}, w_type, memory::format_tag::ba);  // as a layer stores it, [N × K]
    const memory::desc c({dim(M), dim(N)}, c_type, memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc desc(dnnl::matmul::desc(x, w_any, c), attr, cpu_engine());
    made->kernel = desc.impl_info_str();
    if (made->kernel.rfind("ref", 0) == 0) return nullptr;
    made->product = dnnl::matmul(desc);
    // Operands of small values (bf16: 1 + i/128 for i < 128; int8: 0 to 15), a varied pattern.
    const auto fill = [&](memory& m, std::size_t count) {
      if (bf16) {
        auto* v = static_cast<std::uint16_t*>(m.get_data_handle());
        for (std::size_t i = 0; i < count; ++i)
          v[i] = std::uint16_t(0x3f80 + (i * 2654435761u >> 9) % 128);
      } else {
        auto* v = static_cast<std::uint8_t*>(m.get_data_handle());
        for (std::size_t i = 0; i < count; ++i)
          v[i] = std::uint8_t((i * 2654435761u >> 9) % 16);
      }
    };
    memory x_memory(x, cpu_engine()), stored(w_stored, cpu_engine()), packed(desc.weights_desc(), cpu_engine());
    fill(x_memory, M * K), fill(stored, K * N);
    dnnl::stream stream(cpu_engine());
    dnnl::reorder(stored, packed).execute(stream, stored, packed);
    stream.wait();
    made->arguments = {{DNNL_ARG_SRC, x_memory},
                       {DNNL_ARG_WEIGHTS, packed},
                       {DNNL_ARG_DST, memory(c, cpu_engine())},
                       {DNNL_ARG_SCRATCHPAD, memory(desc.scratchpad_desc(), cpu_engine())}};
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return std::unique_ptr<VendorProduct>(new VendorProduct(std::move(made)));
}

VendorProduct::VendorProduct(std::unique_ptr<Made> made) : made_(std::move(made)) {}
VendorProduct::~VendorProduct() = default;
const std::string& VendorProduct::kernel() const { return made_->kernel; }

void VendorProduct::run() {
  dnnl::stream stream(cpu_engine());
  made_->product.execute(stream, made_->arguments);
  stream.wait();
}

Bf16Products::Bf16Products(bool on) : before_(bf16_products_asked) { bf16_products_asked = on; }

Bf16Products::~Bf16Products() { bf16_products_asked = before_; }

bool bf16_products() { return bf16_products_asked && bf16_products_available(); }

}  // namespace attnlab
