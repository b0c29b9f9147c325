// The per-instruction-set part of split-K decoding (FlashDecoding): a few new queries
// against one contiguous run of a KV cache, leaving a partial softmax state that
// decode_split.cpp merges across runs. Compiled once per instruction set, like
// flash_tiles.cpp. Decoding reads every cached key and value once per step, so this loop
// is bound by memory bandwidth: it converts 64 cached rows at a time to f32 and uses them
// for every query of the KV head's group before moving on.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "attnlab/dtype.hpp"
#include "kernel_impl.hpp"
#include "simd.hpp"

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

constexpr std::size_t kBlock = 64;  // cached rows converted and used together

inline float reduce_add(VF v) {
  v += __builtin_shuffle(v, VI{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
  v += __builtin_shuffle(v, VI{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
  v += __builtin_shuffle(v, VI{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
  v += __builtin_shuffle(v, VI{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  return v[0];
}

// GCC 12's own _mm512_cvtph_ps trips its -Wmaybe-uninitialized; the code here is fine.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 16 cached values from `row` (in the storage dtype) as floats.
inline VF load_row16(const void* row, DType dtype, std::size_t offset) {
  switch (dtype) {
    case DType::f32: return load(static_cast<const float*>(row) + offset);
    case DType::bf16: {
      VI wide;
      const std::uint16_t* p = static_cast<const std::uint16_t*>(row) + offset;
      for (int l = 0; l < W; ++l) wide[l] = static_cast<int>(p[l]) << 16;
      VF out;
      std::memcpy(&out, &wide, sizeof out);
      return out;
    }
    case DType::f16: {
      const std::uint16_t* p = static_cast<const std::uint16_t*>(row) + offset;
#if defined(__AVX512F__)
      const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      VF out;
      std::memcpy(&out, &v, sizeof out);
      return out;
#elif defined(__F16C__)
      const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
      VF out;
      std::memcpy(&out, &lo, sizeof lo);
      std::memcpy(reinterpret_cast<char*>(&out) + sizeof lo, &hi, sizeof hi);
      return out;
#else
      VF out;
      for (int l = 0; l < W; ++l) out[l] = f16_to_f32(p[l]);
      return out;
#endif
    }
  }
  return VF{};
}

#pragma GCC diagnostic pop

// Rows [first, first + count) of a cache array as f32 rows of d_pad floats (zero padded).
void convert_rows(const void* array, DType dtype, std::size_t d, std::size_t d_pad, std::size_t first, std::size_t count,
                  float* out) {
  const std::size_t bytes = dtype_bytes(dtype);
  for (std::size_t r = 0; r < count; ++r) {
    const void* row = static_cast<const char*>(array) + (first + r) * d * bytes;
    float* dst = out + r * d_pad;
    std::size_t c = 0;
    for (; c + W <= d; c += W) store(dst + c, load_row16(row, dtype, c));
    for (; c < d; ++c)
      dst[c] = dtype == DType::f32   ? static_cast<const float*>(row)[c]
               : dtype == DType::f16 ? f16_to_f32(static_cast<const std::uint16_t*>(row)[c])
                                     : bf16_to_f32(static_cast<const std::uint16_t*>(row)[c]);
    std::fill(dst + d, dst + d_pad, 0.0f);
  }
}

}  // namespace

void decode_run(const DecodeRun& run) {
  const std::size_t d = run.d, d_pad = (d + W - 1) / W * W;
  // Scratch kept per thread between calls: on this kind of machine a page fault costs
  // microseconds, and a decode step is only milliseconds long.
  thread_local std::vector<float> q, keys, values, p, scores;
  q.assign(run.count * d_pad, 0.0f);
  keys.resize(kBlock * d_pad);
  values.resize(kBlock * d_pad);
  p.resize(kBlock);
  scores.resize(run.count * kBlock);
  for (std::size_t i = 0; i < run.count; ++i)
    for (std::size_t c = 0; c < d; ++c) q[i * d_pad + c] = run.queries[i * d + c] * run.log2_scale;
  for (std::size_t i = 0; i < run.count; ++i) {
    run.max[i] = kMinusInf;
    run.sum[i] = 0.0f;
    std::fill(run.out + i * d_pad, run.out + (i + 1) * d_pad, 0.0f);
  }

  for (std::size_t j0 = run.first; j0 < run.end; j0 += kBlock) {
    const std::size_t rows = std::min(kBlock, run.end - j0);
    convert_rows(run.keys, run.dtype, d, d_pad, j0, rows, keys.data());
    convert_rows(run.values, run.dtype, d, d_pad, j0, rows, values.data());
    for (std::size_t i = 0; i < run.count; ++i) {
      // Scores of query i against the block's keys, masked past its last visible key; four
      // keys at a time, so four independent chains of FMAs hide their latency.
      float* s = scores.data() + i * kBlock;
      const float* qi = q.data() + i * d_pad;
      std::size_t r = 0;
      for (; r + 4 <= rows; r += 4) {
        VF acc[4] = {};
        for (std::size_t c = 0; c < d_pad; c += W) {
          const VF qc = load(qi + c);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) acc[k] += qc * load(keys.data() + (r + k) * d_pad + c);
        }
        for (int k = 0; k < 4; ++k) s[r + k] = reduce_add(acc[k]);
      }
      for (; r < rows; ++r) {
        VF acc = VF{};
        for (std::size_t c = 0; c < d_pad; c += W) acc += load(qi + c) * load(keys.data() + r * d_pad + c);
        s[r] = reduce_add(acc);
      }
      for (r = 0; r < rows; ++r)
        if (j0 + r > run.last_visible[i]) s[r] = kMinusInf;
      float block_max = kMinusInf;
      for (std::size_t r = 0; r < rows; ++r) block_max = std::max(block_max, s[r]);
      if (block_max == kMinusInf) continue;  // nothing visible here
      const float new_max = std::max(run.max[i], block_max);
      const float correction = run.max[i] == kMinusInf ? 0.0f : std::exp2(run.max[i] - new_max);
      run.max[i] = new_max;
      float sum = 0.0f;
      for (std::size_t r = 0; r < rows; r += W) {
        VF x;
        for (int l = 0; l < W; ++l) x[l] = r + l < rows ? s[r + l] : kMinusInf;
        const VF e = exp2_vec(x - new_max);
        for (int l = 0; l < W && r + l < rows; ++l) p[r + l] = e[l], sum += e[l];
      }
      run.sum[i] = run.sum[i] * correction + sum;
      // out_i = out_i · correction + Σ_r p_r · v_r, four vectors of columns at a time (four
      // independent chains), then the remaining vectors one by one.
      float* o = run.out + i * d_pad;
      std::size_t c = 0;
      for (; c + 4 * W <= d_pad; c += 4 * W) {
        VF acc[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) acc[k] = load(o + c + k * W) * correction;
        for (std::size_t r = 0; r < rows; ++r) {
          const VF pr = splat(p[r]);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) acc[k] += pr * load(values.data() + r * d_pad + c + k * W);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) store(o + c + k * W, acc[k]);
      }
      for (; c < d_pad; c += W) {
        VF acc = load(o + c) * correction;
        for (std::size_t r = 0; r < rows; ++r) acc += splat(p[r]) * load(values.data() + r * d_pad + c);
        store(o + c, acc);
      }
    }
  }
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
