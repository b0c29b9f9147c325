// Chooses the kernel and the instruction set at run time, and wraps the reference kernel
// (src/core/attention.cpp) for raw Q, K, V so the two can be compared and timed alike.
#include <fmt/format.h>
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/kernels/peak.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

std::string_view to_string(KernelKind kind) { return kind == KernelKind::tiled ? "tiled" : "reference"; }

KernelKind kernel_named(std::string_view name, std::string_view field) {
  for (const KernelKind kind : {KernelKind::reference, KernelKind::tiled})
    if (name == to_string(kind)) return kind;
  fail(field, fmt::format("\"{}\" is not a kernel; use reference (every intermediate) or tiled (outputs only)", name));
}

double core_clock_ghz(int threads, long iterations) {
#if defined(__x86_64__)
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    // (A register's 1, not an immediate one: newer cores fold chains of adds of a constant
    // before they execute, three and more a cycle.)
    std::uint64_t x = 0, one = 1;
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i)  // (the loop's own counting runs beside the chain)
      __asm__ volatile(
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
          "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
          : "+r"(x)
          : "r"(one));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    total += x == 8 * std::uint64_t(iterations) && seconds > 0 ? double(x) / seconds / 1e9 : 0.0;
  }
  return total / threads;
#else
  (void)threads, (void)iterations;
  return 0;
#endif
}

Isa best_isa() {
  // ATTNLAB_ISA=generic|avx2|avx512 forces a narrower path (never a wider one).
  __builtin_cpu_init();
  Isa best = Isa::generic;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::avx2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    best = Isa::avx512;
  // Every CPU with AVX-512 BF16 (Cooper Lake, Sapphire Rapids on, Zen 4 on) has VNNI too;
  // the tier uses both (bf16 and int8 dot products).
  if (best == Isa::avx512 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni"))
    best = Isa::avx512_bf16;
  if (const char* forced = std::getenv("ATTNLAB_ISA")) {
    const std::string f = forced;
    const Isa want = f == "generic" ? Isa::generic : f == "avx2" ? Isa::avx2 : f == "avx512" ? Isa::avx512 : best;
    if (static_cast<int>(want) < static_cast<int>(best)) best = want;
  }
  return best;
}

std::string to_string(Isa isa) {
  switch (isa) {
    case Isa::generic: return "generic x86-64";
    case Isa::avx2: return "AVX2+FMA";
    case Isa::avx512: return "AVX-512";
    case Isa::avx512_bf16: return "AVX-512 with BF16";
  }
  return "?";
}

Isa usable_isa(std::optional<Isa> requested) { return std::min(requested.value_or(Isa::avx512_bf16), best_isa()); }

AttentionLayout AttentionLayout::contiguous(const AttentionShape& shape) {
  return {.q_head = shape.n * shape.d_k,
          .q_row = shape.d_k,
          .k_head = shape.m * shape.d_k,
          .k_row = shape.d_k,
          .v_head = shape.m * shape.d_v,
          .v_row = shape.d_v,
          .out_head = shape.n * shape.d_v,
          .out_row = shape.d_v};
}

void flash_attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                     const AttentionOptions& options) {
  flash_attention(q, k, v, out, shape, AttentionLayout::contiguous(shape), options);
}

void flash_attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                     const AttentionLayout& layout, const AttentionOptions& options) {
  assert(shape.kv_heads > 0 && shape.heads % shape.kv_heads == 0);
  assert(options.temperature > 0);
  AttentionOptions resolved = options;
  resolved.isa = usable_isa(options.isa);
  const bool bf16 = options.precision == Precision::bf16;
  switch (*resolved.isa) {
    case Isa::generic:
      return bf16 ? kernels::generic::flash_attention_bf16(q, k, v, out, shape, layout, resolved)
                  : kernels::generic::flash_attention_f32(q, k, v, out, shape, layout, resolved);
    case Isa::avx2:
      return bf16 ? kernels::avx2::flash_attention_bf16(q, k, v, out, shape, layout, resolved)
                  : kernels::avx2::flash_attention_f32(q, k, v, out, shape, layout, resolved);
    case Isa::avx512:
    case Isa::avx512_bf16:
      return bf16 ? kernels::avx512::flash_attention_bf16(q, k, v, out, shape, layout, resolved)
                  : kernels::avx512::flash_attention_f32(q, k, v, out, shape, layout, resolved);
  }
}

void reference_attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& shape,
                         const AttentionOptions& options) {
  // Each head as the reference sees it: inputs X = [Q | 0] and S = [K | V], with W_Q, W_K
  // and W_V picking the Q, K and V columns, so the projections are exact copies.
  const std::size_t n = shape.n, m = shape.m, d_k = shape.d_k, d_v = shape.d_v, d_in = d_k + d_v;
  const std::size_t group = shape.heads / shape.kv_heads;
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(d_k)));
  for (std::size_t h = 0; h < shape.heads; ++h) {
    const std::size_t g = h / group;
    AttentionInput input;
    input.queries_from = Matrix(n, d_in);
    input.keys_from = Matrix(m, d_in);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t t = 0; t < d_k; ++t)
        input.queries_from(i, t) = q[(h * n + i) * d_k + t];
    for (std::size_t j = 0; j < m; ++j) {
      for (std::size_t t = 0; t < d_k; ++t)
        input.keys_from(j, t) = k[(g * m + j) * d_k + t];
      for (std::size_t t = 0; t < d_v; ++t)
        input.keys_from(j, d_k + t) = v[(g * m + j) * d_v + t];
    }
    HeadWeights w{"h", Matrix(d_in, d_k), Matrix(d_in, d_k), Matrix(d_in, d_v)};
    for (std::size_t t = 0; t < d_k; ++t)
      w.w_q(t, t) = w.w_k(t, t) = 1.0;
    for (std::size_t t = 0; t < d_v; ++t)
      w.w_v(d_k + t, t) = 1.0;
    input.mask.causal = options.causal;
    input.mask.window = options.window;
    // The reference divides by √d_k and by T; a custom scale is folded into T.
    input.temperature = options.temperature / (scale * std::sqrt(static_cast<double>(d_k)));
    const HeadTrace trace = attend_head(input, w);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t t = 0; t < d_v; ++t)
        out[(h * n + i) * d_v + t] = static_cast<float>(trace.output(i, t));
  }
}

void run_attention_kernel(KernelKind kind, const float* q, const float* k, const float* v, float* out,
                          const AttentionShape& shape, const AttentionOptions& options) {
  if (kind == KernelKind::reference)
    reference_attention(q, k, v, out, shape, options);
  else
    flash_attention(q, k, v, out, shape, options);
}

double attention_flops(const AttentionShape& shape, bool causal) {
  const double per_head = 2.0 * shape.n * shape.m * (shape.d_k + shape.d_v);
  return shape.heads * per_head * (causal && shape.n == shape.m ? 0.5 : 1.0);
}

// ---- the machine's peaks, each measured with the vectors of the ISA asked for ------------

double fma_peak_gflops(Isa isa, int threads, long iterations) {
  switch (isa) {
    case Isa::generic: return kernels::generic::fma_peak_gflops(threads, iterations);
    case Isa::avx2: return kernels::avx2::fma_peak_gflops(threads, iterations);
    default: return kernels::avx512::fma_peak_gflops(threads, iterations);
  }
}

double bf16_peak_gflops(int threads, long iterations) {
  return best_isa() == Isa::avx512_bf16 ? kernels::avx512::bf16_peak_gflops(threads, iterations) : 0;
}

double int8_peak_gops(int threads, long iterations) {
  return best_isa() == Isa::avx512_bf16 ? kernels::avx512::int8_peak_gops(threads, iterations) : 0;
}

double read_bandwidth_gbps(Isa isa, int threads, const float* data, std::size_t count, int passes) {
  switch (isa) {
    case Isa::generic: return kernels::generic::read_bandwidth_gbps(threads, data, count, passes);
    case Isa::avx2: return kernels::avx2::read_bandwidth_gbps(threads, data, count, passes);
    default: return kernels::avx512::read_bandwidth_gbps(threads, data, count, passes);
  }
}

double stream_read_seconds(Isa isa, int threads, std::span<const ByteRange> ranges) {
  constexpr std::size_t kPiece = 64 << 10;
  std::vector<ByteRange> pieces;
  for (const ByteRange& r : ranges)
    for (std::size_t at = 0; at < r.bytes; at += kPiece)
      pieces.push_back({static_cast<const char*>(r.data) + at, std::min(kPiece, r.bytes - at)});
  const auto read = [isa](const ByteRange& piece) {
    switch (isa) {
      case Isa::generic: return kernels::generic::read_bytes(piece.data, piece.bytes);
      case Isa::avx2: return kernels::avx2::read_bytes(piece.data, piece.bytes);
      default: return kernels::avx512::read_bytes(piece.data, piece.bytes);
    }
  };
  const ByteRange* piece_list = pieces.data();
  const auto start = std::chrono::steady_clock::now();
  float total = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(+ : total)
  for (std::size_t i = 0; i < pieces.size(); ++i)
    total += read(piece_list[i]);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float keep = total;
  (void)keep;
  return seconds;
}

}  // namespace attnlab
