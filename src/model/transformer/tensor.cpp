// Tensors owned or viewed in a mapped checkpoint, and the products the forward takes with
// them (attnlab/model/tensor.hpp).
#include "attnlab/model/tensor.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>

#include "attnlab/kernels/matvec.hpp"
#include "attnlab/kernels/team.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

namespace {

// Values of a 16-bit or quantized matrix are widened this many at a time (4 MiB of f32), so that the
// scratch buffer stays near while the product multiplies by it. Each block's product packs all
// of x again: with 1 MiB a block (128 rows at d_model 2048), a 1.1B Q6_K file's prompt of 256
// ran at 84-85 tokens/s, with 4 MiB at 91-93, with 8 MiB no faster.
constexpr std::size_t kWidenBlock = 1 << 20;

// count values of `type` at src into out (a whole number of its blocks), exactly: 16-bit
// values are f32 values, and a quantized block is dequantized as ggml defines it.
void widen(const std::byte* src, GgmlType type, std::size_t count, float* out) {
  if (count == 0) return;
  switch (type) {
    case GgmlType::f32: std::memcpy(out, src, count * sizeof(float)); return;
    case GgmlType::f16: f16_to_f32({reinterpret_cast<const std::uint16_t*>(src), count}, {out, count}); return;
    case GgmlType::bf16: bf16_to_f32({reinterpret_cast<const std::uint16_t*>(src), count}, {out, count}); return;
    default: dequantize(type, src, count, out);
  }
}

// Value i of stored row `row` (each row_length long): a transposed piece's element, one at a time.
float value_at(const std::byte* data, GgmlType type, std::size_t row_length, std::size_t row, std::size_t i) {
  if (ggml_block_values(type) == 1) {
    float x;
    widen(data + (row * row_length + i) * ggml_block_bytes(type), type, 1, &x);
    return x;
  }
  std::vector<float> line(row_length);  // a quantized row is dequantized whole
  widen(data + row * ggml_row_bytes(type, row_length), type, row_length, line.data());
  return line[i];
}

// The types the matrix–vector kernels read in place; the others are widened first.
std::optional<RowFormat> row_format(GgmlType type) {
  switch (type) {
    case GgmlType::f32: return RowFormat::f32;
    case GgmlType::f16: return RowFormat::f16;
    case GgmlType::bf16: return RowFormat::bf16;
    case GgmlType::q8_0: return RowFormat::q8_0;
    case GgmlType::q4_k: return RowFormat::q4_k;
    case GgmlType::q5_k: return RowFormat::q5_k;
    case GgmlType::q6_k: return RowFormat::q6_k;
    default: return std::nullopt;
  }
}

}  // namespace

bool int8_prompt_products(GgmlType type) {
  const std::optional<RowFormat> format = row_format(type);
  return format && int8_gemm_takes(*format) && best_isa() == Isa::avx512_bf16;
}

namespace {

// A few rows of x by one piece of W (its columns of y) through the matrix–vector kernels,
// when its type is one they read: true if done.
bool matvec_piece(const float* x, std::size_t n, std::size_t in, const Tensor::Piece& p, float* y, std::size_t ldy,
                  float beta) {
  const std::optional<RowFormat> format = row_format(p.type);
  if (n > kMatvecMaxRows || !format) return false;
  if (p.transposed) {  // stored [p.cols × in]: a dot product per stored row
    matvec_dot({*format, p.data, p.cols, in, ggml_row_bytes(p.type, in)}, x, n, in, y, ldy, beta);
    return true;
  }
  if (ggml_block_values(p.type) != 1) return false;  // (a quantized piece is always stored by output)
  matvec_axpy({*format, p.data, in, p.cols, ggml_row_bytes(p.type, p.cols)}, x, n, in, y, ldy, beta);
  return true;
}

}  // namespace

Tensor::Tensor(std::vector<float> values) : values_(std::move(values)) {}

Tensor Tensor::view(std::size_t rows, std::size_t cols, std::vector<Piece> pieces, std::shared_ptr<const void> keep) {
  std::size_t covered = 0;
  for (const Piece& p : pieces) {
    covered += p.cols;
    if (ggml_block_values(p.type) == 1 && reinterpret_cast<std::uintptr_t>(p.data) % ggml_block_bytes(p.type) != 0)
      throw std::logic_error("Tensor::view: a piece is not aligned to its type");
  }
  if (covered != cols || pieces.empty()) throw std::logic_error("Tensor::view: the pieces do not cover the columns");
  Tensor t;
  t.rows_ = rows, t.cols_ = cols;
  t.pieces_ = std::move(pieces);
  t.keep_ = std::move(keep);
  return t;
}

GgmlType Tensor::type() const {
  GgmlType widest = owned() ? GgmlType::f32 : pieces_.front().type;
  const auto bits = [](GgmlType t) { return double(ggml_block_bytes(t)) / double(ggml_block_values(t)); };
  for (const Piece& p : pieces_)
    if (bits(p.type) > bits(widest)) widest = p.type;
  return widest;
}

std::size_t Tensor::bytes() const {
  if (owned()) return values_.size() * sizeof(float);
  std::size_t total = 0;
  for (const Piece& p : pieces_)
    total += p.transposed ? p.cols * ggml_row_bytes(p.type, rows_) : rows_ * ggml_row_bytes(p.type, p.cols);
  return total;
}

const float* Tensor::data() const {
  if (!owned()) throw std::logic_error("Tensor::data: the tensor is a view of a checkpoint; read it with to_f32");
  return values_.data();
}

float* Tensor::mutable_data() {
  if (!owned()) throw std::logic_error("Tensor::mutable_data: a view of a checkpoint is read-only");
  return values_.data();
}

std::vector<float> Tensor::to_f32() const {
  if (owned()) return values_;
  std::vector<float> out(rows_ * cols_);
  std::vector<float> stored;
  std::size_t first = 0;
  for (const Piece& p : pieces_) {
    if (p.transposed) {  // [p.cols × rows] widened whole, then written column by column
      stored.resize(p.cols * rows_);
      widen(p.data, p.type, stored.size(), stored.data());
      for (std::size_t c = 0; c < p.cols; ++c)
        for (std::size_t r = 0; r < rows_; ++r)
          out[r * cols_ + first + c] = stored[c * rows_ + r];
    } else {
      for (std::size_t r = 0; r < rows_; ++r)
        widen(p.data + r * ggml_row_bytes(p.type, p.cols), p.type, p.cols, out.data() + r * cols_ + first);
    }
    first += p.cols;
  }
  return out;
}

void Tensor::row(std::size_t r, std::size_t cols, float* out) const {
  if (owned()) {
    std::copy_n(values_.data() + r * cols, cols, out);
    return;
  }
  if (cols != cols_ || r >= rows_) throw std::logic_error("Tensor::row: the shape does not match the view's");
  std::size_t first = 0;
  for (const Piece& p : pieces_) {
    if (p.transposed) {
      for (std::size_t c = 0; c < p.cols; ++c)
        out[first + c] = value_at(p.data, p.type, rows_, c, r);
    } else {
      widen(p.data + r * ggml_row_bytes(p.type, p.cols), p.type, p.cols, out + first);
    }
    first += p.cols;
  }
}

std::vector<float> Tensor::columns(std::size_t rows, std::size_t cols, std::size_t first, std::size_t count) const {
  std::vector<float> out(rows * count), line(std::max(rows, cols));
  if (owned()) {
    for (std::size_t r = 0; r < rows; ++r)
      std::copy_n(values_.data() + r * cols + first, count, out.data() + r * count);
    return out;
  }
  if (rows != rows_ || cols != cols_) throw std::logic_error("Tensor::columns: the shape does not match the view's");
  std::size_t start = 0;  // the piece's first logical column
  for (const Piece& p : pieces_) {
    const std::size_t lo = std::max(first, start), hi = std::min(first + count, start + p.cols);
    for (std::size_t c = lo; c < hi && p.transposed; ++c) {  // a stored row is a logical column
      widen(p.data + (c - start) * ggml_row_bytes(p.type, rows_), p.type, rows_, line.data());
      for (std::size_t r = 0; r < rows_; ++r)
        out[r * count + c - first] = line[r];
    }
    for (std::size_t r = 0; r < rows_ && !p.transposed && lo < hi; ++r) {
      widen(p.data + r * ggml_row_bytes(p.type, p.cols), p.type, p.cols, line.data());
      std::copy(line.begin() + std::ptrdiff_t(lo - start), line.begin() + std::ptrdiff_t(hi - start),
                out.begin() + std::ptrdiff_t(r * count + lo - first));
    }
    start += p.cols;
  }
  return out;
}

namespace {

// y[n × rows] (rows ldy apart) = beta · y + x[n × width] · Wᵀ, W's `rows` stored rows of
// `width` values in a 16-bit or quantized type: a block of W's rows at a time, widened to
// f32 and multiplied, the blocks shared over the threads (team.hpp; each its own widening and a
// one-thread product: the widening is as much of the work as the product for a prompt).
void widened_products(const float* x, std::size_t n, std::size_t width, const std::byte* data, GgmlType type,
                      std::size_t rows, float beta, float* y, std::size_t ldy) {
  // Q8_0, Q4_K, Q5_K and Q6_K by int8 products where the CPU has them (matvec.hpp's int8_gemm).
  const std::optional<RowFormat> format = row_format(type);
  if (format && int8_gemm({*format, data, rows, width, ggml_row_bytes(type, width)}, x, n, width, y, ldy, beta)) return;
  // f16 and bf16 widened as attnlab's own f32 kernels pack them, where those run.
  if ((type == GgmlType::f16 || type == GgmlType::bf16) &&
      gemm_16bit(n, rows, width, x, width, reinterpret_cast<const std::uint16_t*>(data),
                 type == GgmlType::f16 ? DType::f16 : DType::bf16, width, beta, y, ldy))
    return;
  const std::size_t block = std::max<std::size_t>(1, kWidenBlock / std::max<std::size_t>(width, 1));
  const std::size_t blocks = (rows + block - 1) / block;
  share_runs(blocks, 0, [&](std::size_t first, std::size_t end) {
    std::vector<float> scratch;
    for (std::size_t b = first; b < end; ++b) {
      const std::size_t r0 = b * block, count = std::min(block, rows - r0);
      scratch.resize(count * width);
      widen(data + r0 * ggml_row_bytes(type, width), type, count * width, scratch.data());
      gemm(false, true, n, count, width, x, width, scratch.data(), width, beta, y + r0, ldy);
    }
  });
}

// ---- bf16 products (Bf16Products, attnlab/model/blas.hpp) ----

// The bf16 operands, on cache lines (UnsetAllocator): AMX's tiles read them a row at a time.
using Bf16Buffer = std::vector<std::uint16_t, UnsetAllocator<std::uint16_t>>;

// Stored values of bf16 products are rounded this many at a time (4 MiB of bf16): blocks
// large enough that one oneDNN product over the threads takes each.
constexpr std::size_t kBf16Block = 1 << 21;

// rows × width values of `type` at src (rows of ggml_row_bytes(type, width)) rounded to bf16
// into out: f32 rows where they lie, f16 rows directly (f16_to_bf16), any other type's widened
// exactly to f32 a row at a time first, the rows shared over OpenMP's threads.
void round_to_bf16(const std::byte* src, GgmlType type, std::size_t rows, std::size_t width, std::uint16_t* out) {
  if (type == GgmlType::f32) return round_rows_to_bf16(reinterpret_cast<const float*>(src), rows, width, width, out);
  const std::size_t row_bytes = ggml_row_bytes(type, width);
  share_runs(rows, rows * width >= (1 << 16) ? 0 : 1, [&](std::size_t first, std::size_t end) {
    if (type == GgmlType::f16) {  // in one pass, the same bits as through f32
      f16_to_bf16(std::span(reinterpret_cast<const std::uint16_t*>(src) + first * width, (end - first) * width),
                  std::span(out + first * width, (end - first) * width));
      return;
    }
    std::vector<float> line(width);
    for (std::size_t r = first; r < end; ++r) {
      widen(src + r * row_bytes, type, width, line.data());
      // The row's conversion itself, not round_rows_to_bf16: a parallel region opened per row
      // (even one that runs on this thread alone) cost as much as the product of the block.
      f32_to_bf16(std::span<const float>(line), std::span<std::uint16_t>(out + r * width, width));
    }
  });
}

// y[n × p.cols] (rows ldy apart) = beta · y + xb[n × in] · P, xb the input in bf16 and P the
// piece [in × p.cols] however it is stored: a bf16 piece multiplied where it lies, any other
// rounded to bf16 a block of stored rows at a time, each block one bf16 product.
void bf16_piece_product(const std::uint16_t* xb, std::size_t n, std::size_t in, const Tensor::Piece& p, float beta,
                        float* y, std::size_t ldy) {
  // A transposed piece's stored rows are W's columns (y's), each `in` long; an untransposed
  // one's are W's rows (the input's), each p.cols long.
  const std::size_t stored_rows = p.transposed ? p.cols : in, width = p.transposed ? in : p.cols;
  const std::size_t block = p.type == GgmlType::bf16 ? stored_rows : std::max<std::size_t>(1, kBf16Block / width);
  thread_local Bf16Buffer rounded;  // kept: a fresh 4 MiB each product costs its page faults
  for (std::size_t r0 = 0; r0 < stored_rows; r0 += block) {
    const std::size_t count = std::min(block, stored_rows - r0);
    const std::uint16_t* w = nullptr;  // stored rows [r0, r0 + count) in bf16, [count × width]
    if (p.type == GgmlType::bf16) {
      w = reinterpret_cast<const std::uint16_t*>(p.data) + r0 * width;
    } else {
      rounded.resize(count * width);
      round_to_bf16(p.data + r0 * ggml_row_bytes(p.type, width), p.type, count, width, rounded.data());
      w = rounded.data();
    }
    if (p.transposed)  // y's columns [r0, r0 + count) = xb · blockᵀ
      gemm_bf16(false, true, n, count, in, xb, in, w, width, beta, y + r0, ldy);
    else  // the terms of W's rows [r0, r0 + count): y += xb[:, r0 : r0 + count] · block
      gemm_bf16(false, false, n, p.cols, count, xb + r0, in, w, width, r0 == 0 ? beta : 1.0f, y, ldy);
  }
}

// y[n × out] = beta · y + x · W as bf16 products: x rounded once, then each piece.
void bf16_products_multiply(const float* x, std::size_t n, std::size_t in, std::span<const Tensor::Piece> pieces,
                            std::size_t out, float* y, float beta) {
  thread_local Bf16Buffer xb;  // kept, as the blocks are, while it is small
  xb.resize(std::max(xb.size(), n * in));
  round_rows_to_bf16(x, n, in, in, xb.data());
  std::size_t first = 0;  // the piece's first column of y
  for (const Tensor::Piece& p : pieces) {
    bf16_piece_product(xb.data(), n, in, p, beta, y + first, out);
    first += p.cols;
  }
  if (xb.size() > kBf16Block) Bf16Buffer().swap(xb);  // a long prompt's is given back
}

}  // namespace

void multiply(const float* x, std::size_t n, std::size_t in, const Tensor& w, std::size_t out, float* y, float beta) {
  if (n > kMatvecMaxRows && bf16_products()) {
    if (!w.owned() && (w.rows() != in || w.cols() != out))
      throw std::logic_error("multiply: the shape does not match the view's");
    const Tensor::Piece whole{out, GgmlType::f32, false,
                              reinterpret_cast<const std::byte*>(w.owned() ? w.data() : nullptr)};
    return bf16_products_multiply(x, n, in, w.owned() ? std::span(&whole, 1) : std::span(w.pieces()), out, y, beta);
  }
  if (w.owned() && n <= kMatvecMaxRows) {
    const Tensor::Piece whole{out, GgmlType::f32, false, reinterpret_cast<const std::byte*>(w.data())};
    matvec_piece(x, n, in, whole, y, out, beta);
    return;
  }
  if (w.owned()) {
    gemm(false, false, n, out, in, x, in, w.data(), out, beta, y, out);
    return;
  }
  if (w.rows() != in || w.cols() != out) throw std::logic_error("multiply: the shape does not match the view's");
  if (n <= kMatvecMaxRows) {  // every piece stored by output in a type the kernels read: one product
    std::vector<StoredRows> parts;
    for (const Tensor::Piece& p : w.pieces()) {
      const std::optional<RowFormat> format = row_format(p.type);
      if (!format || !p.transposed) break;
      parts.push_back({*format, p.data, p.cols, in, ggml_row_bytes(p.type, in)});
    }
    if (parts.size() == w.pieces().size()) return matvec_dot(parts, x, n, in, y, out, beta);
  }
  std::vector<float> scratch;
  std::size_t first = 0;  // the piece's first column of y
  for (const Tensor::Piece& p : w.pieces()) {
    float* y_piece = y + first;
    if (matvec_piece(x, n, in, p, y_piece, out, beta)) {
      // done: read where it lies
    } else if (p.type == GgmlType::f32) {
      const auto* stored = reinterpret_cast<const float*>(p.data);
      if (p.transposed)  // stored [p.cols × in]
        gemm(false, true, n, p.cols, in, x, in, stored, in, beta, y_piece, out);
      else  // stored [in × p.cols]
        gemm(false, false, n, p.cols, in, x, in, stored, p.cols, beta, y_piece, out);
    } else if (p.transposed) {
      widened_products(x, n, in, p.data, p.type, p.cols, beta, y_piece, out);
    } else {
      // A block of input rows at a time, [rows × p.cols], each adding its share of x · W.
      const std::size_t block = std::max<std::size_t>(1, kWidenBlock / std::max<std::size_t>(p.cols, 1));
      for (std::size_t r0 = 0; r0 < in; r0 += block) {
        const std::size_t count = std::min(block, in - r0);
        scratch.resize(count * p.cols);
        widen(p.data + r0 * ggml_row_bytes(p.type, p.cols), p.type, count * p.cols, scratch.data());
        gemm(false, false, n, p.cols, count, x + r0, in, scratch.data(), p.cols, r0 == 0 ? beta : 1.0f, y_piece, out);
      }
    }
    first += p.cols;
  }
}

void multiply_by_transpose(const float* x, std::size_t n, std::size_t cols, const Tensor& w, std::size_t rows,
                           float* y) {
  if (!w.owned() && (w.rows() != rows || w.cols() != cols || w.pieces().size() != 1 || w.pieces()[0].transposed))
    throw std::logic_error("multiply_by_transpose: needs one untransposed piece of the given shape");
  // W's stored rows are y's columns: for a few rows of x, a dot product with each as it lies.
  const Tensor::Piece whole =
      w.owned() ? Tensor::Piece{rows, GgmlType::f32, true, reinterpret_cast<const std::byte*>(w.data())}
                : Tensor::Piece{rows, w.pieces()[0].type, true, w.pieces()[0].data};
  if (matvec_piece(x, n, cols, whole, y, rows, 0.0f)) return;
  if (n > kMatvecMaxRows && bf16_products())
    return bf16_products_multiply(x, n, cols, std::span(&whole, 1), rows, y, 0.0f);
  const float* values = nullptr;
  if (w.owned()) {
    values = w.data();
  } else {
    if (w.pieces()[0].type == GgmlType::f32) values = reinterpret_cast<const float*>(w.pieces()[0].data);
  }
  if (values) {
    gemm(false, true, n, rows, cols, x, cols, values, cols, 0.0f, y, rows);
    return;
  }
  // 16-bit or quantized: a block of W's rows (y's columns) at a time.
  const Tensor::Piece& p = w.pieces()[0];
  widened_products(x, n, cols, p.data, p.type, rows, 0.0f, y, rows);
}

}  // namespace attnlab
