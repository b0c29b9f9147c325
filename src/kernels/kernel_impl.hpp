// The per-instruction-set kernel entry points that dispatch.cpp chooses between.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/activation.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/kernels/matvec.hpp"

namespace attnlab::kernels {

// DecodeRun::out's rows are padded to a multiple of this many floats (a multiple of every
// instruction set's vector width, so each can write whole vectors).
constexpr std::size_t kDecodeRowPad = 16;

// One contiguous run of a KV cache, [first, end), for `count` queries of one KV head's
// group: the partial softmax state decode_split.cpp merges across runs.
struct DecodeRun {
  const void* keys = nullptr;    // the cache's keys for this KV head from row `first` on (storage dtype)
  const void* values = nullptr;  // its values from row `first` on
  DType dtype = DType::f32;
  std::size_t d = 0;               // head width
  const float* queries = nullptr;  // [count × d]
  std::size_t count = 0;
  float log2_scale = 0;                       // scale / T · log2 e: logits come out in log2 units
  const std::size_t* last_visible = nullptr;  // [count] each query's last visible key
  std::size_t first = 0, end = 0;
  float* max = nullptr;  // [count] out: the run's largest logit (log2 units), -inf if none
  float* sum = nullptr;  // [count] out: Σ 2^(logit - max)
  float* out = nullptr;  // [count × round_up(d, kDecodeRowPad)] out: Σ 2^(logit - max) · v
};

// What a quantized product reads of x besides x itself, made once for all the rows
// (matvec_prepare): Σ x over each 32 values [n × length/32] (Q4_K's and Q5_K's sub-blocks'
// offsets). Where the CPU has AVX2 (and not AVX-512), or AVX-512 BF16 and VNNI, also, for
// Q4_K and Q5_K rows, x as two int8 parts and a scale per 32 values, x ≈ s·(hi + lo/256)
// (k_rows_int8_lanes in matvec_tiles.cpp says how; within max|x|/32512 of the 32), hi8 and
// lo8 [n × length] (with AVX-512, each super-block's eight groups of 32 in the order 0, 2, 1,
// 3, 4, 6, 5, 7), s [n × length/32]; and, with AVX-512 BF16 and VNNI, for Q8_0 and Q6_K rows,
// the same parts in the values' own order, hi8_in_order and lo8_in_order [n × length], the
// same s, and 128·Σ(256·hi + lo) over each 4 values [n × length/4] (q8_0_rows_int8_lanes says
// why). None of the int8 parts where x holds a non-finite value: the f32 kernels take those.
struct PreparedRows {  // from one row of x on
  const float* sums32 = nullptr;
  const std::int8_t* hi8 = nullptr;  // the int8 parts; null without them
  const std::int8_t* lo8 = nullptr;
  const float* scale8 = nullptr;              // the int8 parts' scales, either order's
  const std::int8_t* hi8_in_order = nullptr;  // the int8 parts in their own order; null without them
  const std::int8_t* lo8_in_order = nullptr;
  const std::int32_t* offsets_in_order = nullptr;
};
struct PreparedX {
  std::size_t length = 0;
  std::vector<float> sums32, scale8;
  std::vector<std::int8_t> hi8, lo8, hi8_in_order, lo8_in_order;
  std::vector<std::int32_t> offsets_in_order;
  void clear() {  // nothing prepared; the vectors keep their memory for the next product
    length = 0;
    sums32.clear(), scale8.clear(), hi8.clear(), lo8.clear();
    hi8_in_order.clear(), lo8_in_order.clear(), offsets_in_order.clear();
  }
  PreparedRows from(std::size_t row) const {
    const auto at = [](const auto& v, std::size_t offset) { return v.empty() ? nullptr : v.data() + offset; };
    return {at(sums32, row * (length / 32)),         at(hi8, row * length),          at(lo8, row * length),
            at(scale8, row * (length / 32)),         at(hi8_in_order, row * length), at(lo8_in_order, row * length),
            at(offsets_in_order, row * (length / 4))};
  }
};

// Which of the formats whose products read a prepared x are among a product's weights (q4_k:
// Q4_K or Q5_K rows, whose products read x alike).
struct PreparedFormats {
  bool q4_k = false, q6_k = false, q8_0 = false;
};

}  // namespace attnlab::kernels

#define ATTNLAB_DECLARE_KERNELS(ns)                                                                                  \
  namespace attnlab::kernels::ns {                                                                                   \
  void flash_attention_f32(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,  \
                           const AttentionLayout& layout, const AttentionOptions& options);                          \
  /* bf16 operands, f32 accumulation: the CPU's bf16 dot product where options.isa is */                             \
  /* avx512_bf16 (and the build has it), else a portable step that computes the same. */                             \
  void flash_attention_bf16(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape, \
                            const AttentionLayout& layout, const AttentionOptions& options);                         \
  void decode_run(const DecodeRun& run);                                                                             \
  double fma_peak_gflops(int threads, long iterations);                                                              \
  double bf16_peak_gflops(int threads, long iterations);                                                             \
  double int8_peak_gops(int threads, long iterations);                                                               \
  double read_bandwidth_gbps(int threads, const float* data, std::size_t count, int passes);                         \
  float read_bytes(const void* data, std::size_t bytes);                                                             \
  /* matvec.hpp's products: over stored rows [first, last) as outputs (dot; prepared: what */                        \
  /* matvec_prepare made of x, for K-quant rows), or every stored row as an input (axpy) */                          \
  void matvec_dot_rows(const StoredRows& w, std::size_t first, std::size_t last, const float* x, std::size_t n,      \
                       std::size_t ldx, const PreparedX* prepared, float* y, std::size_t ldy, float beta);           \
  /* units: the product may use the CPU's integer units (AVX2, or AVX-512 BF16 and VNNI); the formats present */     \
  void matvec_prepare(const float* x, std::size_t n, std::size_t ldx, std::size_t length, bool units,                \
                      const PreparedFormats& formats, PreparedX& out);                                               \
  void matvec_axpy_rows(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y,               \
                        std::size_t ldy, float beta);                                                                \
  /* gemm.hpp's product on the calling thread (B stored as f32, f16 or bf16) */                                      \
  void gemm_f32(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, std::size_t lda,      \
                const void* B, DType b_dtype, std::size_t ldb, float beta, float* C, std::size_t ldc);               \
  /* activation.hpp's rows [first, last) */                                                                          \
  void activation_rows(ActivationKind f, const float* gate, const float* up, std::size_t ld_in, std::size_t first,   \
                       std::size_t last, std::size_t cols, float* out, std::size_t ld_out);                          \
  }

ATTNLAB_DECLARE_KERNELS(generic)
ATTNLAB_DECLARE_KERNELS(avx2)
ATTNLAB_DECLARE_KERNELS(avx512)

// The int8 products of quantized prompts (matvec.hpp's int8_gemm), in the AVX-512 build only
// and run only where the CPU has VNNI (Isa::avx512_bf16).
namespace attnlab::kernels::avx512 {
// n rows of x as int8 parts, each row's [length] values and [length / 32] scales and sums.
struct Int8Rows {
  const std::int8_t* hi = nullptr;
  const std::int8_t* lo = nullptr;
  const float* scale = nullptr;
  const float* sums = nullptr;  // Σ x as held over each factor group: 32 values, 16 for Q6_K (int8_factor_values)
  std::size_t length = 0;
};
// The values that share a weight factor in the int8 GEMM: a Q6_K scale's 16, every other's 32.
inline std::size_t int8_factor_values(RowFormat format) { return format == RowFormat::q6_k ? 16 : 32; }
// Whether a format's values are signed as ggml means them (Q8_0's int8, Q6_K's q − 32), with
// no offset c: the bf16 tiles take them so; VNNI's vpdpbusd needs one side unsigned.
inline bool int8_signed_values(RowFormat format) { return format == RowFormat::q8_0 || format == RowFormat::q6_k; }
// One row's parts, in its values' order: false, with nothing kept, where they cannot be made.
bool int8_row(const float* x, std::size_t length, std::int8_t* hi, std::int8_t* lo, float* scale, float* sums);
// y[i·ldy + (c − first)] = beta · y + Σ x_i · w_c for i < n, c in [first, last), at most 32
// rows (two panels) of Q8_0, Q4_K, Q5_K or Q6_K.
inline constexpr std::size_t kInt8GemmRows = 32;
void int8_gemm_panels(const StoredRows& w, std::size_t first, std::size_t last, const Int8Rows& x, std::size_t n,
                      float* y, std::size_t ldy, float beta);
// The same on AMX's bf16 tiles (x split as amx::split_row_bf16 makes it), for any number of
// rows [first, last): regrouped 32 at a time, then split (amx::bf16_weights) and multiplied.
void bf16_gemm_panels(const StoredRows& w, std::size_t first, std::size_t last, const std::uint16_t* x, std::size_t n,
                      float* y, std::size_t ldy, float beta);
}  // namespace attnlab::kernels::avx512

// The same products on AMX's bf16 tiles (amx_bf16.cpp), where amx_bf16_available() (peak.hpp).
namespace attnlab::kernels::amx {
// Rows of x a tile multiplies at once.
inline constexpr std::size_t kTileRows = 16;
// Two panels of weight rows as int8_gemm_panels regroups them: `q` [length / 4][2 panels][16
// rows][4 values], the factors `a` and `c` [length / values][2 panels][16 rows]; the values
// unsigned bytes with w = 256·a·q − c, or (`signed_values`: Q8_0's and Q6_K's) signed ones with
// w = 256·a·q (a is kept over 256 for the int8 sums).
struct Int8PanelsView {
  const std::uint8_t* q = nullptr;
  const float* a = nullptr;
  const float* c = nullptr;
  bool signed_values = false;
};
// x and the weights each as two bf16 parts (amx_bf16.cpp says why). Whether a row of x can be
// split: every value finite and below 3·10^38 in size (`length` a multiple of 16).
bool splittable(const float* x, std::size_t length);
// x's row `row` of `length` values (a multiple of 32) into `tiled`, [rows / 16][length / 32]
// [hi, lo][16][32] bf16.
void split_row_bf16(const float* x, std::size_t length, std::size_t row, std::uint16_t* tiled);
// Two regrouped panels' weights, split, as B tiles: [length / 32][2 panels][hi, lo][16][32]
// bf16 (a tile's row: two consecutive values of each of the panel's 16 rows).
void bf16_weights(const Int8PanelsView& p, std::size_t length, std::size_t values, std::uint16_t* b);
// y[i·ldy + c] = beta · y + Σ x_i · w_c for i < n, c < cols (≤ 32 · pairs), the weights
// `pairs` pairs of panels as bf16_weights makes each, one after the other; x's rows padded with
// zeros to a whole number of pairs of tiles (32). `acc`: room for [pairs][rows][32] floats,
// 64-byte aligned.
void bf16_tiles(const std::uint16_t* b, std::size_t pairs, const std::uint16_t* x, std::size_t n, std::size_t length,
                float* y, std::size_t ldy, std::size_t cols, float beta, float* acc);
}  // namespace attnlab::kernels::amx
