// The per-instruction-set part of split-K decoding (FlashDecoding): a few new queries
// against one contiguous run of a KV cache, leaving a partial softmax state that
// decode_split.cpp merges across runs. Compiled once per instruction set, like
// flash_tiles.cpp. Decoding reads every cached key and value once per step, so this loop
// is bound by memory bandwidth: it converts 64 cached rows at a time to f32 (prefetching
// the next 64 into L2 meanwhile) and uses them for every query of the KV head's group
// before moving on: scores 16 keys per vector, the block's softmax in vectors, and the
// values mixed for four queries per row read.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "attnlab/core/dtype.hpp"
#include "kernel_impl.hpp"
#include "simd.hpp"

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

constexpr std::size_t kBlock = 64;  // cached rows converted and used together

// Folds the 16 lanes into one with `op` (add, max), halving the distance each step.
template <class Op>
inline float reduce(VF v, Op op) {
  v = op(v, ATTNLAB_SHUFFLE(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = op(v, ATTNLAB_SHUFFLE(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = op(v, ATTNLAB_SHUFFLE(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = op(v, ATTNLAB_SHUFFLE(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}
inline VF max_vec(VF a, VF b) { return a > b ? a : b; }
inline float reduce_add(VF v) {
  return reduce(v, [](VF a, VF b) { return a + b; });
}
inline float reduce_max(VF v) { return reduce(v, max_vec); }

// GCC 12's own _mm512_cvtph_ps trips its -Wmaybe-uninitialized; the code here is fine.
// (Clang has no such warning, and would warn about the unknown name.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 16 cached values from `row` (in the storage dtype) as floats.
inline VF load_row16(const void* row, DType dtype, std::size_t offset) {
  switch (dtype) {
    case DType::f32: return load(static_cast<const float*>(row) + offset);
    case DType::bf16: {
      VI wide;
      const std::uint16_t* p = static_cast<const std::uint16_t*>(row) + offset;
      for (int l = 0; l < W; ++l)
        wide[l] = static_cast<int>(p[l]) << 16;
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
      for (int l = 0; l < W; ++l)
        out[l] = f16_to_f32(p[l]);
      return out;
#endif
    }
  }
  return VF{};
}

#pragma GCC diagnostic pop

// How converted rows are laid out: row by row (values: each row is read whole), or in
// blocks of 16 rows where the 16 rows' floats c..c+15 sit together (keys: the score loop
// then reads 16 keys at fixed offsets from one pointer).
enum class Layout { rows, blocks_of_16 };

// Where converted row r's floats c..c+15 go (v = c / 16), for `vectors` = d_pad / 16.
inline float* converted_at(float* out, Layout layout, std::size_t r, std::size_t v, std::size_t vectors) {
  return layout == Layout::rows ? out + (r * vectors + v) * W : out + ((r / W * vectors + v) * W + r % W) * W;
}

// Rows [first, first + count) of a cache array as f32, d_pad floats a row (zero padded),
// laid out as `layout` says. Each row also asks for the same row of the next block (up to
// `prefetch_end`) to be brought into L2, so the memory reads of the next block overlap the
// arithmetic on this one.
template <DType dtype>
void convert_rows(const void* array, std::size_t d, std::size_t d_pad, std::size_t first, std::size_t count,
                  std::size_t prefetch_end, Layout layout, float* out) {
  const std::size_t row_bytes = d * dtype_bytes(dtype), vectors = d_pad / W, full = d / W;
  const char* bytes = static_cast<const char*>(array);
  for (std::size_t r = 0; r < count; ++r) {
    const char* row = bytes + (first + r) * row_bytes;
    if (first + count + r < prefetch_end)
      for (std::size_t line = 0; line < row_bytes; line += 64)
        __builtin_prefetch(row + count * row_bytes + line, 0, 1);
    for (std::size_t v = 0; v < full; ++v)
      store(converted_at(out, layout, r, v, vectors), load_row16(row, dtype, v * W));
    if (full < vectors) {  // the last, partial vector: the rest of the row, then zeros
      VF x = VF{};
      for (std::size_t c = full * W; c < d; ++c)
        x[c - full * W] = dtype == DType::f32   ? reinterpret_cast<const float*>(row)[c]
                          : dtype == DType::f16 ? f16_to_f32(reinterpret_cast<const std::uint16_t*>(row)[c])
                                                : bf16_to_f32(reinterpret_cast<const std::uint16_t*>(row)[c]);
      store(converted_at(out, layout, r, full, vectors), x);
    }
  }
}

void convert_rows(const void* array, DType dtype, std::size_t d, std::size_t d_pad, std::size_t first,
                  std::size_t count, std::size_t prefetch_end, Layout layout, float* out) {
  switch (dtype) {
    case DType::f32: return convert_rows<DType::f32>(array, d, d_pad, first, count, prefetch_end, layout, out);
    case DType::f16: return convert_rows<DType::f16>(array, d, d_pad, first, count, prefetch_end, layout, out);
    case DType::bf16: return convert_rows<DType::bf16>(array, d, d_pad, first, count, prefetch_end, layout, out);
  }
}

// Σ_c acc[k][c] for k = 0..15, as one vector whose lane k is key k's score: the 16
// horizontal sums folded together (each level halves the vectors and doubles the keys a
// vector holds), 45 operations instead of 16 separate reductions of 8.
inline VF sum16(const VF (&acc)[W]) {
  VF t8[8], t4[4], t2[2];
  for (int k = 0; k < 8; ++k)  // lanes 0-7: key 2k, 8-15: key 2k+1
    t8[k] = ATTNLAB_SHUFFLE2(acc[2 * k], acc[2 * k + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
            ATTNLAB_SHUFFLE2(acc[2 * k], acc[2 * k + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int k = 0; k < 4; ++k)  // four lanes a key: keys 4k .. 4k+3
    t4[k] = ATTNLAB_SHUFFLE2(t8[2 * k], t8[2 * k + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
            ATTNLAB_SHUFFLE2(t8[2 * k], t8[2 * k + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  for (int k = 0; k < 2; ++k)  // two lanes a key: keys 8k .. 8k+7
    t2[k] = ATTNLAB_SHUFFLE2(t4[2 * k], t4[2 * k + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
            ATTNLAB_SHUFFLE2(t4[2 * k], t4[2 * k + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  return ATTNLAB_SHUFFLE2(t2[0], t2[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         ATTNLAB_SHUFFLE2(t2[0], t2[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// out_q = out_q · correction_q + Σ_r p_q[r] · v_r for NQ queries at once, so each value row
// is read once for all of them; four vectors of columns at a time, then one at a time.
template <int NQ>
void mix_values(const float* values, std::size_t rows, std::size_t d_pad, const float* p, std::size_t p_stride,
                const float* correction, float* out) {
  std::size_t c = 0;
  for (; c + 4 * W <= d_pad; c += 4 * W) {
    VF acc[NQ][4];
    for (int q = 0; q < NQ; ++q)
      for (int k = 0; k < 4; ++k)
        acc[q][k] = load(out + q * d_pad + c + k * W) * correction[q];
    for (std::size_t r = 0; r < rows; ++r) {
      VF v[4];
      for (int k = 0; k < 4; ++k)
        v[k] = load(values + r * d_pad + c + k * W);
      for (int q = 0; q < NQ; ++q) {
        const VF pr = splat(p[q * p_stride + r]);
        for (int k = 0; k < 4; ++k)
          acc[q][k] += pr * v[k];
      }
    }
    for (int q = 0; q < NQ; ++q)
      for (int k = 0; k < 4; ++k)
        store(out + q * d_pad + c + k * W, acc[q][k]);
  }
  for (; c < d_pad; c += W) {
    VF acc[NQ];
    for (int q = 0; q < NQ; ++q)
      acc[q] = load(out + q * d_pad + c) * correction[q];
    for (std::size_t r = 0; r < rows; ++r) {
      const VF v = load(values + r * d_pad + c);
      for (int q = 0; q < NQ; ++q)
        acc[q] += splat(p[q * p_stride + r]) * v;
    }
    for (int q = 0; q < NQ; ++q)
      store(out + q * d_pad + c, acc[q]);
  }
}

}  // namespace

void decode_run(const DecodeRun& run) {
  const std::size_t d = run.d, d_pad = round_up(d, W);
  // Scratch kept per thread between calls: on this kind of machine a page fault costs
  // microseconds, and a decode step is only milliseconds long.
  thread_local std::vector<float> q, keys, values, p, correction;
  q.assign(run.count * d_pad, 0.0f);
  keys.resize(kBlock * d_pad);
  values.resize(kBlock * d_pad);
  p.resize(run.count * kBlock);  // scores, then 2^(score - max), per query
  correction.resize(run.count);
  for (std::size_t i = 0; i < run.count; ++i)
    for (std::size_t c = 0; c < d; ++c)
      q[i * d_pad + c] = run.queries[i * d + c] * run.log2_scale;
  for (std::size_t i = 0; i < run.count; ++i) {
    run.max[i] = kMinusInf;
    run.sum[i] = 0.0f;
    std::fill(run.out + i * d_pad, run.out + (i + 1) * d_pad, 0.0f);
  }
  const VI lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

  for (std::size_t j0 = run.first; j0 < run.end; j0 += kBlock) {
    const std::size_t rows = std::min(kBlock, run.end - j0), groups = (rows + W - 1) / W;
    convert_rows(run.keys, run.dtype, d, d_pad, j0, rows, run.end, Layout::blocks_of_16, keys.data());
    convert_rows(run.values, run.dtype, d, d_pad, j0, rows, run.end, Layout::rows, values.data());
    // Scores, 16 keys at a time for each query: the 16 keys stay in L1 for all queries.
    // (Rows past `rows` hold an earlier block's keys; their lanes are masked below.)
    for (std::size_t g = 0; g < groups; ++g)
      for (std::size_t i = 0; i < run.count; ++i) {
        const float* qi = q.data() + i * d_pad;
        const float* kg = keys.data() + g * W * d_pad;  // [d_pad / 16][16 keys][16 floats]
        VF acc[W] = {};
        for (std::size_t c = 0; c < d_pad; c += W, kg += W * W) {
          const VF qc = load(qi + c);
#pragma GCC unroll 16
          for (int k = 0; k < W; ++k)
            acc[k] += qc * load(kg + k * W);
        }
        store(p.data() + i * kBlock + g * W, sum16(acc));
      }
    // Online softmax per query: mask keys past the block or past the query's last visible
    // key, then rescale what came before by 2^(old max - new max).
    for (std::size_t i = 0; i < run.count; ++i) {
      float* pi = p.data() + i * kBlock;
      const std::size_t seen = run.last_visible[i] < j0 ? 0 : std::min(rows, run.last_visible[i] - j0 + 1);
      VF block_max = splat(kMinusInf);
      for (std::size_t g = 0; g < groups; ++g) {
        const VF s = load(pi + g * W);
        const VF x = lane < static_cast<int>(seen - std::min(seen, g * W)) ? s : splat(kMinusInf);
        store(pi + g * W, x);
        block_max = max_vec(block_max, x);
      }
      const float top = seen ? reduce_max(block_max) : kMinusInf;
      if (top == kMinusInf) {  // nothing visible here: leave the state as it is
        std::fill(pi, pi + groups * W, 0.0f);
        correction[i] = 1.0f;
        continue;
      }
      const float new_max = std::max(run.max[i], top);
      correction[i] = run.max[i] == kMinusInf ? 0.0f : std::exp2(run.max[i] - new_max);
      run.max[i] = new_max;
      VF sum = VF{};
      for (std::size_t g = 0; g < groups; ++g) {
        const VF e = exp2_vec(load(pi + g * W) - new_max);
        store(pi + g * W, e);
        sum += e;
      }
      run.sum[i] = run.sum[i] * correction[i] + reduce_add(sum);
    }
    // out = out · correction + p · V, four queries at a time.
    for (std::size_t i0 = 0; i0 < run.count; i0 += 4) {
      const std::size_t nq = std::min<std::size_t>(4, run.count - i0);
      const float* pi = p.data() + i0 * kBlock;
      float* o = run.out + i0 * d_pad;
      switch (nq) {
        case 4: mix_values<4>(values.data(), rows, d_pad, pi, kBlock, correction.data() + i0, o); break;
        case 3: mix_values<3>(values.data(), rows, d_pad, pi, kBlock, correction.data() + i0, o); break;
        case 2: mix_values<2>(values.data(), rows, d_pad, pi, kBlock, correction.data() + i0, o); break;
        default: mix_values<1>(values.data(), rows, d_pad, pi, kBlock, correction.data() + i0, o); break;
      }
    }
  }
}

}  // namespace attnlab::kernels::ATTNLAB_ISA
