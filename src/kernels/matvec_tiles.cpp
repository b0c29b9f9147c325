// The per-instruction-set part of the matrix–vector products (attnlab/kernels/matvec.hpp):
// a range of stored rows (dot products) or of columns (scaled rows added) for up to four
// rows of activations at once. Compiled once per instruction set, like flash_tiles.cpp.
//
// Every weight is read once and used for all the activation rows while it is in a register:
// a 16-bit value is widened there (simd.hpp's load_as_f32), and a quantized block is expanded
// there from its bytes, its integer values converted to f32 a vector at a time and multiplied
// by the activations; the block's scale multiplies the block's sum, once, instead of every
// value. A K-quant's per-sub-block offset (Q4_K: value = d·scale·q − dmin·min) multiplies the
// sub-block's sum of activations, computed once per call (matvec_prepare),
// instead of being subtracted from every value. Where the CPU has AVX2, or AVX-512 BF16 and
// VNNI, Q4_K's and Q5_K's products are int8 dot products instead (dot_k_row_int8,
// k_rows_int8_lanes: x within 2^-15 of each 32 values' largest), and with AVX-512 VNNI Q8_0's
// and Q6_K's are too (q8_0_rows_int8_lanes, q6_k_rows_int8_lanes).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/matvec.hpp"
#include "kernel_impl.hpp"
#include "simd.hpp"

namespace attnlab::kernels::ATTNLAB_ISA {

namespace {

typedef std::uint8_t VB __attribute__((vector_size(16)));  // up to 16 stored bytes
typedef std::int8_t VS __attribute__((vector_size(16)));   // the same as signed values

// W bytes, one a lane of a VF; the rest 0. One load of exactly W bytes: filling a zeroed VB
// through memory instead (memcpy) made the load wait for the stores before it (a wider read
// of a narrower store), which held the AVX2 build's Q8_0 generation at 9% of the bandwidth.
inline VB load_lane_bytes(const std::byte* p) {
#if defined(__SSE2__)
  __m128i v;
  if constexpr (W == 16) {
    v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else if constexpr (W == 8) {
    v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  } else {
    std::int32_t four;
    std::memcpy(&four, p, 4);
    v = _mm_cvtsi32_si128(four);
  }
  VB out;
  std::memcpy(&out, &v, sizeof out);
  return out;
#else
  VB v = {};
  std::memcpy(&v, p, W);
  return v;
#endif
}
// The first W bytes as floats, read as signed or unsigned: one widening and one conversion
// instruction each (vpmovsxbd / vpmovzxbd, vcvtdq2ps) where the build has AVX2 or AVX-512.
// (Written with intrinsics: GCC 12 turns a vector conversion of 8-bit lanes, a VB read from
// memory especially, into sixteen scalar conversions.)
template <bool Signed>
inline VF bytes_to_float(VB v) {
#if defined(__AVX512F__)
  __m128i b;
  std::memcpy(&b, &v, sizeof b);
  return bit_cast_vf(_mm512_cvtepi32_ps(Signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b)));
#elif defined(__AVX2__)
  __m128i b;
  std::memcpy(&b, &v, sizeof b);
  return bit_cast_vf(_mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b)));
#else
  VF out;
  for (int l = 0; l < W; ++l)
    out[l] = Signed ? float(std::int8_t(v[l])) : float(v[l]);
  return out;
#endif
}
inline VF to_float(VB v) { return bytes_to_float<false>(v); }
inline VF to_float(VS v) { return bytes_to_float<true>(VB(v)); }
inline float sum_lanes(VF v) { return all_lanes(v, add_vec)[0]; }
// A block's f16 scale: one instruction where the build has F16C (exact: every f16 is an
// f32), the library's conversion otherwise.
inline float half_at(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// Asks for the cache lines of [p, p + bytes) kAhead bytes further on, in the stream of rows a
// thread reads: with both cores reading, the hardware's own prefetching leaves each waiting
// on memory between its computations (2 cores, the products of a GPT-2-small-sized model
// without and with: Q4_K 500-530 -> 610-670 tokens/s, F16 35 -> 50-53 GB/s, F32 44-47 ->
// 49-52 GB/s; from 1 to 16 KiB ahead alike). The lines are asked for into L2, not L1
// (prefetcht2, locality 1): a prefetch into L1 holds one of the core's few L1 miss buffers
// until its line arrives, and the kernel's own loads then wait for a free one. On a
// 2-core Sapphire Rapids, 5632 × 2048 products over 40 matrices (260-490 MB, DRAM-resident),
// into L1 against into L2, four runs each in turn: Q4_K 14.2-15.1 -> 18.0-19.2 GB/s, Q5_K
// 13.8-14.4 -> 16.8-17.1, Q6_K 14.6-15.1 -> 16.6-17.2, Q8_0 and F16 unchanged (16.3-20.1,
// 16.2-17.4 both ways). A prefetch past the weights' end is harmless: prefetches never fault
// (the address is made as an integer: a pointer past the end would not be valid C++).
constexpr std::size_t kAhead = 4096;
inline void prefetch_ahead(const std::byte* p, std::size_t bytes) {
  const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(p) + kAhead;
  for (std::size_t at = 0; at < bytes; at += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + at), 0, 1);
}

constexpr DType dtype_of(RowFormat f) {
  return f == RowFormat::f16 ? DType::f16 : f == RowFormat::bf16 ? DType::bf16 : DType::f32;
}

// Row `row` (`length` values of a float type) · x_r for the N rows of x.
template <RowFormat F, int N>
void dot_float_row(const std::byte* row, std::size_t length, const float* x, std::size_t ldx, float (&out)[N]) {
  constexpr DType dtype = dtype_of(F);
  VF acc[N][2] = {};  // two sums a row: each FMA waits on the one before it in the same sum
  std::size_t i = 0;
  for (; i + 2 * W <= length; i += 2 * W) {
    const VF w0 = load_as_f32<dtype>(row, i), w1 = load_as_f32<dtype>(row, i + W);
    for (int r = 0; r < N; ++r) {
      acc[r][0] += w0 * load(x + r * ldx + i);
      acc[r][1] += w1 * load(x + r * ldx + i + W);
    }
  }
  if (i < length) {  // up to 2W - 1 values left: a whole vector, then the zero-padded rest
    for (; i < length; i += W) {
      const std::size_t left = std::min<std::size_t>(W, length - i);
      const VF w = left == W ? load_as_f32<dtype>(row, i) : load_tail<dtype>(row, i, left);
      for (int r = 0; r < N; ++r) {
        float padded[W] = {};
        std::memcpy(padded, x + r * ldx + i, left * sizeof(float));
        acc[r][0] += w * load(padded);
      }
    }
  }
  for (int r = 0; r < N; ++r)
    out[r] = sum_lanes(acc[r][0] + acc[r][1]);
}

// Q8_0: blocks of 32 int8 values q and an f16 scale d; value = d · q.
template <int N>
void dot_q8_0_row(const std::byte* row, std::size_t length, const float* x, std::size_t ldx, float (&out)[N]) {
  VF acc[N] = {};
  for (std::size_t b = 0; b < length / 32; ++b) {
    const std::byte* block = row + b * 34;
    const VF d = splat(half_at(block));
    VF q[32 / W];
    for (int l = 0; l < 32 / W; ++l)
      q[l] = to_float(VS(load_lane_bytes(block + 2 + l * W)));
    for (int r = 0; r < N; ++r) {
      const float* xb = x + r * ldx + b * 32;
      VF sum = q[0] * load(xb);
      for (int l = 1; l < 32 / W; ++l)
        sum += q[l] * load(xb + l * W);
      acc[r] += sum * d;
    }
  }
  for (int r = 0; r < N; ++r)
    out[r] = sum_lanes(acc[r]);
}

// Q4_K: super-blocks of 256 values (144 bytes): f16 d and dmin, 12 bytes of eight 6-bit
// (scale, min) pairs, 128 bytes of 4-bit q. Each 64 values take 32 bytes: the low nibbles
// are values 0-31 (sub-block 2j), the high ones 32-63 (sub-block 2j + 1).
// value = d · scale_s · q − dmin · min_s, so a sub-block's share of the dot product is
// d · scale_s · Σ q·x − dmin · min_s · Σ x, the last sum from xp.sums32 [N × length/32].
// Q5_K (176 bytes) is the same with a fifth bit of each q, 16, in 32 bytes qh between the
// scales and the nibbles: value l of sub-block s has bit s of qh[l].
template <RowFormat F>
struct KQuant {
  static constexpr bool five_bits = F == RowFormat::q5_k;
  static constexpr std::size_t bytes = five_bits ? 176 : 144, nibbles = five_bits ? 48 : 16;
};

template <RowFormat F, int N>
void dot_k_row(const std::byte* row, std::size_t length, const float* x, std::size_t ldx,
               const kernels::PreparedRows& xp, float (&out)[N]) {
  using Q = KQuant<F>;
  const std::size_t lds = length / 32;
  const float* sums = xp.sums32;
  VF acc[N] = {};
  float offsets[N] = {};
  for (std::size_t b = 0; b < length / 256; ++b) {
    const std::byte* block = row + b * Q::bytes;
    const float d = half_at(block), dmin = half_at(block + 2);
    const auto* scales = reinterpret_cast<const std::uint8_t*>(block + 4);
    const std::byte* qs = block + Q::nibbles;
    for (std::size_t j = 0; j < 4; ++j) {
      float s1, m1, s2, m2;
      k_scale_and_min(scales, 2 * j, s1, m1);
      k_scale_and_min(scales, 2 * j + 1, s2, m2);
      VF lo[32 / W], hi[32 / W];  // values 0-31 of the 64, and 32-63
      for (int l = 0; l < 32 / W; ++l) {
        VB q_lo = load_lane_bytes(qs + j * 32 + l * W), q_hi = q_lo >> 4;
        q_lo &= 15;
        if constexpr (Q::five_bits) {
          const VB top = load_lane_bytes(block + 16 + l * W);  // qh: bits 2j and 2j + 1 are these two's
          q_lo |= ((top >> (2 * j)) & 1) << 4, q_hi |= ((top >> (2 * j + 1)) & 1) << 4;
        }
        lo[l] = to_float(q_lo), hi[l] = to_float(q_hi);
      }
      const VF scale1 = splat(d * s1), scale2 = splat(d * s2);
      const std::size_t group = b * 8 + 2 * j;
      for (int r = 0; r < N; ++r) {
        const float* xb = x + r * ldx + b * 256 + j * 64;
        VF low_sum = lo[0] * load(xb), high_sum = hi[0] * load(xb + 32);
        for (int l = 1; l < 32 / W; ++l) {
          low_sum += lo[l] * load(xb + l * W);
          high_sum += hi[l] * load(xb + 32 + l * W);
        }
        acc[r] += low_sum * scale1 + high_sum * scale2;
        offsets[r] += dmin * (m1 * sums[r * lds + group] + m2 * sums[r * lds + group + 1]);
      }
    }
  }
  for (int r = 0; r < N; ++r)
    out[r] = sum_lanes(acc[r]) - offsets[r];
}

#if defined(__AVX2__)
// The eight (scale, min) pairs as 16 bytes, scales then mins, decoded four bytes at a time:
// for the first four, the low six bits of bytes 0-3 (scales) and 4-7 (mins); for the last
// four, bytes 8-11's low nibbles (scales) and high nibbles (mins), each with two more bits on
// top from the top two bits of bytes 0-3 (scales) and 4-7 (mins) (k_scale_and_min in
// matvec.hpp reads the same a pair at a time).
inline __m128i k_scales_and_mins(const std::byte* packed) {
  __m128i v;  // its 32-bit lanes 0-2: bytes 0-3 (b0), 4-7 (b1), 8-11 (b2); lane 3 the q that follow
  std::memcpy(&v, packed, 16);
  const __m128i low = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // b0, b2, b1, b2
  const __m128i top = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // b0, b0, b1, b1
  const __m128i six_or_four = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
  const __m128i two = _mm_setr_epi32(0, 0x03030303, 0, 0x03030303);
  return _mm_or_si128(_mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)), six_or_four),
                      _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(top, 6), two), 4));
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
// x's int8 parts for dot_k_row_int8 (AVX2), each 32 values as s·(h + l/256) as the AVX-512
// kernel holds them (k_rows_int8_lanes says how and how close), in their own order: hi and
// lo [length], scale [length / 32]. False where a group holds a non-finite value, or all its
// values are nonzero and below 2^-100: the f32 kernel takes those rows.
bool int8_parts_of_row(const float* x, std::size_t length, std::int8_t* hi, std::int8_t* lo, float* scale) {
  for (std::size_t g = 0; g < length / 32; ++g) {
    const float* xg = x + g * 32;
    float largest = 0;
    for (int i = 0; i < 32; ++i) {
      if (!std::isfinite(xg[i])) return false;
      largest = std::max(largest, std::fabs(xg[i]));
    }
    if (largest != 0.0f && largest < 0x1p-100f) return false;
    const float inverse = largest == 0.0f ? 0.0f : 127.0f / largest;
    scale[g] = largest / 127.0f;
    for (int i = 0; i < 32; ++i) {
      const float scaled = xg[i] * inverse;  // within ±127
      const float h = std::nearbyint(scaled);
      hi[g * 32 + i] = static_cast<std::int8_t>(h);
      lo[g * 32 + i] = static_cast<std::int8_t>(std::clamp(std::lrint(256.0f * (scaled - h)), -127L, 127L));
    }
  }
  return true;
}

void prepare_int8_parts(const float* x, std::size_t n, std::size_t ldx, std::size_t length, kernels::PreparedX& out) {
  const std::size_t groups = length / 32;
  out.hi8.resize(n * length), out.lo8.resize(n * length), out.scale8.resize(n * groups);
  for (std::size_t r = 0; r < n; ++r)
    if (!int8_parts_of_row(x + r * ldx, length, &out.hi8[r * length], &out.lo8[r * length], &out.scale8[r * groups])) {
      out.hi8.clear(), out.lo8.clear(), out.scale8.clear();
      return;
    }
}

// Q4_K by int8 products on AVX2 (no VNNI): each sub-block's Σ q·h and Σ q·l by vpmaddubsw
// (pairs of an unsigned q and a signed byte of x summed in int16: at most 2·15·127) and
// vpmaddwd (pairs of those into int32, the h sums times 256), so S = 256·Σ q·h + Σ q·l
// exact in int32 (and in f32: each lane's share below 2^21), and the row's product
//   Σ_s d·scale_s·s_s/256 · S_s − dmin·min_s · Σ x  (Σ x from xp.sums32).
// Widening each weight to f32 took 16 instructions a 32 values and a row of x; this takes 8.
// A 32-byte load of q holds sub-block 2j in its low nibbles and 2j + 1 in its high ones.
// Q5_K the same, each q's fifth bit added from qh.
template <RowFormat F, int N>
void dot_k_row_int8(const std::byte* row, std::size_t length, const kernels::PreparedRows& xp, float (&out)[N]) {
  using Q = KQuant<F>;
  const std::size_t groups = length / 32;
  const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1), by256 = _mm256_set1_epi16(256);
  __m256 acc[N], offsets[N];
  for (int r = 0; r < N; ++r)
    acc[r] = _mm256_setzero_ps(), offsets[r] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < length / 256; ++b) {
    const std::byte* block = row + b * Q::bytes;
    const __m128i scales_mins = k_scales_and_mins(block + 4);  // bytes 0-7 the scales, 8-15 the mins
    const __m256 scales =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scales_mins)), _mm256_set1_ps(half_at(block) / 256));
    const __m256 mins = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(scales_mins, 8))),
                                      _mm256_set1_ps(half_at(block + 2)));
    __m256i q[8];  // sub-block s's 32 values, one a byte
    for (int j = 0; j < 4; ++j) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + Q::nibbles + 32 * j));
      q[2 * j] = _mm256_and_si256(bytes, nibble);
      q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
    }
    if constexpr (Q::five_bits) {  // sub-block s's fifth bits: bit s of each of qh's bytes, moved to bit 4
      const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16)), one = _mm256_set1_epi8(1);
      for (int sub = 0; sub < 8; ++sub)
        q[sub] = _mm256_or_si256(q[sub], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(top, sub), one), 4));
    }
    for (int r = 0; r < N; ++r) {
      const std::size_t group = r * groups + b * 8;
      offsets[r] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(xp.sums32 + group), offsets[r]);
      const __m256 factors = _mm256_mul_ps(scales, _mm256_loadu_ps(xp.scale8 + group));  // one a sub-block
      const std::int8_t* h = xp.hi8 + r * length + b * 256;
      const std::int8_t* l = xp.lo8 + r * length + b * 256;
      for (int sub = 0; sub < 8; ++sub) {
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 32 * sub));
        const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l + 32 * sub));
        const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q[sub], high), by256),
                                              _mm256_madd_epi16(_mm256_maddubs_epi16(q[sub], low), ones));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_permutevar8x32_ps(factors, _mm256_set1_epi32(sub)),
                                 acc[r]);
      }
    }
  }
  for (int r = 0; r < N; ++r)
    out[r] = sum_lanes(bit_cast_vf(acc[r])) - sum_lanes(bit_cast_vf(offsets[r]));
}
#endif

#if defined(ATTNLAB_HAS_BF16)
// Q4_K by int8 dot products (vpdpbusd: 64 products of an unsigned and a signed byte an
// instruction, summed four at a time in int32 lanes), for CPUs with AVX-512 VNNI, where
// widening every weight to f32 costs more than reading it. matvec_prepare holds each 32
// values of x (one Q4_K sub-block) as s·(h + l/256): s = max|x|/127, h = round(x/s),
// l = round(256·(x/s − h)) held within ±127, both int8, so that
//   |x − s·(h + l/256)| ≤ s/256 = max|x|/32512  (2^-15 of the 32's largest value).
// A sub-block's Σ q·x is then s/256 · S, S = 256·Σ q·h + Σ q·l, exact in int32 (|S| at most
// 32·15·(256·127 + 127), and each lane's share below 2^24, so exact in f32 too), and its share
// of the row's product
//   d·scale_s·s_s/256 · S_s − dmin·min_s · Σ x,
// Σ x (exact, from xp.sums32) for the offsets, which are one 8-lane FMA a super-block.
// A 64-byte load of q holds sub-blocks 0 and 2 in its low nibbles and 1 and 3 in its high
// ones; the prepared x keeps each super-block's groups of 32 in the order 0, 2, 1, 3, 4, 6,
// 5, 7, so that each product meets its values in one 64-byte load, and its int32 lanes 0-7
// and 8-15 are two sub-blocks, scaled by one vector of their two factors.

// The products of R weight rows (`stride` bytes apart, from `row`) with the N rows of x,
// each as 16 lanes to be summed (lanes[k][r]: weight row k, x row r). Each row's q is
// unpacked once for the N rows of x, and x's parts are loaded once for the R weight rows.
// Generation (N = 1) takes two weight rows at a time: on this project's AMD EPYC a
// super-block then takes one core 14 timestamp ticks instead of 20-22 (R = 1; R = 4 spills
// registers to the stack: 15-17), measured on rows in L2.
// Q5_K the same, each q's fifth bit added from qh (bit s of its bytes for sub-block s).
template <RowFormat F, int R, int N>
__attribute__((always_inline)) inline void k_rows_int8_lanes(const std::byte* row, std::size_t stride,
                                                             std::size_t length, const kernels::PreparedRows& xp,
                                                             __m512 (&lanes)[R][N]) {
  using Q = KQuant<F>;
  const std::size_t groups = length / 32;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const auto pair = [](int a, int b) { return _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b); };
  const __m512i pairs[4] = {pair(0, 2), pair(1, 3), pair(4, 6), pair(5, 7)};  // the sub-blocks of products 0-3
  __m512 acc[R][N];
  __m256 offsets[R][N];
  for (int k = 0; k < R; ++k)
    for (int r = 0; r < N; ++r)
      acc[k][r] = _mm512_setzero_ps(), offsets[k][r] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < length / 256; ++b) {
    __m256 scales[R], mins[R];
    __m512i q[R][4];
    for (int k = 0; k < R; ++k) {
      const std::byte* block = row + k * stride + b * Q::bytes;
      prefetch_ahead(block, Q::bytes);
      const __m512 scales_mins = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(k_scales_and_mins(block + 4)));
      scales[k] = _mm256_mul_ps(_mm512_castps512_ps256(scales_mins), _mm256_set1_ps(half_at(block) / 256));
      mins[k] = _mm256_mul_ps(_mm512_extractf32x8_ps(scales_mins, 1), _mm256_set1_ps(half_at(block + 2)));
      const __m512i q01 = _mm512_loadu_si512(block + Q::nibbles), q23 = _mm512_loadu_si512(block + Q::nibbles + 64);
      q[k][0] = _mm512_and_si512(q01, nibble), q[k][1] = _mm512_and_si512(_mm512_srli_epi16(q01, 4), nibble);
      q[k][2] = _mm512_and_si512(q23, nibble), q[k][3] = _mm512_and_si512(_mm512_srli_epi16(q23, 4), nibble);
      if constexpr (Q::five_bits) {  // product c's halves are sub-blocks pairs[c]: bits of qh, in both halves
        const __m512i top = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16)));
        const auto bits = [](int a, int b) {
          return _mm512_inserti64x4(_mm512_set1_epi8(char(1 << a)), _mm256_set1_epi8(char(1 << b)), 1);
        };
        const __m512i sixteen = _mm512_set1_epi8(16), which[4] = {bits(0, 2), bits(1, 3), bits(4, 6), bits(5, 7)};
        for (int c = 0; c < 4; ++c)
          q[k][c] = _mm512_mask_add_epi8(q[k][c], _mm512_test_epi8_mask(top, which[c]), q[k][c], sixteen);
      }
    }
    for (int r = 0; r < N; ++r) {
      const std::size_t group = r * groups + b * 8;
      const __m256 x_scales = _mm256_loadu_ps(xp.scale8 + group), x_sums = _mm256_loadu_ps(xp.sums32 + group);
      __m512 factors[R];
      for (int k = 0; k < R; ++k) {
        offsets[k][r] = _mm256_fmadd_ps(mins[k], x_sums, offsets[k][r]);
        factors[k] = _mm512_zextps256_ps512(_mm256_mul_ps(scales[k], x_scales));
      }
      const std::int8_t* h = xp.hi8 + r * length + b * 256;
      const std::int8_t* l = xp.lo8 + r * length + b * 256;
      for (int c = 0; c < 4; ++c) {
        const __m512i high8 = _mm512_loadu_si512(h + 64 * c), low8 = _mm512_loadu_si512(l + 64 * c);
        for (int k = 0; k < R; ++k) {
          const __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k][c], high8);
          const __m512i sums = _mm512_dpbusd_epi32(_mm512_slli_epi32(high, 8), q[k][c], low8);
          acc[k][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(pairs[c], factors[k]), acc[k][r]);
        }
      }
    }
  }
  for (int k = 0; k < R; ++k)
    for (int r = 0; r < N; ++r)
      lanes[k][r] = _mm512_sub_ps(acc[k][r], _mm512_zextps256_ps512(offsets[k][r]));
}

// Q8_0 by int8 dot products (vpdpbusd), for CPUs with AVX-512 VNNI: widening each weight to
// f32 costs about ten instructions per 34-byte block, and generation then waits on them
// instead of on memory. x is held per 32 values as s·(h + l/256), as for Q4_K but in the
// values' own order (PreparedX's hi8_in_order, lo8_in_order). vpdpbusd multiplies an unsigned
// byte by a signed one, and Q8_0's q is signed: it takes q + 128, and the offsets x was prepared with,
// 128·Σ(256·h + l) over each lane's four values, are subtracted in int32. So a block's
//   Σ q·x = s/256 · Σ q·(256·h + l),
// each lane's share exact in int32 and in f32 (|q| ≤ 128 and |256·h + l| ≤ 32639: four of
// them below 2^24), scaled by d·s/256 once a block. Two blocks (68 bytes) fill a 64-byte
// vector of q, lanes 0-7 the first block's, 8-15 the second's; a row of an odd number of
// blocks ends with one in the lower half.
template <int R, int N>
__attribute__((always_inline)) inline void q8_0_rows_int8_lanes(const std::byte* row, std::size_t stride,
                                                                std::size_t length, const kernels::PreparedRows& xp,
                                                                __m512 (&lanes)[R][N]) {
  const std::size_t blocks = length / 32;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));  // q + 128: the sign bit flipped
  __m512 acc[R][N];
  for (int k = 0; k < R; ++k)
    for (int r = 0; r < N; ++r)
      acc[k][r] = _mm512_setzero_ps();
  // Each 16 blocks' scales at once: their 16 f16 d (a gather, 34 bytes apart) times x's 16
  // scales, one vector of factors per weight row and row of x; a pair's two factors are then
  // one permute of it (lanes 0-7 the pair's first block's, 8-15 its second's).
  const __m512i d_at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(34));
  for (std::size_t b16 = 0; b16 < blocks; b16 += 16) {
    const std::size_t here = std::min<std::size_t>(16, blocks - b16);
    const __mmask16 live = __mmask16((1u << here) - 1);
    __m512 factors16[R][N];
    for (int k = 0; k < R; ++k) {
      const __m512i halves =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, d_at, row + k * stride + b16 * 34, 1);
      const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(halves)), _mm512_set1_ps(1.0f / 256));
      for (int r = 0; r < N; ++r)
        factors16[k][r] = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(live, xp.scale8 + r * blocks + b16));
    }
    for (std::size_t b = b16; b < b16 + here; b += 2) {
      const bool pair = b + 1 < blocks;
      const int first = int(b - b16);
      const __m512i which = _mm512_inserti64x4(_mm512_set1_epi32(first), _mm256_set1_epi32(first + 1), 1);
      __m512i q[R];
      for (int k = 0; k < R; ++k) {
        const std::byte* block = row + k * stride + b * 34;
        prefetch_ahead(block, 68);
        const __m256i first_q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        const __m256i second_q =
            pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 36)) : _mm256_set1_epi8(-128);
        q[k] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(first_q), second_q, 1),
                                flip);  // 0 past a lone block
      }
      const __mmask64 bytes = pair ? ~__mmask64{0} : __mmask64{0xFFFFFFFF};
      for (int r = 0; r < N; ++r) {
        const __m512i h = _mm512_maskz_loadu_epi8(bytes, xp.hi8_in_order + r * length + b * 32),
                      l = _mm512_maskz_loadu_epi8(bytes, xp.lo8_in_order + r * length + b * 32),
                      offsets = _mm512_maskz_loadu_epi32(pair ? 0xFFFF : 0x00FF,
                                                         xp.offsets_in_order + r * (length / 4) + b * 8);
        for (int k = 0; k < R; ++k) {
          const __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], h);
          const __m512i sums = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_slli_epi32(high, 8), q[k], l), offsets);
          acc[k][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(which, factors16[k][r]),
                                      acc[k][r]);  // (a lone block's second half: 0 · 0)
        }
      }
    }
  }
  for (int k = 0; k < R; ++k)
    for (int r = 0; r < N; ++r)
      lanes[k][r] = acc[k][r];
}

// Q6_K by int8 dot products (vpdpbusd), for CPUs with AVX-512 VNNI, x in the same parts as for
// Q8_0. A super-block of 256 values (210 bytes): 128 bytes of low nibbles, 64 of high bit
// pairs, 16 int8 scales (one a 16 values), f16 d; value = d · scale · (q − 32), q in 0..63.
// Each 128 values' 64 bytes of nibbles, loaded whole, hold in their low nibbles values 0-63
// and in their high ones 64-127 (in order), their top two bits from the half's 32 bytes qh:
// bits 0-1 of qh[l] for value l, 2-3 for 32 + l, 4-5 for 64 + l, 6-7 for 96 + l. The unsigned
// q meets x's parts as Q8_0's q + 128 does, and the offsets x was prepared with, 128 times
// each lane's Σ(256·h + l), are a quarter of what is subtracted here: 32·Σ(256·h + l). Each
// lane's sum is exact (four q of at most 63, |256·h + l| ≤ 32639: below 2^24), and is scaled
// by d · scale · s/256, a 16's scale in four lanes and a 32's s in eight.
template <int R, int N>
__attribute__((always_inline)) inline void q6_k_rows_int8_lanes(const std::byte* row, std::size_t stride,
                                                                std::size_t length, const kernels::PreparedRows& xp,
                                                                __m512 (&lanes)[R][N]) {
  const std::size_t groups = length / 32;
  const __m512i nibble = _mm512_set1_epi8(0x0F), three = _mm512_set1_epi8(3);
  const auto halves = [](short a, short b) {  // 16-bit lanes: a in the lower 256 bits, b in the upper
    return _mm512_inserti64x4(_mm512_set1_epi16(a), _mm256_set1_epi16(b), 1);
  };
  const __m512i low_shift = halves(0, 2), high_shift = halves(4, 6);  // where each value's top bits lie in qh
  const auto fours = [](int c) {  // scale index of each lane: sub-blocks 4c..4c+3, four lanes each
    return _mm512_setr_epi32(4 * c, 4 * c, 4 * c, 4 * c, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 2,
                             4 * c + 2, 4 * c + 2, 4 * c + 2, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3);
  };
  const __m512i scale_at[4] = {fours(0), fours(1), fours(2), fours(3)};
  const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[R][N];
  for (int k = 0; k < R; ++k)
    for (int r = 0; r < N; ++r)
      acc[k][r] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < length / 256; ++b) {
    __m512 scales[R];  // d · scale / 256, one a 16 values
    __m512i q[R][4];   // values 64c..64c + 63 in q[k][c]
    for (int k = 0; k < R; ++k) {
      const std::byte* block = row + k * stride + b * 210;
      prefetch_ahead(block, 210);
      scales[k] = _mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192)))),
          _mm512_set1_ps(half_at(block + 208) / 256));
      for (int half = 0; half < 2; ++half) {
        const __m512i ql = _mm512_loadu_si512(block + 64 * half);
        const __m512i qh =
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 128 + 32 * half)));
        const auto top = [&](__m512i shift) {  // the two bits, to bits 4-5 of each byte
          return _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift), three), 4);
        };
        q[k][2 * half] = _mm512_or_si512(_mm512_and_si512(ql, nibble), top(low_shift));
        q[k][2 * half + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble), top(high_shift));
      }
    }
    for (int r = 0; r < N; ++r)
      for (int c = 0; c < 4; ++c) {
        const std::size_t at = r * length + b * 256 + 64 * c;
        const __m512i h = _mm512_loadu_si512(xp.hi8_in_order + at), l = _mm512_loadu_si512(xp.lo8_in_order + at);
        const __m512i offsets = _mm512_srai_epi32(_mm512_loadu_si512(xp.offsets_in_order + at / 4), 2);
        const __m512 x_scales = _mm512_permutexvar_ps(
            pair, _mm512_castps128_ps512(_mm_castsi128_ps(
                      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xp.scale8 + r * groups + b * 8 + 2 * c)))));
        for (int k = 0; k < R; ++k) {
          const __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k][c], h);
          const __m512i sums = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_slli_epi32(high, 8), q[k][c], l), offsets);
          const __m512 factors = _mm512_mul_ps(_mm512_permutexvar_ps(scale_at[c], scales[k]), x_scales);
          acc[k][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), factors, acc[k][r]);
        }
      }
  }
  for (int k = 0; k < R; ++k)
    for (int r = 0; r < N; ++r)
      lanes[k][r] = acc[k][r];
}

// The int8 products' lanes, as dot_int8_rows takes them.
template <RowFormat F>
struct KLanes {
  template <int R, int N>
  static void of(const std::byte* row, std::size_t stride, std::size_t length, const kernels::PreparedRows& xp,
                 __m512 (&lanes)[R][N]) {
    k_rows_int8_lanes<F, R, N>(row, stride, length, xp, lanes);
  }
};
struct Q6KLanes {
  template <int R, int N>
  static void of(const std::byte* row, std::size_t stride, std::size_t length, const kernels::PreparedRows& xp,
                 __m512 (&lanes)[R][N]) {
    q6_k_rows_int8_lanes<R, N>(row, stride, length, xp, lanes);
  }
};
struct Q80Lanes {
  template <int R, int N>
  static void of(const std::byte* row, std::size_t stride, std::size_t length, const kernels::PreparedRows& xp,
                 __m512 (&lanes)[R][N]) {
    q8_0_rows_int8_lanes<R, N>(row, stride, length, xp, lanes);
  }
};

// The sums of four vectors' lanes, a's to d's, in one: a row's sum alone (_mm512_reduce_add_ps)
// takes as many shuffles as four rows' do here.
inline __m128 sum_lanes_of_four(__m512 a, __m512 b, __m512 c, __m512 d) {
  // Halves added ([a, b] and [c, d], 8 lanes each), then quarters (4 lanes each of a, b, c,
  // d), then within each 128-bit block.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  const __m512 abcd = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  const __m512 pairs = _mm512_add_ps(abcd, _mm512_permute_ps(abcd, 0x4E));
  const __m512 sums = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, 0xB1));  // lane 4k: block k's sum
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), sums));
}

// Rows [first, last) of w (Q4_K, Q5_K, Q6_K or Q8_0, Lanes the kernel of its format) by the N
// rows of x: four rows at a time, summed together (one row of x: as two pairs of weight rows).
template <class Lanes, int N>
void dot_int8_rows(const StoredRows& w, std::size_t first, std::size_t last, const kernels::PreparedRows& xp, float* y,
                   std::size_t ldy, float beta) {
  const auto store = [&](std::size_t c, int r, float sum) {
    y[r * ldy + c] = beta == 0.0f ? sum : beta * y[r * ldy + c] + sum;
  };
  const auto at = [&](std::size_t c) { return w.data + c * w.stride; };
  std::size_t c = first;
  for (; c + 4 <= last; c += 4) {
    __m512 lanes[4][N];  // weight row c + k by x row r
    if constexpr (N == 1) {
      __m512 first_pair[2][1], second_pair[2][1];
      Lanes::template of<2, 1>(at(c), w.stride, w.length, xp, first_pair);
      Lanes::template of<2, 1>(at(c + 2), w.stride, w.length, xp, second_pair);
      lanes[0][0] = first_pair[0][0], lanes[1][0] = first_pair[1][0];
      lanes[2][0] = second_pair[0][0], lanes[3][0] = second_pair[1][0];
    } else {
      for (int k = 0; k < 4; ++k) {
        __m512 one[1][N];
        Lanes::template of<1, N>(at(c + k), w.stride, w.length, xp, one);
        for (int r = 0; r < N; ++r)
          lanes[k][r] = one[0][r];
      }
    }
    for (int r = 0; r < N; ++r) {
      alignas(16) float sums[4];
      _mm_store_ps(sums, sum_lanes_of_four(lanes[0][r], lanes[1][r], lanes[2][r], lanes[3][r]));
      for (int k = 0; k < 4; ++k)
        store(c + k, r, sums[k]);
    }
  }
  for (; c < last; ++c) {
    __m512 lanes[1][N];
    Lanes::template of<1, N>(at(c), w.stride, w.length, xp, lanes);
    for (int r = 0; r < N; ++r)
      store(c, r, _mm512_reduce_add_ps(lanes[0][r]));
  }
}

#endif

// Q6_K: super-blocks of 256 values (210 bytes): 128 bytes of low 4 bits (ql), 64 of high 2
// bits (qh), 16 int8 scales, an f16 d; value = d · scale · (q − 32). Each 128 values take 64
// bytes of ql and 32 of qh: for l < 32, ql[l]'s low nibble and qh[l]'s bits 0-1 make value
// l, ql[l + 32]'s low nibble and bits 2-3 value l + 32, ql[l]'s high nibble and bits 4-5
// value l + 64, ql[l + 32]'s high nibble and bits 6-7 value l + 96; a scale per 16 values.
template <int N>
void dot_q6_k_row(const std::byte* row, std::size_t length, const float* x, std::size_t ldx, float (&out)[N]) {
  VF acc[N] = {};
  for (std::size_t b = 0; b < length / 256; ++b) {
    const std::byte* block = row + b * 210;
    const std::byte* ql = block;
    const std::byte* qh = block + 128;
    const auto* scales = reinterpret_cast<const std::int8_t*>(block + 192);
    const float d = half_at(block + 208);
    for (std::size_t half = 0; half < 2; ++half) {
      for (std::size_t l0 = 0; l0 < 32; l0 += W) {
        const VB a = load_lane_bytes(ql + half * 64 + l0), c = load_lane_bytes(ql + half * 64 + 32 + l0);
        const VB h = load_lane_bytes(qh + half * 32 + l0);
        const VF q[4] = {
            to_float(VS((a & 15) | ((h & 3) << 4)) - 32), to_float(VS((c & 15) | (((h >> 2) & 3) << 4)) - 32),
            to_float(VS((a >> 4) | (((h >> 4) & 3) << 4)) - 32), to_float(VS((c >> 4) | (((h >> 6) & 3) << 4)) - 32)};
        const std::size_t first = b * 256 + half * 128 + l0, scale = half * 8 + l0 / 16;
        for (int k = 0; k < 4; ++k) {
          const VF s = splat(d * float(scales[scale + 2 * k]));
          for (int r = 0; r < N; ++r)
            acc[r] += q[k] * load(x + r * ldx + first + 32 * k) * s;
        }
      }
    }
  }
  for (int r = 0; r < N; ++r)
    out[r] = sum_lanes(acc[r]);
}

template <RowFormat F, int N>
void dot_rows_as(const StoredRows& w, std::size_t first, std::size_t last, const float* x, std::size_t ldx,
                 const kernels::PreparedRows& xp, float* y, std::size_t ldy, float beta) {
#if defined(ATTNLAB_HAS_BF16)
  if constexpr (F == RowFormat::q4_k || F == RowFormat::q5_k)
    if (xp.hi8) return dot_int8_rows<KLanes<F>, N>(w, first, last, xp, y, ldy, beta);
  if constexpr (F == RowFormat::q8_0)
    if (xp.hi8_in_order) return dot_int8_rows<Q80Lanes, N>(w, first, last, xp, y, ldy, beta);
  if constexpr (F == RowFormat::q6_k)
    if (xp.hi8_in_order) return dot_int8_rows<Q6KLanes, N>(w, first, last, xp, y, ldy, beta);
#endif
  for (std::size_t c = first; c < last; ++c) {
    const std::byte* row = w.data + c * w.stride;
    prefetch_ahead(row, w.stride);
    float out[N];
    if constexpr (F == RowFormat::q8_0)
      dot_q8_0_row<N>(row, w.length, x, ldx, out);
    else if constexpr (F == RowFormat::q4_k || F == RowFormat::q5_k) {
#if defined(__AVX2__) && !defined(__AVX512F__)
      if (xp.hi8) {
        dot_k_row_int8<F, N>(row, w.length, xp, out);
      } else
#endif
        dot_k_row<F, N>(row, w.length, x, ldx, xp, out);
    } else if constexpr (F == RowFormat::q6_k) {
      dot_q6_k_row<N>(row, w.length, x, ldx, out);
    } else
      dot_float_row<F, N>(row, w.length, x, ldx, out);
    for (int r = 0; r < N; ++r)
      y[r * ldy + c] = beta == 0.0f ? out[r] : beta * y[r * ldy + c] + out[r];
  }
}

template <int N>
void dot_rows_n(const StoredRows& w, std::size_t first, std::size_t last, const float* x, std::size_t ldx,
                const kernels::PreparedRows& xp, float* y, std::size_t ldy, float beta) {
  switch (w.format) {
    case RowFormat::f32: return dot_rows_as<RowFormat::f32, N>(w, first, last, x, ldx, xp, y, ldy, beta);
    case RowFormat::f16: return dot_rows_as<RowFormat::f16, N>(w, first, last, x, ldx, xp, y, ldy, beta);
    case RowFormat::bf16: return dot_rows_as<RowFormat::bf16, N>(w, first, last, x, ldx, xp, y, ldy, beta);
    case RowFormat::q8_0: return dot_rows_as<RowFormat::q8_0, N>(w, first, last, x, ldx, xp, y, ldy, beta);
    case RowFormat::q4_k: return dot_rows_as<RowFormat::q4_k, N>(w, first, last, x, ldx, xp, y, ldy, beta);
    case RowFormat::q5_k: return dot_rows_as<RowFormat::q5_k, N>(w, first, last, x, ldx, xp, y, ldy, beta);
    case RowFormat::q6_k: return dot_rows_as<RowFormat::q6_k, N>(w, first, last, x, ldx, xp, y, ldy, beta);
  }
}

// y [N × w.length] (+)= x [N × w.count] · W: each stored row scaled by its x and added.
template <RowFormat F, int N>
void axpy_rows_as(const StoredRows& w, const float* x, std::size_t ldx, float* y, std::size_t ldy, float beta) {
  constexpr DType dtype = dtype_of(F);
  const std::size_t length = w.length;
  for (int r = 0; r < N; ++r)
    for (std::size_t c = 0; c < length; ++c)
      y[r * ldy + c] = beta == 0.0f ? 0.0f : beta * y[r * ldy + c];
  for (std::size_t i = 0; i < w.count; ++i) {
    const std::byte* row = w.data + i * w.stride;
    VF xi[N];
    for (int r = 0; r < N; ++r)
      xi[r] = splat(x[r * ldx + i]);
    std::size_t c = 0;
    for (; c + W <= length; c += W) {
      const VF v = load_as_f32<dtype>(row, c);
      for (int r = 0; r < N; ++r)
        store(y + r * ldy + c, load(y + r * ldy + c) + xi[r] * v);
    }
    if (c < length) {
      const VF v = load_tail<dtype>(row, c, length - c);
      for (int r = 0; r < N; ++r)
        for (std::size_t l = 0; l < length - c; ++l)
          y[r * ldy + c + l] += xi[r][0] * v[l];
    }
  }
}

template <int N>
void axpy_rows_n(const StoredRows& w, const float* x, std::size_t ldx, float* y, std::size_t ldy, float beta) {
  switch (w.format) {
    case RowFormat::f16: return axpy_rows_as<RowFormat::f16, N>(w, x, ldx, y, ldy, beta);
    case RowFormat::bf16: return axpy_rows_as<RowFormat::bf16, N>(w, x, ldx, y, ldy, beta);
    default: return axpy_rows_as<RowFormat::f32, N>(w, x, ldx, y, ldy, beta);
  }
}

#if defined(ATTNLAB_HAS_BF16)
// x's int8 parts for k_rows_int8_lanes; none kept where a group of 32 values holds a
// non-finite value, or all its values are nonzero and below 2^-100 (where s and the factors
// would fall among f32's subnormals): the f32 kernel takes those.
// One row of x as int8 parts, hi and lo [length] and scale [length / 32] (and, where sums
// is not null, each 32's sum as the parts hold it, s·Σ(h + l/256)); q4_k_slots: each
// super-block's groups of 32 in the order k_rows_int8_lanes reads them, 0, 2, 1, 3, 4, 6,
// 5, 7 (else in their own order). False where a group holds a non-finite value, or all its
// values are nonzero and below 2^-100 (where s and the factors would fall among f32's
// subnormals).
bool int8_parts_of_row(const float* x, std::size_t length, bool q4_k_slots, std::int8_t* hi, std::int8_t* lo,
                       float* scale, float* sums) {
  const __m512i limit = _mm512_set1_epi32(127);
  for (std::size_t g = 0; g < length / 32; ++g) {
    const float* xg = x + g * 32;
    const __m512 x0 = _mm512_loadu_ps(xg), x1 = _mm512_loadu_ps(xg + 16);
    const float largest = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));  // NaN: lost
    const float inverse = largest == 0.0f ? 0.0f : 127.0f / largest;
    if (!std::isfinite(largest) || (largest != 0.0f && largest < 0x1p-100f) ||
        _mm512_cmp_ps_mask(_mm512_add_ps(x0, x1), _mm512_add_ps(x0, x1), _CMP_UNORD_Q))
      return false;
    scale[g] = largest / 127.0f;
    const std::size_t slot = !q4_k_slots ? g : g % 4 == 1 ? g + 1 : g % 4 == 2 ? g - 1 : g;
    __m512 held = _mm512_setzero_ps();  // h + l/256, lane by lane, over both halves
    for (int half = 0; half < 2; ++half) {
      const __m512 scaled = _mm512_mul_ps(half ? x1 : x0, _mm512_set1_ps(inverse));  // within ±127
      const __m512 h = _mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i l = _mm512_max_epi32(
          _mm512_sub_epi32(_mm512_setzero_si512(), limit),
          _mm512_min_epi32(limit, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(scaled, h), _mm512_set1_ps(256.0f)))));
      const std::size_t at = slot * 32 + half * 16;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + at), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(h)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + at), _mm512_cvtepi32_epi8(l));
      held = _mm512_add_ps(held, _mm512_fmadd_ps(_mm512_cvtepi32_ps(l), _mm512_set1_ps(1.0f / 256), h));
    }
    if (sums) sums[g] = scale[g] * _mm512_reduce_add_ps(held);  // the sum of x as held
  }
  return true;
}

// x's int8 parts for k_rows_int8_lanes; none kept where a row's cannot be made (above):
// the f32 kernel takes those.
void prepare_int8_parts(const float* x, std::size_t n, std::size_t ldx, std::size_t length, kernels::PreparedX& out) {
  const std::size_t groups = length / 32;
  out.hi8.resize(n * length), out.lo8.resize(n * length), out.scale8.resize(n * groups);
  for (std::size_t r = 0; r < n; ++r)
    if (!int8_parts_of_row(x + r * ldx, length, true, &out.hi8[r * length], &out.lo8[r * length],
                           &out.scale8[r * groups], nullptr)) {
      out.hi8.clear(), out.lo8.clear(), out.scale8.clear();
      return;
    }
}

// x's int8 parts in their own order for q8_0_rows_int8_lanes, with the offsets that turn its
// unsigned weights' sums back into signed ones: 128·(256·Σ h + Σ l) over each 4 values, the
// lane of a dot product; none kept where a row's cannot be made (the f32 kernel takes those).
void prepare_in_order_parts(const float* x, std::size_t n, std::size_t ldx, std::size_t length,
                            kernels::PreparedX& out) {
  const std::size_t groups = length / 32;
  out.hi8_in_order.resize(n * length), out.lo8_in_order.resize(n * length), out.scale8.resize(n * groups);
  out.offsets_in_order.resize(n * (length / 4));
  for (std::size_t r = 0; r < n; ++r) {
    std::int8_t *hi = &out.hi8_in_order[r * length], *lo = &out.lo8_in_order[r * length];
    if (!int8_parts_of_row(x + r * ldx, length, false, hi, lo, &out.scale8[r * groups], nullptr)) {
      out.hi8_in_order.clear(), out.lo8_in_order.clear(), out.offsets_in_order.clear();
      return;
    }
    for (std::size_t i = 0; i < length; i += 4)
      out.offsets_in_order[r * (length / 4) + i / 4] =
          128 * (256 * (hi[i] + hi[i + 1] + hi[i + 2] + hi[i + 3]) + (lo[i] + lo[i + 1] + lo[i + 2] + lo[i + 3]));
  }
}

#endif

}  // namespace

void matvec_prepare(const float* x, std::size_t n, std::size_t ldx, std::size_t length, bool units,
                    const kernels::PreparedFormats& formats, kernels::PreparedX& out) {
  out.length = length;
  out.sums32.resize(n * (length / 32));
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t g = 0; g < length / 32; ++g) {  // the vectors added lane by lane, then the lanes
      const float* xg = x + r * ldx + g * 32;
      VF sum = load(xg);
      for (int l = 1; l < 32 / W; ++l)
        sum += load(xg + l * W);
      out.sums32[r * (length / 32) + g] = sum_lanes(sum);
    }
#if defined(ATTNLAB_HAS_BF16)
  if (units && formats.q4_k) prepare_int8_parts(x, n, ldx, length, out);
  if (units && (formats.q8_0 || formats.q6_k)) prepare_in_order_parts(x, n, ldx, length, out);
#elif defined(__AVX2__)
  if (units && formats.q4_k) prepare_int8_parts(x, n, ldx, length, out);
#endif
  (void)units, (void)formats;
}

void matvec_dot_rows(const StoredRows& w, std::size_t first, std::size_t last, const float* x, std::size_t n,
                     std::size_t ldx, const kernels::PreparedX* prepared, float* y, std::size_t ldy, float beta) {
  for (std::size_t r = 0; r < n; r += kMatvecMaxRows) {
    const float* xr = x + r * ldx;
    const kernels::PreparedRows qr = prepared ? prepared->from(r) : kernels::PreparedRows{};
    float* yr = y + r * ldy;
    switch (std::min(n - r, kMatvecMaxRows)) {
      case 1: dot_rows_n<1>(w, first, last, xr, ldx, qr, yr, ldy, beta); break;
      case 2: dot_rows_n<2>(w, first, last, xr, ldx, qr, yr, ldy, beta); break;
      case 3: dot_rows_n<3>(w, first, last, xr, ldx, qr, yr, ldy, beta); break;
      default: dot_rows_n<4>(w, first, last, xr, ldx, qr, yr, ldy, beta); break;
    }
  }
}

void matvec_axpy_rows(const StoredRows& w, const float* x, std::size_t n, std::size_t ldx, float* y, std::size_t ldy,
                      float beta) {
  for (std::size_t r = 0; r < n; r += kMatvecMaxRows) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    switch (std::min(n - r, kMatvecMaxRows)) {
      case 1: axpy_rows_n<1>(w, xr, ldx, yr, ldy, beta); break;
      case 2: axpy_rows_n<2>(w, xr, ldx, yr, ldy, beta); break;
      case 3: axpy_rows_n<3>(w, xr, ldx, yr, ldy, beta); break;
      default: axpy_rows_n<4>(w, xr, ldx, yr, ldy, beta); break;
    }
  }
}

#if defined(ATTNLAB_HAS_BF16) && defined(__AVX512VNNI__)
// ---- The int8 GEMM of quantized prompts ----
//
// Many rows of x (a prompt) by Q8_0, Q4_K, Q5_K or Q6_K rows. x is held per 32 values as
// s·(h + l/256) (int8_parts_of_row, in the values' own order). The weight rows are regrouped
// 16 at a time (a panel; two a pass) so that one vector holds four consecutive values of each
// of the 16 rows, as unsigned bytes q: Q4_K's 4-bit, Q5_K's 5-bit and Q6_K's 6-bit values as
// they are, Q8_0's int8 values + 128. A vpdpbusd then adds, in each weight row's lane, its four
// values times four of x's (broadcast); eight make a 32's sum (four a 16's, for Q6_K, whose
// scales are a 16 values'). Each 32 (16) of a weight row is w = a·q − c (Q4_K, Q5_K: a =
// d·scale, c = dmin·min; Q6_K: a = d·scale, c = 32·a; Q8_0: a = d, c = 128·d), so
//   Σ w·x = a · s/256 · (256·Σ q·h + Σ q·l) − c · Σ x,   x as its parts hold it,
// its sums in int32 (at most 32 · 255 · 127 · 257 < 2^31), scaled once a 32 (16) in f32. The
// panels (16 bytes a value and two floats a 32 or 16 each) are regrouped once and used for
// every row of x.
namespace {

constexpr std::size_t kPanel = 16;  // weight rows a panel: one vector lane each
constexpr std::size_t kPanels = 2;  // panels a pass over x's rows: each broadcast of x used twice
constexpr int kTile = 3;            // rows of x at once: 3 · 2 · 3 vectors of sums (4 spill)

// A 64-byte-aligned buffer of this thread's (AMX's tiles load whole cache lines), grown as
// needed and kept for the next call; what it held is not kept when it grows.
template <typename T>
class AlignedScratch {
 public:
  T* get(std::size_t count) {
    if (count > capacity_) {
      kept_.reset(static_cast<T*>(std::aligned_alloc(64, round_up(count * sizeof(T), 64))));
      if (!kept_) throw std::bad_alloc();
      capacity_ = count;
    }
    return kept_.get();
  }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> kept_;
  std::size_t capacity_ = 0;
};

struct Panels {
  std::vector<std::uint8_t> q;   // [length / 4][2 panels][16 rows][4 values]
  std::vector<float> a, c;       // [length / factor values][2 panels][16 rows]
  std::vector<std::uint8_t> q6;  // Q6_K: a panel's rows' super-block unpacked, [16 rows][256 values]
};

thread_local Panels thread_panels;  // (its memory kept: a prompt's product regroups many a thread)

// A Q6_K super-block's 256 q (0..63) as bytes, in order: each 128 values' 64 bytes of nibbles
// (low: values 0-63, high: 64-127) and 32 bytes of top bit pairs (qh[l]: values l, 32 + l,
// 64 + l, 96 + l, two bits each from the bottom).
inline void unpack_q6_k(const std::byte* block, std::uint8_t* out) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(block);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t *ql = bytes + 64 * half, *qh = bytes + 128 + 32 * half;
    std::uint8_t* q = out + 128 * half;
    for (int l = 0; l < 32; ++l) {
      q[l] = std::uint8_t((ql[l] & 15) | ((qh[l] & 3) << 4));
      q[32 + l] = std::uint8_t((ql[32 + l] & 15) | (((qh[l] >> 2) & 3) << 4));
      q[64 + l] = std::uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      q[96 + l] = std::uint8_t((ql[32 + l] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

// The 32 bytes at base + j·stride of rows j < rows (≤ 16; the rest read as 0) as eight
// vectors, vector t holding each row's bytes 4t..4t+3 in its lane j: rows j and j + 8 side
// by side in one vector, then two 8 × 8 transposes of 4-byte words at once (unpacking
// pairs of words, then of pairs, then taking 128-bit quarters from two vectors).
inline void transpose_words(const std::byte* base, std::size_t stride, std::size_t rows, __m512i (&out)[8]) {
  const auto row = [&](std::size_t j) {
    return j < rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + j * stride)) : _mm256_setzero_si256();
  };
  __m512i a[8], t[8], u[8];
  for (std::size_t k = 0; k < 8; ++k)
    a[k] = _mm512_inserti64x4(_mm512_castsi256_si512(row(k)), row(k + 8), 1);
  for (int k = 0; k < 8; k += 2)  // words 0 1 0 1 | 2 3 2 3 of rows k, k + 1 (in each 128 bits)
    t[k] = _mm512_unpacklo_epi32(a[k], a[k + 1]), t[k + 1] = _mm512_unpackhi_epi32(a[k], a[k + 1]);
  for (int k = 0; k < 8; k += 4) {  // word w of rows k..k + 3 (w = 0, 1, 2, 3 in each 128 bits)
    u[k] = _mm512_unpacklo_epi64(t[k], t[k + 2]), u[k + 1] = _mm512_unpackhi_epi64(t[k], t[k + 2]);
    u[k + 2] = _mm512_unpacklo_epi64(t[k + 1], t[k + 3]), u[k + 3] = _mm512_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  const __m512i first_words = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);   // words 0-3: low 128 of each half
  const __m512i last_words = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);  // words 4-7: high 128
  for (int w = 0; w < 4; ++w) {
    out[w] = _mm512_permutex2var_epi64(u[w], first_words, u[w + 4]);
    out[w + 4] = _mm512_permutex2var_epi64(u[w], last_words, u[w + 4]);
  }
}

// Q6_K's rows regrouped as regroup does the others (below): each super-block of the panel's
// rows unpacked to bytes first, then transposed 32 values at a time; a factor a = d·scale and
// c = 32·a (the q − 32 of ggml's values) for each 16 values, or with `signed_values` the
// values q − 32 themselves and c = 0.
void regroup_q6_k(const StoredRows& w, std::size_t first, std::size_t rows, bool signed_values, Panels& p) {
  const std::size_t width = kPanels * kPanel;
  p.q6.resize(kPanel * 256);
  for (std::size_t panel = 0; panel < kPanels; ++panel) {
    const std::size_t live = rows > panel * kPanel ? std::min(kPanel, rows - panel * kPanel) : 0;
    const std::byte* base = w.data + (first + panel * kPanel) * w.stride;
    __m512i words[8];
    for (std::size_t b = 0; b < w.length / 256; ++b) {
      for (std::size_t j = 0; j < live; ++j)
        unpack_q6_k(base + j * w.stride + b * 210, &p.q6[j * 256]);
      for (std::size_t g = 0; g < 8; ++g) {
        transpose_words(reinterpret_cast<const std::byte*>(&p.q6[g * 32]), 256, live, words);
        for (int t = 0; t < 8; ++t)
          _mm512_storeu_si512(&p.q[(((b * 8 + g) * 8 + t) * kPanels + panel) * 64],
                              signed_values ? _mm512_sub_epi8(words[t], _mm512_set1_epi8(32)) : words[t]);
      }
    }
  }
  for (std::size_t j = 0; j < width; ++j) {
    const std::byte* row = w.data + (first + j) * w.stride;
    for (std::size_t f = 0; f < w.length / 16; ++f) {
      const std::byte* block = row + (f / 16) * 210;
      const float a = j < rows ? half_at(block + 208) * float(std::int8_t(block[192 + f % 16])) : 0.0f;
      p.a[f * width + j] = a / 256;  // (a/256: h's sums come 256 times over)
      p.c[f * width + j] = signed_values ? 0 : 32 * a;
    }
  }
}

// Rows [first, first + rows) of w (rows ≤ 32) regrouped into p: a panel's vectors of q are
// its 16 rows' 32 bytes transposed (Q8_0: its int8 values, + 128; Q4_K: a pair of
// sub-blocks' bytes, the first's values their low nibbles, the second's the high; Q5_K: the
// same, each value's fifth bit added from qh, transposed alike), the factors a row at a time.
// With `signed_values` (for the bf16 tiles, which make each weight in f32 and need no unsigned
// byte), Q8_0's and Q6_K's values are kept signed, as ggml means them, and c is 0.
void regroup(const StoredRows& w, std::size_t first, std::size_t rows, bool signed_values, Panels& p) {
  const std::size_t groups = w.length / 32, width = kPanels * kPanel;
  const std::size_t factor_values = int8_factor_values(w.format), factors = w.length / factor_values;
  p.q.resize(w.length * width), p.a.resize(factors * width), p.c.resize(factors * width);
  if (w.format == RowFormat::q6_k) return regroup_q6_k(w, first, rows, signed_values, p);
  const bool q8_0 = w.format == RowFormat::q8_0, q5_k = w.format == RowFormat::q5_k;
  const std::size_t k_bytes = q5_k ? 176 : 144, nibbles = q5_k ? 48 : 16;  // a K-quant super-block's
  const auto store = [&](std::size_t g, std::size_t panel, int t, __m512i q) {
    _mm512_storeu_si512(&p.q[((g * 8 + t) * kPanels + panel) * 64], q);
  };
  for (std::size_t panel = 0; panel < kPanels; ++panel) {
    const std::size_t live = rows > panel * kPanel ? std::min(kPanel, rows - panel * kPanel) : 0;
    const std::byte* base = w.data + (first + panel * kPanel) * w.stride;
    __m512i words[8], top[8];
    // Q8_0: 34 bytes a 32 (d, then 32 int8); Q4_K: 144 a 256 (d, dmin, 12 bytes of scales
    // and mins, then 128: sub-blocks 2k and 2k + 1 in bytes 32k.., low and high nibbles);
    // Q5_K: 176 a 256, 32 bytes of fifth bits (qh: value l of sub-block s is bit s of byte l)
    // between the scales and the nibbles.
    const __m512i nibble = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    // Sub-block s's fifth bits of the four values in each lane's bytes, as 16.
    const auto fifth = [&](int t, int s) {
      return _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(top[t], s), one), 4);
    };
    for (std::size_t g = 0; g < groups; g += q8_0 ? 1 : 2) {
      const std::byte* block = base + (g / 8) * k_bytes;
      transpose_words(q8_0 ? base + g * 34 + 2 : block + nibbles + (g % 8 / 2) * 32, w.stride, live, words);
      if (q5_k && g % 8 == 0) transpose_words(block + 16, w.stride, live, top);
      for (int t = 0; t < 8; ++t)
        if (q8_0) {
          store(g, panel, t, signed_values ? words[t] : _mm512_xor_si512(words[t], _mm512_set1_epi8(char(0x80))));
        } else {
          __m512i low = _mm512_and_si512(words[t], nibble),
                  high = _mm512_and_si512(_mm512_srli_epi32(words[t], 4), nibble);
          if (q5_k)
            low = _mm512_or_si512(low, fifth(t, int(g % 8))), high = _mm512_or_si512(high, fifth(t, int(g % 8) + 1));
          store(g, panel, t, low);
          store(g + 1, panel, t, high);
        }
    }
  }
  for (std::size_t j = 0; j < width; ++j) {
    const std::byte* row = w.data + (first + j) * w.stride;
    for (std::size_t g = 0; g < groups; ++g) {
      float a = 0, c = 0;  // (0 in the lanes of rows past the last)
      if (j < rows && q8_0) {
        a = half_at(row + g * 34), c = signed_values ? 0 : 128 * a;  // (the 128 added to q, taken off again)
      } else if (j < rows) {
        const std::byte* block = row + (g / 8) * k_bytes;
        float scale, min;
        k_scale_and_min(reinterpret_cast<const std::uint8_t*>(block + 4), g % 8, scale, min);
        a = half_at(block) * scale, c = half_at(block + 2) * min;
      }
      p.a[g * width + j] = a / 256, p.c[g * width + j] = c;  // (a/256: h's sums come 256 times over)
    }
  }
}

// Rows i0..i0+R of x by the two panels, into their `cols` (≤ 32) columns of y. (The loops
// over r and t unrolled at GCC's request: without, it keeps the sums in memory.)
// Values: the values that share a weight factor (32; Q6_K's 16).
template <int R, int Values>
void panel_tile(const Panels& p, const kernels::avx512::Int8Rows& x, std::size_t i0, float* y, std::size_t ldy,
                std::size_t cols, float beta) {
  const std::size_t length = x.length, groups = length / Values;
  const std::int8_t *hi[R], *lo[R];
  const float *scale[R], *sums[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    hi[r] = x.hi + (i0 + r) * length, lo[r] = x.lo + (i0 + r) * length, scale[r] = x.scale + (i0 + r) * (length / 32),
    sums[r] = x.sums + (i0 + r) * groups;
  __m512 acc[R][kPanels];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::size_t g = 0; g < groups; ++g) {
    __m512i high[R][kPanels], low[R][kPanels];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      high[r][0] = high[r][1] = low[r][0] = low[r][1] = _mm512_setzero_si512();
    const std::uint8_t* qg = &p.q[g * (Values / 4) * kPanels * 64];
#pragma GCC unroll 8
    for (int t = 0; t < Values / 4; ++t) {  // four values of the 32 rows, against four of each x row
      const __m512i q0 = _mm512_loadu_si512(qg + (2 * t) * 64), q1 = _mm512_loadu_si512(qg + (2 * t + 1) * 64);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        std::int32_t h, l;
        std::memcpy(&h, hi[r] + g * Values + t * 4, 4), std::memcpy(&l, lo[r] + g * Values + t * 4, 4);
        const __m512i hh = _mm512_set1_epi32(h), ll = _mm512_set1_epi32(l);
        high[r][0] = _mm512_dpbusd_epi32(high[r][0], q0, hh), high[r][1] = _mm512_dpbusd_epi32(high[r][1], q1, hh);
        low[r][0] = _mm512_dpbusd_epi32(low[r][0], q0, ll), low[r][1] = _mm512_dpbusd_epi32(low[r][1], q1, ll);
      }
    }
#pragma GCC unroll 2
    for (std::size_t panel = 0; panel < kPanels; ++panel) {
      const __m512 a = _mm512_loadu_ps(&p.a[(g * kPanels + panel) * kPanel]);
      const __m512 c = _mm512_loadu_ps(&p.c[(g * kPanels + panel) * kPanel]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i total = _mm512_add_epi32(_mm512_slli_epi32(high[r][panel], 8), low[r][panel]);
        acc[r][panel] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total),
                                        _mm512_mul_ps(a, _mm512_set1_ps(scale[r][g * Values / 32])), acc[r][panel]);
        acc[r][panel] = _mm512_fnmadd_ps(c, _mm512_set1_ps(sums[r][g]), acc[r][panel]);
      }
    }
  }
  for (std::size_t panel = 0; panel < kPanels; ++panel) {
    const std::size_t live = cols > panel * kPanel ? std::min(kPanel, cols - panel * kPanel) : 0;
    const __mmask16 mask = __mmask16((1u << live) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* yr = y + (i0 + r) * ldy + panel * kPanel;
      const __m512 out = beta == 0.0f
                             ? acc[r][panel]
                             : _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, yr), acc[r][panel]);
      _mm512_mask_storeu_ps(yr, mask, out);
    }
  }
}

}  // namespace

}  // namespace attnlab::kernels::ATTNLAB_ISA

namespace attnlab::kernels::avx512 {

bool int8_row(const float* x, std::size_t length, std::int8_t* hi, std::int8_t* lo, float* scale, float* sums) {
  return int8_parts_of_row(x, length, false, hi, lo, scale, sums);
}

void bf16_gemm_panels(const StoredRows& w, std::size_t first, std::size_t last, const std::uint16_t* x, std::size_t n,
                      float* y, std::size_t ldy, float beta) {
  Panels& panels = thread_panels;
  thread_local AlignedScratch<std::uint16_t> split_weights;  // [pairs of panels][bf16_weights' layout]
  thread_local AlignedScratch<float> sums;                   // bf16_tiles' acc
  const bool signed_values = int8_signed_values(w.format);
  const std::size_t width = kPanels * kPanel, pairs = (last - first + width - 1) / width;
  const std::size_t pair_values = w.length * width * 2;
  std::uint16_t* b = split_weights.get(pairs * pair_values);
  for (std::size_t p = 0; p < pairs; ++p) {
    const std::size_t from = first + p * width;
    regroup(w, from, std::min(width, last - from), signed_values, panels);
    amx::bf16_weights({panels.q.data(), panels.a.data(), panels.c.data(), signed_values}, w.length,
                      int8_factor_values(w.format), b + p * pair_values);
  }
  amx::bf16_tiles(b, pairs, x, n, w.length, y, ldy, last - first, beta, sums.get(pairs * round_up(n, 32) * width));
}

void int8_gemm_panels(const StoredRows& w, std::size_t first, std::size_t last, const Int8Rows& x, std::size_t n,
                      float* y, std::size_t ldy, float beta) {
  Panels& panels = thread_panels;
  regroup(w, first, last - first, false, panels);
  const auto tiles = [&]<int Values>() {
    std::size_t i = 0;
    for (; i + kTile <= n; i += kTile)
      panel_tile<kTile, Values>(panels, x, i, y, ldy, last - first, beta);
    switch (n - i) {
      case 1: return panel_tile<1, Values>(panels, x, i, y, ldy, last - first, beta);
      case 2: return panel_tile<2, Values>(panels, x, i, y, ldy, last - first, beta);
      default: return;
    }
  };
  if (int8_factor_values(w.format) == 16)
    tiles.template operator()<16>();
  else
    tiles.template operator()<32>();
}

}  // namespace attnlab::kernels::avx512
#else
}  // namespace attnlab::kernels::ATTNLAB_ISA
#endif
