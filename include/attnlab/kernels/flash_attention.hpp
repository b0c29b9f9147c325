// Fast attention: a tiled kernel with an online softmax that never builds the n×m grid
// (the FlashAttention idea), for many heads with grouped KV heads, on f32 or bf16.
//
// Same contract as the reference (include/attnlab/core/attention.hpp), on raw Q, K, V:
//   O_h = softmax(Q_h · K_g(h)ᵀ · scale / T, masked) · V_g(h),   g(h) = h / (H / H_kv)
// with every mask this kernel knows giving each query row a contiguous range of visible
// keys (causal, sliding window, both). Fully masked rows give a zero output.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "attnlab/core/attention.hpp"

namespace attnlab {

// The kernels a trace can be computed with, by the names every face uses: "reference"
// (core's attention: every intermediate kept) and "tiled" (the fast kernel: outputs only).
enum class KernelKind { reference, tiled };
std::string_view to_string(KernelKind kind);
// The kernel called `name`; InputError naming `field` (and the kernels) for any other name.
KernelKind kernel_named(std::string_view name, std::string_view field);
enum class Precision { f32, bf16 };

// Which SIMD code the kernels run, chosen at run time from what the CPU supports
// (avx512_bf16: AVX-512 with its BF16 and VNNI dot products).
enum class Isa { generic, avx2, avx512, avx512_bf16 };
Isa best_isa();

// The instruction set a kernel runs with: the one asked for (default: the widest), never
// beyond best_isa().
Isa usable_isa(std::optional<Isa> requested);
std::string to_string(Isa isa);

struct AttentionShape {
  std::size_t heads = 1;     // H query heads
  std::size_t kv_heads = 1;  // H_kv key/value heads; divides H
  std::size_t n = 1;         // queries per head
  std::size_t m = 1;         // keys per head
  std::size_t d_k = 64;      // query/key width
  std::size_t d_v = 64;      // value width
};

struct AttentionOptions {
  bool causal = false;                // query i (at position i + m - n) sees keys j <= i + m - n
  std::optional<std::size_t> window;  // and keys with |i + m - n - j| < w
  double temperature = 1.0;           // logits = q·k · scale / T
  std::optional<double> scale;        // default 1/√d_k
  Precision precision = Precision::f32;
  // Queries per tile (rounded up to a multiple of 16); 0: 288, or 96 with a causal mask or
  // window, where the tiles on the diagonal are partly hidden and smaller ones waste less.
  std::size_t block_q = 0;
  std::size_t block_k = 48;  // keys per tile
  int threads = 0;           // 0: all cores
  std::optional<Isa> isa;    // force an instruction set (tests); default best_isa()
};

// Where each operand's numbers lie: element (head h, row i, column t) of q at
// q[h·q_head + i·q_row + t], and likewise for k and v (by KV head) and out. The rows of one
// head are not always contiguous: a model's fused projection [n × (H + 2·H_kv)·d] holds every
// head of a token in one row (q_head = d, q_row = (H + 2·H_kv)·d), and a block's attention
// output [n × H·d_v] likewise; the kernel reads and writes them where they lie.
struct AttentionLayout {
  std::size_t q_head, q_row, k_head, k_row, v_head, v_row, out_head, out_row;
  // Each head's rows one after another: q [H][n][d_k], k [H_kv][m][d_k], v [H_kv][m][d_v],
  // out [H][n][d_v], all row-major.
  static AttentionLayout contiguous(const AttentionShape& shape);
};

// Tiled prefill, on the contiguous layout (above) or any other.
// Extra memory: a few tiles per thread, never O(n·m).
void flash_attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                     const AttentionOptions& options = {});
void flash_attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                     const AttentionLayout& layout, const AttentionOptions& options = {});

// The same computation through the reference kernel (double precision, the whole grid
// materialised per head): the oracle the tiled kernel is tested against, and the
// "materialised grid" peer in benchmarks.
void reference_attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                         const AttentionOptions& options = {});

// Runs whichever kernel `kind` names.
void run_attention_kernel(KernelKind kind, const float* q, const float* k, const float* v, float* out,
                          const AttentionShape& shape, const AttentionOptions& options = {});

// A layer's attention (include/attnlab/core/attention.hpp) through the tiled kernel: projections
// and outputs, but no score, logit or weight grids, which this kernel never builds. Key
// masks (hidden tokens) are refused with an InputError; causal, window and T are taken
// from the input, precision and tiles from `options`.
Trace attend_tiled(const AttentionInput& input, AttentionOptions options = {});

// FLOPs the FlashAttention papers count for a shape: 4·n·m·d per head (QKᵀ and P·V,
// with d the mean of d_k and d_v), halved when causal with n = m.
double attention_flops(const AttentionShape& shape, bool causal);

}  // namespace attnlab
