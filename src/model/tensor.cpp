// Tensors owned or viewed in a mapped checkpoint, and the products the forward takes with
// them (attnlab/model/tensor.hpp).
#include "attnlab/model/tensor.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>

namespace attnlab {

namespace {

// Values of a 16-bit matrix are widened this many at a time (1 MiB of f32), so that the
// scratch buffer stays in cache while OpenBLAS multiplies by it.
constexpr std::size_t kWidenBlock = 1 << 18;

// count values of `dtype` at src into out, exactly (16-bit values are f32 values).
void widen(const std::byte* src, DType dtype, std::size_t count, float* out) {
  if (count == 0) return;
  if (dtype == DType::f32) {
    std::memcpy(out, src, count * sizeof(float));
    return;
  }
  const std::span<const std::uint16_t> in(reinterpret_cast<const std::uint16_t*>(src), count);
  if (dtype == DType::f16)
    f16_to_f32(in, {out, count});
  else
    bf16_to_f32(in, {out, count});
}

int as_int(std::size_t x) { return static_cast<int>(x); }

}  // namespace

Tensor::Tensor(std::vector<float> values) : values_(std::move(values)) {}

Tensor Tensor::view(std::size_t rows, std::size_t cols, std::vector<Piece> pieces, std::shared_ptr<const void> keep) {
  std::size_t covered = 0;
  for (const Piece& p : pieces) {
    covered += p.cols;
    if (reinterpret_cast<std::uintptr_t>(p.data) % dtype_bytes(p.dtype) != 0)
      throw std::logic_error("Tensor::view: a piece is not aligned to its dtype");
  }
  if (covered != cols || pieces.empty()) throw std::logic_error("Tensor::view: the pieces do not cover the columns");
  Tensor t;
  t.rows_ = rows, t.cols_ = cols;
  t.pieces_ = std::move(pieces);
  t.keep_ = std::move(keep);
  return t;
}

DType Tensor::dtype() const {
  DType widest = owned() ? DType::f32 : pieces_.front().dtype;
  for (const Piece& p : pieces_)
    if (dtype_bytes(p.dtype) > dtype_bytes(widest)) widest = p.dtype;
  return widest;
}

std::size_t Tensor::bytes() const {
  if (owned()) return values_.size() * sizeof(float);
  std::size_t total = 0;
  for (const Piece& p : pieces_)
    total += rows_ * p.cols * dtype_bytes(p.dtype);
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
      widen(p.data, p.dtype, stored.size(), stored.data());
      for (std::size_t c = 0; c < p.cols; ++c)
        for (std::size_t r = 0; r < rows_; ++r)
          out[r * cols_ + first + c] = stored[c * rows_ + r];
    } else {
      for (std::size_t r = 0; r < rows_; ++r)
        widen(p.data + r * p.cols * dtype_bytes(p.dtype), p.dtype, p.cols, out.data() + r * cols_ + first);
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
    const std::size_t bytes = dtype_bytes(p.dtype);
    if (p.transposed) {
      for (std::size_t c = 0; c < p.cols; ++c)
        widen(p.data + (c * rows_ + r) * bytes, p.dtype, 1, out + first + c);
    } else {
      widen(p.data + r * p.cols * bytes, p.dtype, p.cols, out + first);
    }
    first += p.cols;
  }
}

std::vector<float> Tensor::columns(std::size_t rows, std::size_t cols, std::size_t first, std::size_t count) const {
  std::vector<float> out(rows * count), line(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    row(r, cols, line.data());
    std::copy_n(line.data() + first, count, out.data() + r * count);
  }
  return out;
}

void multiply(const float* x, std::size_t n, std::size_t in, const Tensor& w, std::size_t out, float* y, float beta) {
  if (w.owned()) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(n), as_int(out), as_int(in), 1.0f, x, as_int(in),
                w.data(), as_int(out), beta, y, as_int(out));
    return;
  }
  if (w.rows() != in || w.cols() != out) throw std::logic_error("multiply: the shape does not match the view's");
  std::vector<float> scratch;
  std::size_t first = 0;  // the piece's first column of y
  for (const Tensor::Piece& p : w.pieces()) {
    float* y_piece = y + first;
    const std::size_t bytes = dtype_bytes(p.dtype);
    if (p.dtype == DType::f32) {
      const auto* stored = reinterpret_cast<const float*>(p.data);
      if (p.transposed)  // stored [p.cols × in]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(n), as_int(p.cols), as_int(in), 1.0f, x, as_int(in),
                    stored, as_int(in), beta, y_piece, as_int(out));
      else  // stored [in × p.cols]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(n), as_int(p.cols), as_int(in), 1.0f, x,
                    as_int(in), stored, as_int(p.cols), beta, y_piece, as_int(out));
    } else if (p.transposed) {
      // A block of output columns at a time: their stored rows widened, [cols × in].
      const std::size_t block = std::max<std::size_t>(1, kWidenBlock / std::max<std::size_t>(in, 1));
      for (std::size_t c0 = 0; c0 < p.cols; c0 += block) {
        const std::size_t count = std::min(block, p.cols - c0);
        scratch.resize(count * in);
        widen(p.data + c0 * in * bytes, p.dtype, count * in, scratch.data());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(n), as_int(count), as_int(in), 1.0f, x, as_int(in),
                    scratch.data(), as_int(in), beta, y_piece + c0, as_int(out));
      }
    } else {
      // A block of input rows at a time, [rows × p.cols], each adding its share of x · W.
      const std::size_t block = std::max<std::size_t>(1, kWidenBlock / std::max<std::size_t>(p.cols, 1));
      for (std::size_t r0 = 0; r0 < in; r0 += block) {
        const std::size_t count = std::min(block, in - r0);
        scratch.resize(count * p.cols);
        widen(p.data + r0 * p.cols * bytes, p.dtype, count * p.cols, scratch.data());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(n), as_int(p.cols), as_int(count), 1.0f, x + r0,
                    as_int(in), scratch.data(), as_int(p.cols), r0 == 0 ? beta : 1.0f, y_piece, as_int(out));
      }
    }
    first += p.cols;
  }
}

void multiply_by_transpose(const float* x, std::size_t n, std::size_t cols, const Tensor& w, std::size_t rows,
                           float* y) {
  const float* values = nullptr;
  if (w.owned()) {
    values = w.data();
  } else {
    if (w.rows() != rows || w.cols() != cols || w.pieces().size() != 1 || w.pieces()[0].transposed)
      throw std::logic_error("multiply_by_transpose: needs one untransposed piece of the given shape");
    if (w.pieces()[0].dtype == DType::f32) values = reinterpret_cast<const float*>(w.pieces()[0].data);
  }
  if (values) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(n), as_int(rows), as_int(cols), 1.0f, x, as_int(cols),
                values, as_int(cols), 0.0f, y, as_int(rows));
    return;
  }
  // 16-bit: a block of W's rows (y's columns) at a time.
  const Tensor::Piece& p = w.pieces()[0];
  const std::size_t block = std::max<std::size_t>(1, kWidenBlock / std::max<std::size_t>(cols, 1));
  std::vector<float> scratch;
  for (std::size_t r0 = 0; r0 < rows; r0 += block) {
    const std::size_t count = std::min(block, rows - r0);
    scratch.resize(count * cols);
    widen(p.data + r0 * cols * dtype_bytes(p.dtype), p.dtype, count * cols, scratch.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(n), as_int(count), as_int(cols), 1.0f, x, as_int(cols),
                scratch.data(), as_int(cols), 0.0f, y + r0, as_int(rows));
  }
}

}  // namespace attnlab
