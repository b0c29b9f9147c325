// A checkpoint's safetensors files, kept mapped for as long as a model's tensors view them
// (attnlab/model/tensor.hpp), and the rare tensor whose bytes in the file are not aligned to
// its dtype, copied once so that they are.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/tensor.hpp"

namespace attnlab {

struct MappedFiles {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::deque<std::vector<std::byte>> realigned;

  // `t` of `file` as a piece of `cols` columns (stored transposed or not), in place.
  Tensor::Piece piece(const SafetensorsFile& file, const TensorInfo& t, std::size_t cols, bool transposed) {
    const std::span<const std::byte> bytes = file.bytes(t);
    const std::byte* data = bytes.data();
    if (reinterpret_cast<std::uintptr_t>(data) % dtype_bytes(t.dtype) != 0) {
      data = realigned.emplace_back(bytes.begin(), bytes.end()).data();  // operator new aligns it
    }
    return {cols, ggml_type_of(t.dtype), transposed, data};
  }
};

// A whole tensor of a mapped file: a vector [n] widened to f32 (norms and biases: small, and
// read element by element), a matrix [rows × cols] viewed where it lies.
inline Tensor mapped_tensor(const std::shared_ptr<MappedFiles>& mapped, const SafetensorsFile& file,
                            const TensorInfo& t) {
  if (t.shape.size() != 2) return file.to_f32(t);
  return Tensor::view(t.shape[0], t.shape[1], {mapped->piece(file, t, t.shape[1], false)}, mapped);
}

}  // namespace attnlab
