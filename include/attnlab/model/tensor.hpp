// A model's tensor as the forward reads it: either f32 values the model owns (what training
// writes, what a test builds, what `f32` loading widens to), or a view of a checkpoint's bytes
// where they lie in the mapped file, in the file's type (f32, f16, bf16, or one of ggml's
// quantized block types) and layout. Loading a checkpoint as views copies no weight, and a
// 16-bit or quantized checkpoint stays so in memory: the linear layers widen a block of rows
// at a time as they multiply by it.
//
// Logically every tensor is row-major: a vector [n], or a matrix [rows × cols] in attnlab's
// row-vector convention (y = x · W, W [in × out]; the embedding [vocab × d]). A view is one or
// more pieces side by side along the columns (W_qkv = [W_Q | W_K | W_V] from three files'
// tensors), each stored as [rows × its cols] (GPT-2's Conv1D) or transposed, [its cols × rows]
// (an nn.Linear's [out, in]).
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/model/ggml_type.hpp"

namespace attnlab {

class Tensor {
 public:
  struct Piece {
    std::size_t cols = 0;             // how many logical columns, from where the previous piece ended
    GgmlType type = GgmlType::f32;    // how each value (or block of values) is stored
    bool transposed = false;          // stored [cols × rows] instead of [rows × cols]
    const std::byte* data = nullptr;  // rows × cols values of `type` (a float type's aligned to its size)
  };

  Tensor() = default;
  Tensor(std::vector<float> values);  // NOLINT(google-explicit-constructor): a tensor written as its values
  // A [rows × cols] view of `pieces`, whose bytes `keep` keeps alive (the mapped file).
  static Tensor view(std::size_t rows, std::size_t cols, std::vector<Piece> pieces, std::shared_ptr<const void> keep);

  std::size_t size() const { return owned() ? values_.size() : rows_ * cols_; }
  bool empty() const { return size() == 0; }
  bool owned() const { return pieces_.empty(); }
  GgmlType type() const;                      // the stored type: f32 when owned, else the widest piece's
  std::size_t bytes() const;                  // what the values take in memory (a view's: the file's bytes it maps)
  std::size_t rows() const { return rows_; }  // a view's shape (an owned tensor's is its caller's)
  std::size_t cols() const { return cols_; }
  const std::vector<Piece>& pieces() const { return pieces_; }

  // An owned tensor's values (norms, biases, what training wrote); std::logic_error for a view.
  const float* data() const;
  float* mutable_data();
  const float* begin() const { return data(); }
  const float* end() const { return data() + size(); }
  float operator[](std::size_t i) const { return data()[i]; }

  // Any tensor's values as f32: all of them row-major, or row r of a [rows × cols] matrix
  // into out[cols] (`cols` says the shape of an owned tensor and is checked against a view's).
  std::vector<float> to_f32() const;
  void row(std::size_t r, std::size_t cols, float* out) const;
  // Columns [first, first + count) of a [rows × cols] matrix, row-major [rows × count].
  std::vector<float> columns(std::size_t rows, std::size_t cols, std::size_t first, std::size_t count) const;

 private:
  std::vector<float> values_;  // when owned
  std::size_t rows_ = 0, cols_ = 0;
  std::vector<Piece> pieces_;  // when a view
  std::shared_ptr<const void> keep_;
};

// y[n × out] = x[n × in] · W + beta · y, W [in × out] stored any way a Tensor is. Up to
// kMatvecMaxRows rows of x (generation's new tokens) go through the matrix–vector kernels,
// which read f32, f16, bf16, Q8_0, Q4_K, Q5_K and Q6_K where they lie (attnlab/kernels/
// matvec.hpp); more rows through int8 dot products for Q8_0 and the K-quants where the CPU
// has them (int8_prompt_products), f32 GEMMs otherwise (attnlab/model/blas.hpp): a 16-bit
// piece packed from its stored values, another type widened a block at a time first.
// Whether a prompt's products by weights stored as `type` are int8 dot products on this CPU
// (matvec.hpp's int8_gemm: Q8_0 and the K-quants, with AVX-512 VNNI).
bool int8_prompt_products(GgmlType type);

void multiply(const float* x, std::size_t n, std::size_t in, const Tensor& w, std::size_t out, float* y,
              float beta = 0.0f);

// y[n × rows] = x[n × cols] · Wᵀ, W [rows × cols] in one untransposed piece or owned: the
// unembedding by the token embedding or the LM head.
void multiply_by_transpose(const float* x, std::size_t n, std::size_t cols, const Tensor& w, std::size_t rows,
                           float* y);

}  // namespace attnlab
