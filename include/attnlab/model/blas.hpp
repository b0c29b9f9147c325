// Which kernels run the model's linear layers: oneDNN's f32 ones, attnlab's own or OpenBLAS's
// (f32_products_kernels).
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
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attnlab/core/dtype.hpp"

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

// Whose kernels the f32 products below run. OpenBLAS chooses its kernels by the CPU's model,
// or by OPENBLAS_CORETYPE; attnlab's own (attnlab/kernels/gemm.hpp) use this CPU's widest
// vectors whatever OpenBLAS chose; oneDNN's (its f32 matmul, the library the bf16 products
// already use) choose theirs at run time by the CPU's instructions alone. Measured on 2
// Sapphire Rapids cores (bench --products), at GPT-2 small's and a 1.1B Llama's shapes:
// oneDNN's 66-75% of the f32 peak (70-75% at the 1.1B shapes), OpenBLAS's SkylakeX kernels
// 49-69%, attnlab's 57-72%, OpenBLAS's Haswell ones (OPENBLAS_CORETYPE=Haswell) 43-47%
// (docs/models.md has the table); and a 16-bit weight packed by
// attnlab's straight from its stored values beats widening it for OpenBLAS (a 1.1B model's F16
// prompt: 105-112 tokens/s against 90-96 on SkylakeX kernels, 75-78 on Haswell ones). So:
// - f32 weights: oneDNN's wherever it has a fast kernel (not its reference loops) and the CPU
//   AVX2 or AVX-512, for products of 2^20 multiply-adds and more; smaller ones, and every one
//   where oneDNN has none, on packed_f32_kernels();
// - 16-bit weights (gemm_16bit): attnlab's wherever the CPU has AVX2 or AVX-512;
// - ATTNLAB_GEMM=openblas, =attnlab or =onednn in the environment (or a UseF32Kernels) chooses
//   one for both, to compare them. A CPU with neither AVX2 nor AVX-512: OpenBLAS's. Doubles:
//   OpenBLAS's.
enum class F32Kernels { attnlab, openblas, onednn };
F32Kernels f32_kernels();  // an f32 weight's, on this thread, now
// Whether oneDNN has a fast f32 product here (its reference loops do not count).
bool onednn_f32_available();
// The packed kernels that take the f32 products oneDNN's do not: OpenBLAS's where its kernels
// are as wide as the CPU's vectors (AVX-512 ones on an AVX-512 CPU, AVX2 ones on an AVX2 CPU),
// attnlab's where they are narrower.
F32Kernels packed_f32_kernels();
// f32_kernels() in words, and gemm_16bit's where they differ: "attnlab's (AVX-512 with BF16)",
// "oneDNN's (brg:avx512_core), of 16-bit weights attnlab's (AVX-512 with BF16)", ...
std::string f32_products_kernels();

// While it lives, the f32 products started on the thread that made it run `kernels` (bench
// --products times each). std::logic_error for attnlab's where the CPU has neither AVX2 nor
// AVX-512, for oneDNN's where it has no fast f32 kernel here.
class UseF32Kernels {
 public:
  explicit UseF32Kernels(F32Kernels kernels);
  ~UseF32Kernels();
  UseF32Kernels(const UseF32Kernels&) = delete;
  UseF32Kernels& operator=(const UseF32Kernels&) = delete;

 private:
  std::optional<F32Kernels> before_;
};

// C[M × N] = beta · C + op(A) · op(B), row-major with rows lda, ldb and ldc apart, op
// transposing where asked: every product the model layer makes (the linear layers, the
// LM head, training's attention). oneDNN's kernels share OpenMP's threads themselves (one
// inside a parallel region). OpenBLAS runs single-threaded, always: a product big enough
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

// C[M × N] = beta · C + A · Bᵀ, A [M × K] in f32 and B [N × K] stored as f16 or bf16 (b_dtype),
// rows lda, ldb and ldc apart, B widened exactly to f32 as attnlab's f32 kernels pack it (no
// widened copy of the weight), shared over the threads as gemm's products are. False, C
// untouched, where those kernels are not to take 16-bit weights (ATTNLAB_GEMM=openblas, a
// UseF32Kernels asking for OpenBLAS's, a CPU with neither AVX2 nor AVX-512) or Bf16Products
// asks for bf16 products: the caller widens B and calls gemm.
bool gemm_16bit(std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda, const std::uint16_t* B,
                DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc);

// ---- bf16 products ----------------------------------------------------------------------
//
// A product whose operands are rounded to bf16 (8 significant bits, f32's range) and whose
// sums are kept in f32 runs on the CPU's bf16 units: AVX-512 BF16's dot products (vdpbf16ps,
// 32 multiply-adds an instruction, twice f32's 16), or AMX's tile multiplies where the CPU
// has them (a 16 × 32 by 32 × 16 tile in one instruction). oneDNN (Debian's libdnnl 2.6)
// makes these products and picks the unit at run time; it shares OpenMP's threads, so the
// one pool stays one. Each product is then within bf16's rounding of the operands, about
// 2^-9 of each term, of the f32 one: the numbers the lab shows change in their third digit,
// so the model's products use it only when asked (Bf16Products), never by default.

// Whether this CPU and oneDNN make bf16 products (AVX-512 BF16 or AMX; AVX-512 without BF16
// emulates them, slower than f32). Checked once.
bool bf16_products_available();

// InputError naming `field` where bf16_products_available() is false: the one refusal of
// every way in that asks for bf16 products (--bf16, TrainSettings::bf16, GenerateOptions::bf16).
void check_bf16_products(std::string_view field);

// `rows` rows of `width` f32 values, `ld` apart, rounded to bf16 (attnlab/core/dtype.hpp's
// f32_to_bf16) into out, rows `width` apart; the rows shared over OpenMP's threads when there
// are enough of them and this thread is not already in a parallel region.
void round_rows_to_bf16(const float* values, std::size_t rows, std::size_t width, std::size_t ld, std::uint16_t* out);

// What oneDNN runs them with: "avx512_core_amx" (AMX tiles), "avx512_core_bf16" (AVX-512
// dot products), ...; "none" where bf16_products_available() is false.
std::string bf16_products_isa();

// C[M × N] = beta · C + op(A) · op(B), as gemm above with A and B in bf16 (A stored [K × M]
// when ta, B [N × K] when tb; rows lda and ldb apart) and C in f32 (rows ldc apart); every
// sum in f32. Shared over this thread's OpenMP threads (one when called inside a parallel
// region). std::logic_error where bf16_products_available() is false.
void gemm_bf16(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const std::uint16_t* A, std::size_t lda,
               const std::uint16_t* B, std::size_t ldb, float beta, float* C, std::size_t ldc);

// While it lives, the model's products started on the thread that made it (attnlab/model/
// tensor.hpp's multiply: prompts, a whole forward, the unembedding; the f32 gemm above, as
// training makes its products; not generation's matrix-vector products, which read the
// weights as they are stored) round their operands to bf16 and run as gemm_bf16, where
// bf16_products_available(); elsewhere it changes nothing. The f32 gemm does so for products
// of 2^18 multiply-adds and more, where rounding the operands costs less than it saves.
class Bf16Products {
 public:
  explicit Bf16Products(bool on = true);
  ~Bf16Products();
  Bf16Products(const Bf16Products&) = delete;
  Bf16Products& operator=(const Bf16Products&) = delete;

 private:
  bool before_;
};

// True while a Bf16Products made on this thread asks for them and they are available.
bool bf16_products();

// The vendor's ceiling on the bf16 and int8 units, for bench --products: oneDNN's matmul
// C[M × N] = x[M × K] · W[K × N] with both operands already of the unit's types (bf16 and
// bf16, C f32; or x u8 and W s8, C s32) and W reordered into oneDNN's own blocked layout
// before any run: nothing to widen, unpack or pack. What a quantized or --bf16 prompt's
// products could reach here at the most, were their operands the units' own. Made once, run
// as often as timed, over this thread's OpenMP threads; the operands' values are arbitrary.
enum class UnitOperands { bf16, int8 };
class VendorProduct {
 public:
  // nullptr where oneDNN has no fast kernel for it here (only its reference loops, or none).
  static std::unique_ptr<VendorProduct> make(UnitOperands operands, std::size_t M, std::size_t N, std::size_t K);
  ~VendorProduct();
  VendorProduct(const VendorProduct&) = delete;
  VendorProduct& operator=(const VendorProduct&) = delete;

  const std::string& kernel() const;  // oneDNN's name for it: "brg:avx512_core_amx_int8", ...
  void run();

 private:
  struct Made;
  explicit VendorProduct(std::unique_ptr<Made> made);
  std::unique_ptr<Made> made_;
};

}  // namespace attnlab
