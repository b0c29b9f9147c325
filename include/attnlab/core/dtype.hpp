// Storage dtypes for the score grid and the KV cache: f32, f16 (IEEE binary16) and bf16
// (bfloat16), with exact conversions between them.
//
// f32 -> f16 and f32 -> bf16 round to nearest, ties to even, as hardware does:
//   - values beyond the largest finite number (f16: 65504, bf16: ~3.39e38) become ±inf
//     once they round past it (f16: from 65520 up);
//   - small values become f16 subnormals (m · 2^-24) or ±0, rounded the same way;
//   - NaN stays NaN (quiet, sign kept, top payload bits kept), ±inf stays ±inf.
// f16 -> f32 and bf16 -> f32 are exact (every f16 and bf16 value is an f32 value); a NaN
// comes back quiet.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace attnlab {

enum class DType { f32, f16, bf16 };

// Bytes one value takes: 4, 2, 2.
std::size_t dtype_bytes(DType dtype);

// "f32", "f16", "bf16".
std::string_view dtype_name(DType dtype);

// Unit roundoff u = 2^-(p) where p is the number of stored mantissa bits + 1:
// f32 2^-24 ≈ 6.0e-8, f16 2^-11 ≈ 4.9e-4, bf16 2^-8 ≈ 3.9e-3. A value stored in the dtype
// is within a relative u of the f32 it came from (normal range).
double dtype_unit_roundoff(DType dtype);

// Parses "f32", "f16" or "bf16" (also "fp32"/"float32", "fp16"/"float16"/"half",
// "bfloat16"). Throws InputError naming `field`, the bad text and the accepted names.
DType parse_dtype(std::string_view text, std::string_view field);

std::uint16_t f32_to_f16(float x);
float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float x);
float bf16_to_f32(std::uint16_t bits);

// Row conversions for kernels: `out[i] = f16_to_f32(in[i])` (or bf16) for every i, using
// the CPU's conversion instructions where the build has them (F16C), with the same results
// bit for bit as the scalar functions.
void f16_to_f32(std::span<const std::uint16_t> in, std::span<float> out);
void bf16_to_f32(std::span<const std::uint16_t> in, std::span<float> out);
void f32_to_f16(std::span<const float> in, std::span<std::uint16_t> out);
void f32_to_bf16(std::span<const float> in, std::span<std::uint16_t> out);
// out[i] = f32_to_bf16(f16_to_f32(in[i])): an f16 weight rounded to bf16 in one pass.
void f16_to_bf16(std::span<const std::uint16_t> in, std::span<std::uint16_t> out);

}  // namespace attnlab
