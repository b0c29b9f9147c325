// Matrix–vector products for generation: a few rows of activations (one per new token) by a
// weight read where it lies, in its stored type, once.
//
// One new token multiplies a single row by every weight of the model, two FLOPs per weight
// read: the time is the time to read the weights. A general GEMM first packs the whole
// matrix into its own layout (for one row, that costs more than the product), so these
// kernels instead stream the stored rows and compute on them as they arrive: a 16-bit value
// is widened in a register, a quantized block (ggml's layouts, the ones GGUF files hold) is
// expanded in registers and its scale applied once per block, and nothing is written back.
// Where the CPU has AVX-512 VNNI (or, for Q4_K and Q5_K, AVX2) the quantized products are
// int8 dot products instead, the weights' small integers exact: Q8_0's, Q4_K's, Q5_K's and
// Q6_K's by x held as two int8 parts per 32 values (within 2^-15 of the 32's largest: a
// product within Σ max|x|/32512 · Σ|w| over the 32s of the exact one, 128 times finer than
// llama.cpp's 8-bit activations); matvec_tiles.cpp says how.
//
// A weight is either rows of outputs (an nn.Linear's [out, in], every GGUF tensor, the
// unembedding: y_c = x · row_c, a dot product per stored row) or rows of inputs (GPT-2's
// Conv1D [in, out], what training writes: y = Σ_i x_i · row_i, a scaled row added per input).
// The reference is widening the rows to f32 and multiplying (attnlab/model/tensor.hpp); the
// tests compare the two for every format, shape and edge.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

// The stored formats these kernels read in place: the float types, and ggml's Q8_0 (32 int8
// and an f16 scale), Q4_K, Q5_K and Q6_K (super-blocks of 256 values with 6- and 8-bit
// sub-block scales) that Q8_0, Q4_K_M and Q5_K_M files are mostly made of.
enum class RowFormat { f32, f16, bf16, q8_0, q4_k, q5_k, q6_k };
std::string_view to_string(RowFormat format);

// `count` stored rows of `length` values each, the first at `data`, `stride` bytes apart
// (a quantized row is a whole number of its blocks).
struct StoredRows {
  RowFormat format = RowFormat::f32;
  const std::byte* data = nullptr;
  std::size_t count = 0, length = 0, stride = 0;
};

// Options the products take: the threads (0: OpenMP's default), the instruction set
// (nullopt: the best this CPU has; a narrower one for tests and benchmarks), and whether
// int8_gemm may multiply on AMX's bf16 tiles (int8_gemm_tiles; false: VNNI's vectors only).
struct MatvecOptions {
  int threads = 0;
  std::optional<Isa> isa;
  bool tiles = true;
};

// Rows as outputs: for r < n and c < w.count,
//   y[r·ldy + c] = beta · y[r·ldy + c] + Σ_i x[r·ldx + i] · w_c[i]   (i < w.length)
// (beta = 0 ignores what y held). Any RowFormat.
void matvec_dot(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                float beta, const MatvecOptions& options = {});

// Several weights by the same x, their outputs side by side: part p's rows are y's columns
// from the sum of the earlier parts' counts on (a fused projection such as Q, K and V, or an
// MLP's gate and up, is one product: one pass over the threads, x prepared once). The parts
// may differ in format, not in length.
void matvec_dot(std::span<const StoredRows> parts, const float* x, std::size_t n, std::size_t ldx, float* y,
                std::size_t ldy, float beta, const MatvecOptions& options = {});

// Rows as inputs: for r < n and c < w.length,
//   y[r·ldy + c] = beta · y[r·ldy + c] + Σ_i x[r·ldx + i] · w_i[c]   (i < w.count)
// f32, f16 and bf16 only (a quantized row is a block of outputs, never an input's row).
void matvec_axpy(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                 float beta, const MatvecOptions& options = {});

// Many rows of x (a prompt) by rows of Q8_0, Q4_K, Q5_K or Q6_K, y as matvec_dot's, as int8 dot products
// where the CPU has AVX-512 VNNI (or on AMX's bf16 tiles where it has those: int8_gemm_tiles): x held per 32 values as
// s·(h + l/256), h and l int8 and s = max|x|/127 (each value within max|x|/32512, as Q4_K's generation holds it), the
// weights as the integers they are. So each 32's product is within max|x|/32512 · Σ|w| of the exact one, beside an f32
// loop's rounding. False, y untouched, where it does not apply (another format, no VNNI or options.isa another, a value
// of x not finite): the caller multiplies otherwise.
bool int8_gemm(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
               float beta, const MatvecOptions& options = {});

// Whether int8_gemm multiplies on AMX's bf16 tiles here (options.tiles left true): where the
// CPU has AMX-BF16, the kernel allows the tiles, and ATTNLAB_AMX is not "off". There x and
// each weight w = a·q − c are split into two bf16 parts, v = v_hi + v_lo with
// |v − v_hi − v_lo| ≤ 2^-18 |v|, and each product is x_hi·w_hi + x_hi·w_lo + x_lo·w_hi summed in
// f32: within 3 · 2^-18 |x·w| of the exact product, inside the int8 parts' bound (values, of x
// or the weights, below 2^-117 in size lose their low part, and below 2^-126 count as 0: the
// tiles flush them).
// It refuses values beyond 3·10^38 (their bf16 would overflow) as it does infinities.
bool int8_gemm_tiles();

// The formats int8_gemm multiplies (where the CPU has VNNI): Q8_0 and the K-quants.
inline constexpr bool int8_gemm_takes(RowFormat format) {
  return format == RowFormat::q8_0 || format == RowFormat::q4_k || format == RowFormat::q5_k ||
         format == RowFormat::q6_k;
}

// How many rows of activations these kernels take at once: past it a GEMM, which reuses
// each weight it loads for many rows, is faster.
inline constexpr std::size_t kMatvecMaxRows = 4;

// ggml's K-quant sub-block scales: the j-th (scale, min) pair of the 8, 6 bits each, packed
// into 12 bytes: pairs 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); pairs 4-7
// in bytes 8-11's nibbles, their top two bits in the top bits of bytes 0-3 (scales) and 4-7
// (mins). (Q4_K's and Q5_K's; the model's dequantization reads them with this too.)
inline void k_scale_and_min(const std::uint8_t* q, std::size_t j, float& scale, float& min) {
  if (j < 4) {
    scale = float(q[j] & 63), min = float(q[j + 4] & 63);
  } else {
    scale = float((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    min = float((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace attnlab
