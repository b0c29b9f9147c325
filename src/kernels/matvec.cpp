// The matrix–vector products' dispatch (attnlab/kernels/matvec.hpp): the shape checked,
// the K-quants' activations prepared once, the rows or columns split between threads, and
// each share run by the instruction set's kernel (matvec_tiles.cpp).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "attnlab/kernels/matvec.hpp"
#include "attnlab/kernels/peak.hpp"
#include "attnlab/kernels/team.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

namespace {

// Below this many bytes of weights a product runs on the calling thread: waking the others
// costs more than it saves (a toy model's matrices are a few KiB).
constexpr std::size_t kParallelBytes = 256 << 10;

// Threads take rows (or columns) in pieces of this many, so that a piece's share of the
// weight is whole cache lines and the pieces even out between threads.
constexpr std::size_t kPiece = 16;

// Rows of x int8_gemm splits for AMX's tiles at once (each 4 bytes a value).
constexpr std::size_t kTileChunk = 256;

std::size_t block_values(RowFormat f) {
  switch (f) {
    case RowFormat::q8_0: return 32;
    case RowFormat::q4_k:
    case RowFormat::q5_k:
    case RowFormat::q6_k: return 256;
    default: return 1;
  }
}

std::size_t block_bytes(RowFormat f) {
  switch (f) {
    case RowFormat::f32: return 4;
    case RowFormat::f16:
    case RowFormat::bf16: return 2;
    case RowFormat::q8_0: return 34;
    case RowFormat::q4_k: return 144;
    case RowFormat::q5_k: return 176;
    case RowFormat::q6_k: return 210;
  }
  return 0;
}

void check(const StoredRows& w, std::size_t n, std::size_t ldx, std::size_t ldy, std::size_t x_width,
           std::size_t y_width, const char* who) {
  if (w.length % block_values(w.format) != 0 || w.stride < w.length / block_values(w.format) * block_bytes(w.format))
    throw std::logic_error(std::string(who) + ": the rows are not whole blocks of their format, or overlap");
  if (n > 0 && (ldx < x_width || ldy < y_width))
    throw std::logic_error(std::string(who) + ": a row stride is too short");
}

}  // namespace

bool int8_gemm_tiles() {
  static const bool allowed = [] {
    const char* setting = std::getenv("ATTNLAB_AMX");
    return amx_bf16_available() && !(setting && std::string_view(setting) == "off");
  }();
  return allowed;
}

namespace {

int threads_for(std::size_t bytes, const MatvecOptions& options) {
  return bytes < kParallelBytes ? 1 : sharing_threads(options.threads);
}

// Thread t's share of [0, total) when `threads` threads split it in kPiece-sized pieces.
std::pair<std::size_t, std::size_t> share(std::size_t total, int threads, int t) {
  const std::size_t pieces = (total + kPiece - 1) / kPiece;
  const std::size_t per_thread = (pieces + std::size_t(threads) - 1) / std::size_t(threads);
  return {std::min(total, std::size_t(t) * per_thread * kPiece),
          std::min(total, std::size_t(t + 1) * per_thread * kPiece)};
}

}  // namespace

std::string_view to_string(RowFormat format) {
  switch (format) {
    case RowFormat::f32: return "f32";
    case RowFormat::f16: return "f16";
    case RowFormat::bf16: return "bf16";
    case RowFormat::q8_0: return "Q8_0";
    case RowFormat::q4_k: return "Q4_K";
    case RowFormat::q5_k: return "Q5_K";
    case RowFormat::q6_k: return "Q6_K";
  }
  return "?";
}

void matvec_dot(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                float beta, const MatvecOptions& options) {
  matvec_dot(std::span<const StoredRows>(&w, 1), x, n, ldx, y, ldy, beta, options);
}

void matvec_dot(std::span<const StoredRows> parts, const float* x, std::size_t n, std::size_t ldx, float* y,
                std::size_t ldy, float beta, const MatvecOptions& options) {
  if (parts.empty()) return;
  std::size_t columns = 0, bytes = 0;
  kernels::PreparedFormats formats;
  for (const StoredRows& w : parts) {
    if (w.length != parts[0].length) throw std::logic_error("matvec_dot: the parts' rows differ in length");
    columns += w.count, bytes += w.count * w.stride;
    formats.q4_k |= w.format == RowFormat::q4_k || w.format == RowFormat::q5_k;  // x prepared alike
    formats.q6_k |= w.format == RowFormat::q6_k;
    formats.q8_0 |= w.format == RowFormat::q8_0;
  }
  for (const StoredRows& w : parts)
    check(w, n, ldx, ldy, w.length, columns, "matvec_dot");
  if (n == 0 || columns == 0) return;
  const Isa isa = usable_isa(options.isa);
  // K-quants: what the kernels read of x besides x, made once for all the rows (in vectors
  // the calling thread keeps: generation makes ~50 products a token, and allocating them each
  // time was a tenth of a small product's time).
  thread_local kernels::PreparedX kept;
  kernels::PreparedX& prepared = kept;  // the calling thread's, named so the team's threads read it
  prepared.clear();
  if (formats.q4_k || ((formats.q6_k || formats.q8_0) && isa == Isa::avx512_bf16)) switch (isa) {
      case Isa::generic: kernels::generic::matvec_prepare(x, n, ldx, parts[0].length, false, formats, prepared); break;
      case Isa::avx2: kernels::avx2::matvec_prepare(x, n, ldx, parts[0].length, true, formats, prepared); break;
      case Isa::avx512:
      case Isa::avx512_bf16:
        kernels::avx512::matvec_prepare(x, n, ldx, parts[0].length, isa == Isa::avx512_bf16, formats, prepared);
        break;
    }
  // The rows in pieces of kPiece, in order over the parts, shared in runs (team.hpp): a
  // thread takes a run of pieces in a row (its reads one stream), smaller as less is left,
  // so that a thread that starts late or runs slow (its core shared with something else) is
  // waited for less at the end than with equal shares.
  struct Piece {
    const StoredRows* w;
    std::size_t first, last, column;
  };
  thread_local std::vector<Piece> kept_pieces;  // (kept for the same reason as the prepared x)
  std::vector<Piece>& pieces = kept_pieces;
  pieces.clear();
  std::size_t column = 0;  // the part's first column of y
  for (const StoredRows& w : parts) {
    for (std::size_t first = 0; first < w.count; first += kPiece)
      pieces.push_back({&w, first, std::min(w.count, first + kPiece), column});
    column += w.count;
  }
  const auto run = [&](const Piece& p) {
    float* yw = y + p.column;
    switch (isa) {
      case Isa::generic:
        return kernels::generic::matvec_dot_rows(*p.w, p.first, p.last, x, n, ldx, &prepared, yw, ldy, beta);
      case Isa::avx2: return kernels::avx2::matvec_dot_rows(*p.w, p.first, p.last, x, n, ldx, &prepared, yw, ldy, beta);
      case Isa::avx512:
      case Isa::avx512_bf16:
        return kernels::avx512::matvec_dot_rows(*p.w, p.first, p.last, x, n, ldx, &prepared, yw, ldy, beta);
    }
  };
  share_items(pieces.size(), threads_for(bytes, options), [&](std::size_t i) { run(pieces[i]); });
}

namespace {

// int8_gemm on AMX's bf16 tiles (int8_gemm_tiles): x checked, then split and multiplied 256
// rows at a time. False, y untouched, where a value of x cannot be split.
bool products_on_tiles(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                       float beta, int threads) {
  const std::size_t length = w.length;
  std::atomic<bool> made{true};
  // Each thread a run of weight rows at a time, whole pairs of panels: x's slices read once
  // for up to 8 pairs, their split weights at most 2 MiB a thread (FFN-wide rows take fewer).
  const std::size_t per_thread = (w.count + threads - 1) / threads, pair_bytes = length * 32 * 2 * 2;
  const std::size_t most = std::clamp<std::size_t>((std::size_t(2) << 20) / pair_bytes, 1, 8) * 32;
  const std::size_t step = std::clamp<std::size_t>((per_thread + 31) / 32 * 32, 32, most);
  // x checked whole first, so that a refusal leaves y untouched.
  share_items(n, threads, [&](std::size_t i) {
    if (!kernels::amx::splittable(x + i * ldx, length)) made.store(false, std::memory_order_relaxed);
  });
  if (!made) return false;
  // x split into bf16 parts in the tiles' order, 256 rows at a time (rows of zeros to a whole
  // pair of tiles): a long prompt's split is not held whole.
  thread_local std::vector<std::uint16_t> kept_split;
  std::vector<std::uint16_t>& split = kept_split;  // (this thread's, named: the lambdas run on others)
  for (std::size_t i0 = 0; i0 < n; i0 += kTileChunk) {
    const std::size_t rows = std::min(kTileChunk, n - i0), padded = (rows + 31) / 32 * 32;
    split.assign(padded * length * 2 + 32, 0);
    std::uint16_t* const tiled = reinterpret_cast<std::uint16_t*>(
        (reinterpret_cast<std::uintptr_t>(split.data()) + 63) & ~std::uintptr_t(63));  // (whole cache lines)
    share_items(rows, threads,
                [&](std::size_t i) { kernels::amx::split_row_bf16(x + (i0 + i) * ldx, length, i, tiled); });
    share_items((w.count + step - 1) / step, threads, [&](std::size_t k) {
      const std::size_t first = k * step, last = std::min(w.count, first + step);
      kernels::avx512::bf16_gemm_panels(w, first, last, tiled, rows, y + i0 * ldy + first, ldy, beta);
    });
  }
  return true;
}

}  // namespace

bool int8_gemm(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
               float beta, const MatvecOptions& options) {
  if (!int8_gemm_takes(w.format)) return false;
  check(w, n, ldx, ldy, w.length, w.count, "int8_gemm");
  if (usable_isa(options.isa) != Isa::avx512_bf16) return false;  // the tier that has VNNI
  if (n == 0 || w.count == 0) return true;
  const std::size_t length = w.length;
  const int threads = threads_for(n * length * sizeof(float) + w.count * w.stride, options);
  if (options.tiles && int8_gemm_tiles()) return products_on_tiles(w, x, n, ldx, y, ldy, beta, threads);
  // x's int8 parts, its rows shared over the threads: [n × length] and [n × length / 32].
  const std::size_t groups = length / 32;
  // (Kept by the calling thread, as the prepared x is: a prompt makes them for every matrix.)
  thread_local std::vector<std::int8_t> kept_hi, kept_lo;
  thread_local std::vector<float> kept_scale, kept_sums;
  std::vector<std::int8_t>&hi = kept_hi, &lo = kept_lo;
  std::vector<float>&scale = kept_scale, &sums = kept_sums;
  hi.resize(n * length), lo.resize(n * length), scale.resize(n * groups), sums.resize(n * groups);
  std::atomic<bool> made{true};
  share_items(n, threads, [&](std::size_t i) {
    if (!kernels::avx512::int8_row(x + i * ldx, length, &hi[i * length], &lo[i * length], &scale[i * groups],
                                   &sums[i * groups]))
      made.store(false, std::memory_order_relaxed);
  });
  if (!made) return false;
  // Q6_K's factors are a 16 values': Σ x as held over each 16 instead, s·Σ(h + l/256).
  if (const std::size_t values = kernels::avx512::int8_factor_values(w.format); values != 32) {
    const std::size_t factors = length / values;
    sums.resize(n * factors);
    share_items(n, threads, [&](std::size_t i) {
      for (std::size_t f = 0; f < factors; ++f) {
        std::int32_t held = 0;  // 256·Σ h + Σ l, exact
        for (std::size_t v = f * values; v < (f + 1) * values; ++v)
          held += 256 * hi[i * length + v] + lo[i * length + v];
        sums[i * factors + f] = scale[i * groups + f * values / 32] * float(held) / 256;
      }
    });
  }
  // The weight rows 32 at a time (two panels), over the threads.
  const kernels::avx512::Int8Rows parts{hi.data(), lo.data(), scale.data(), sums.data(), length};
  const std::size_t step = kernels::avx512::kInt8GemmRows;
  share_items((w.count + step - 1) / step, threads, [&](std::size_t k) {
    const std::size_t first = k * step, last = std::min(w.count, first + step);
    kernels::avx512::int8_gemm_panels(w, first, last, parts, n, y + first, ldy, beta);
  });
  return true;
}

void matvec_axpy(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                 float beta, const MatvecOptions& options) {
  if (block_values(w.format) != 1)
    throw std::logic_error("matvec_axpy: a quantized format's rows are outputs; use matvec_dot");
  check(w, n, ldx, ldy, w.count, w.length, "matvec_axpy");
  if (n == 0 || w.length == 0) return;
  const Isa isa = usable_isa(options.isa);
  const auto run = [isa](const StoredRows& rows, const float* x, std::size_t n, std::size_t ldx, float* y,
                         std::size_t ldy, float beta) {
    switch (isa) {
      case Isa::generic: return kernels::generic::matvec_axpy_rows(rows, x, n, ldx, y, ldy, beta);
      case Isa::avx2: return kernels::avx2::matvec_axpy_rows(rows, x, n, ldx, y, ldy, beta);
      case Isa::avx512:
      case Isa::avx512_bf16: return kernels::avx512::matvec_axpy_rows(rows, x, n, ldx, y, ldy, beta);
    }
  };
  const int threads = threads_for(w.count * w.stride, options);
  if (threads == 1 || w.count < 2 * kPiece) {
    run(w, x, n, ldx, y, ldy, beta);
    return;
  }
  // Each thread takes a run of the stored rows (the x values they scale), one stretch of memory
  // read front to back, as the rows' outputs do in matvec_dot: split by columns instead, every
  // thread read part of every row, and two threads read no faster than one (GPT-2's [in × out]
  // weights, measured). Thread 0 sums into y; the others into sums of their own [n × length],
  // added to y at the end. (The caller's scratch, passed in as a pointer: a thread_local named
  // inside the lambda would be each thread's own.)
  thread_local std::vector<float> others_kept;
  others_kept.resize(std::size_t(threads - 1) * n * w.length);
  float* const others = others_kept.data();
  share_items(std::size_t(threads), threads, [&](std::size_t t) {
    const auto [first, last] = share(w.count, threads, int(t));
    StoredRows rows = w;
    rows.data = w.data + first * w.stride;
    rows.count = last - first;
    if (t == 0) return run(rows, x, n, ldx, y, ldy, beta);  // thread 0's run is never empty (count ≥ 2 pieces)
    float* sums = others + (t - 1) * n * w.length;
    if (rows.count == 0)
      std::fill_n(sums, n * w.length, 0.0f);  // more threads than pieces of rows
    else
      run(rows, x + first, n, ldx, sums, w.length, 0.0f);
  });
  for (int t = 1; t < threads; ++t)
    for (std::size_t r = 0; r < n; ++r) {
      const float* part = others + ((std::size_t(t) - 1) * n + r) * w.length;
      float* out = y + r * ldy;
      for (std::size_t c = 0; c < w.length; ++c)
        out[c] += part[c];
    }
}

}  // namespace attnlab
