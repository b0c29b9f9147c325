// ggml's tensor types, the ones attnlab reads: the float types and the block-quantized ones
// GGUF files hold (what llama.cpp's Q8_0, Q4_0, Q4_K_M and Q5_K_M files are made of; a
// Q4_K_M file of a model whose rows are not whole 256-value blocks, such as Qwen2.5-0.5B's
// 896 or SmolLM2's 576, falls back to Q5_0, Q5_1, Q8_0 or IQ4_NL for those tensors), with
// each block's dequantization exactly as ggml defines it (ggml-common.h's block layouts).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attnlab/core/dtype.hpp"

namespace attnlab {

// The ggml tensor types attnlab dequantizes, by their number in the file.
enum class GgmlType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  iq4_nl = 20,
  bf16 = 30,
};

// A type's name as llama.cpp prints it ("F32", "Q4_K"), its block (values per block; 1 for
// the float types) and the bytes a block takes.
std::string_view ggml_type_name(GgmlType type);
std::size_t ggml_block_values(GgmlType type);
std::size_t ggml_block_bytes(GgmlType type);

// A safetensors dtype as the same ggml type.
GgmlType ggml_type_of(DType dtype);

// The bytes a row of `values` values of `type` takes (a whole number of blocks).
inline std::size_t ggml_row_bytes(GgmlType type, std::size_t values) {
  return values / ggml_block_values(type) * ggml_block_bytes(type);
}

// `count` values (a whole number of the type's blocks) of `type` at `blocks`, as f32 into
// `out`, each block exactly as ggml's reference dequantization computes it.
void dequantize(GgmlType type, const std::byte* blocks, std::size_t count, float* out);

}  // namespace attnlab
