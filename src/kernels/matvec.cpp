// The matrix–vector products' dispatch (attnlab/kernels/matvec.hpp): the shape checked,
// Q4_K's activations prepared once, the rows or columns split between threads, and
// each share run by the instruction set's kernel (matvec_tiles.cpp).
#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "attnlab/kernels/matvec.hpp"
#include "kernel_impl.hpp"

namespace attnlab {

namespace {

// Below this many bytes of weights a product runs on the calling thread: waking the others
// costs more than it saves (a toy model's matrices are a few KiB).
constexpr std::size_t kParallelBytes = 256 << 10;

// Threads take rows (or columns) in pieces of this many, so that a piece's share of the
// weight is whole cache lines and the pieces even out between threads.
constexpr std::size_t kPiece = 16;

std::size_t block_values(RowFormat f) {
  switch (f) {
    case RowFormat::q8_0: return 32;
    case RowFormat::q4_k:
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

int threads_for(const StoredRows& w, const MatvecOptions& options) {
  if (w.count * w.stride < kParallelBytes || omp_in_parallel()) return 1;
  return options.threads > 0 ? options.threads : omp_get_max_threads();
}

// Runs body(first, last) over [0, total) in kPiece-sized pieces on `threads` threads.
template <class Body>
void split(std::size_t total, int threads, const Body& body) {
  const std::size_t pieces = (total + kPiece - 1) / kPiece;
  if (threads <= 1 || pieces <= 1) return body(std::size_t(0), total);
  const std::size_t per_thread = (pieces + std::size_t(threads) - 1) / std::size_t(threads);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (std::size_t t = 0; t < std::size_t(threads); ++t) {
    const std::size_t first = std::min(total, t * per_thread * kPiece);
    const std::size_t last = std::min(total, (t + 1) * per_thread * kPiece);
    if (first < last) body(first, last);
  }
}

}  // namespace

std::string_view to_string(RowFormat format) {
  switch (format) {
    case RowFormat::f32: return "f32";
    case RowFormat::f16: return "f16";
    case RowFormat::bf16: return "bf16";
    case RowFormat::q8_0: return "Q8_0";
    case RowFormat::q4_k: return "Q4_K";
    case RowFormat::q6_k: return "Q6_K";
  }
  return "?";
}

void matvec_dot(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                float beta, const MatvecOptions& options) {
  check(w, n, ldx, ldy, w.length, w.count, "matvec_dot");
  if (n == 0 || w.count == 0) return;
  const Isa isa = usable_isa(options.isa);
  kernels::Q4kActivations q4k;  // Q4_K: what the kernel reads of x besides x, made once for all rows
  if (w.format == RowFormat::q4_k) switch (isa) {
      case Isa::generic: kernels::generic::matvec_prepare_q4_k(x, n, ldx, w.length, false, q4k); break;
      case Isa::avx2: kernels::avx2::matvec_prepare_q4_k(x, n, ldx, w.length, false, q4k); break;
      case Isa::avx512:
      case Isa::avx512_bf16:
        kernels::avx512::matvec_prepare_q4_k(x, n, ldx, w.length, isa == Isa::avx512_bf16, q4k);
        break;
    }
  split(w.count, threads_for(w, options), [&](std::size_t first, std::size_t last) {
    switch (isa) {
      case Isa::generic: return kernels::generic::matvec_dot_rows(w, first, last, x, n, ldx, &q4k, y, ldy, beta);
      case Isa::avx2: return kernels::avx2::matvec_dot_rows(w, first, last, x, n, ldx, &q4k, y, ldy, beta);
      case Isa::avx512:
      case Isa::avx512_bf16: return kernels::avx512::matvec_dot_rows(w, first, last, x, n, ldx, &q4k, y, ldy, beta);
    }
  });
}

void matvec_axpy(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                 float beta, const MatvecOptions& options) {
  if (block_values(w.format) != 1)
    throw std::logic_error("matvec_axpy: a quantized format's rows are outputs; use matvec_dot");
  check(w, n, ldx, ldy, w.count, w.length, "matvec_axpy");
  if (n == 0 || w.length == 0) return;
  const Isa isa = usable_isa(options.isa);
  split(w.length, threads_for(w, options), [&](std::size_t first, std::size_t last) {
    switch (isa) {
      case Isa::generic: return kernels::generic::matvec_axpy_columns(w, first, last, x, n, ldx, y, ldy, beta);
      case Isa::avx2: return kernels::avx2::matvec_axpy_columns(w, first, last, x, n, ldx, y, ldy, beta);
      case Isa::avx512:
      case Isa::avx512_bf16: return kernels::avx512::matvec_axpy_columns(w, first, last, x, n, ldx, y, ldy, beta);
    }
  });
}

}  // namespace attnlab
