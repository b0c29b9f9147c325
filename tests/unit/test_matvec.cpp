// The matrix–vector kernels (attnlab/kernels/matvec.hpp) against the reference: every format's
// rows widened by the model's dequantization (ggml's block definitions, checked against NumPy
// in test_gguf.cpp) and multiplied in double, on every instruction set this CPU runs, for 1
// to 6 rows of activations (the kernel takes 4 at a time), with and without beta, row lengths
// with and without a tail, a stride longer than the row, and threads on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/matvec.hpp"
#include "attnlab/model/ggml_type.hpp"
#include "random_inputs.hpp"
#include "runnable_isas.hpp"

using namespace attnlab;
using attnlab::test::random_floats;

namespace matvec_test {  // named: the unit tests compile as unity batches

GgmlType ggml_of(RowFormat f) {
  switch (f) {
    case RowFormat::f32: return GgmlType::f32;
    case RowFormat::f16: return GgmlType::f16;
    case RowFormat::bf16: return GgmlType::bf16;
    case RowFormat::q8_0: return GgmlType::q8_0;
    case RowFormat::q4_k: return GgmlType::q4_k;
    case RowFormat::q5_k: return GgmlType::q5_k;
    case RowFormat::q6_k: return GgmlType::q6_k;
  }
  return GgmlType::f32;
}

// `count` rows of `length` values of `format`, `stride` bytes apart: random bytes with every
// block's scales an f16 of about 0.01 (finite), float values drawn from a normal.
std::vector<std::byte> random_rows(RowFormat format, std::size_t count, std::size_t length, std::size_t stride,
                                   unsigned seed) {
  const GgmlType type = ggml_of(format);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> bytes(count * stride);
  for (std::byte& b : bytes)
    b = std::byte(rng() & 0xFF);
  for (std::size_t r = 0; r < count; ++r) {
    std::byte* row = bytes.data() + r * stride;
    for (std::size_t i = 0; i < length && ggml_block_values(type) == 1; ++i) {
      const float v = normal(rng);
      if (format == RowFormat::f32) std::memcpy(row + 4 * i, &v, 4);
      const std::uint16_t h = format == RowFormat::f16 ? f32_to_f16(v) : f32_to_bf16(v);
      if (format != RowFormat::f32) std::memcpy(row + 2 * i, &h, 2);
    }
    for (std::size_t at = 0; at < ggml_row_bytes(type, length) && ggml_block_values(type) > 1;
         at += ggml_block_bytes(type)) {
      const std::uint16_t d = f32_to_f16(0.005f + 0.01f * float(rng() % 100) / 100.0f);
      std::memcpy(row + at + (type == GgmlType::q6_k ? 208 : 0), &d, 2);
      if (type == GgmlType::q4_k || type == GgmlType::q5_k) std::memcpy(row + at + 2, &d, 2);  // dmin
    }
  }
  return bytes;
}

std::vector<float> widened_rows(RowFormat format, const std::vector<std::byte>& bytes, std::size_t count,
                                std::size_t length, std::size_t stride) {
  std::vector<float> out(count * length);
  for (std::size_t r = 0; r < count; ++r)
    dequantize(ggml_of(format), bytes.data() + r * stride, length, out.data() + r * length);
  return out;
}

constexpr RowFormat kFormats[] = {RowFormat::f32,  RowFormat::f16,  RowFormat::bf16, RowFormat::q8_0,
                                  RowFormat::q4_k, RowFormat::q5_k, RowFormat::q6_k};

// Whether `format`'s products on `isa` are int8 dot products, held to their own bound
// (test::int8_parts_bound): Q4_K's and Q5_K's with AVX2 or AVX-512 VNNI, Q8_0's and Q6_K's
// with VNNI.
bool int8_products(RowFormat format, Isa isa) {
  const bool k = format == RowFormat::q4_k || format == RowFormat::q5_k;
  const bool vnni_only = format == RowFormat::q8_0 || format == RowFormat::q6_k;
  return (k && (isa == Isa::avx2 || isa == Isa::avx512_bf16)) || (vnni_only && isa == Isa::avx512_bf16);
}

TEST(Matvec, DotProductsOfEveryFormatMatchTheWidenedRows) {
  for (const Isa isa : test::runnable_isas())
    for (const RowFormat format : kFormats) {
      const bool quantized = ggml_block_values(ggml_of(format)) > 1;
      // Float rows with a tail (37, 21 values past the vectors) and without; quantized: whole blocks.
      const std::vector<std::size_t> lengths = format == RowFormat::q8_0 ? std::vector<std::size_t>{96, 256, 512, 800}
                                               // 96, 800: an odd number of blocks (800: 16 of them, then 9)
                                               : quantized ? std::vector<std::size_t>{256, 512}
                                                           : std::vector<std::size_t>{16, 37, 96, 533};
      for (const std::size_t length : lengths)
        for (const std::size_t n : {1, 2, 3, 4, 5, 6})
          for (const float beta : {0.0f, 0.5f}) {
            const std::size_t count = 70, row_bytes = ggml_row_bytes(ggml_of(format), length);
            const std::size_t stride = row_bytes + (length == 96 ? 64 : 0);  // a stride past the row
            const std::vector<std::byte> bytes = random_rows(format, count, length, stride, unsigned(length + n));
            const std::vector<float> w = widened_rows(format, bytes, count, length, stride);
            const std::size_t ldx = length + 3, ldy = count + 5;
            const std::vector<float> x = random_floats(n * ldx, 7);
            std::vector<float> y = random_floats(n * ldy, 8);
            const std::vector<float> before = y;
            matvec_dot({format, bytes.data(), count, length, stride}, x.data(), n, ldx, y.data(), ldy, beta,
                       {.threads = 2, .isa = isa});
            for (std::size_t r = 0; r < n; ++r)
              for (std::size_t c = 0; c < ldy; ++c) {
                if (c >= count) {
                  EXPECT_EQ(y[r * ldy + c], before[r * ldy + c]) << "past the rows: untouched";
                  continue;
                }
                double expected = beta * double(before[r * ldy + c]);
                double scale = 0;
                for (std::size_t i = 0; i < length; ++i) {
                  expected += double(x[r * ldx + i]) * w[c * length + i];
                  scale += std::abs(double(x[r * ldx + i]) * w[c * length + i]);
                }
                // The int8 dot products' own bound where they run (KQuantProductsAreAsExact... below).
                const double int8_bound =
                    int8_products(format, isa) ? test::int8_parts_bound(&x[r * ldx], &w[c * length], length) : 0.0;
                ASSERT_NEAR(y[r * ldy + c], expected, 1e-5 * scale + 1e-6 + int8_bound)
                    << to_string(isa) << " " << to_string(format) << " length " << length << " n " << n << " row " << r
                    << " column " << c;
              }
          }
    }
}

TEST(Matvec, ScaledRowsOfEveryFloatFormatMatchTheWidenedRows) {
  for (const Isa isa : test::runnable_isas())
    for (const RowFormat format : {RowFormat::f32, RowFormat::f16, RowFormat::bf16})
      for (const std::size_t length : {16, 37, 300})  // y's columns
        for (const std::size_t n : {1, 4, 5})
          for (const float beta : {0.0f, 1.0f})
            for (const int threads : {1, 2}) {
              const std::size_t count = threads == 2 ? 900 : 50;  // 900 rows: past the threshold for threads
              const std::size_t stride = ggml_row_bytes(ggml_of(format), length);
              const std::vector<std::byte> bytes = random_rows(format, count, length, stride, unsigned(length));
              const std::vector<float> w = widened_rows(format, bytes, count, length, stride);
              const std::size_t ldx = count + 1, ldy = length + 2;
              const std::vector<float> x = random_floats(n * ldx, 9);
              std::vector<float> y = random_floats(n * ldy, 10);
              const std::vector<float> before = y;
              matvec_axpy({format, bytes.data(), count, length, stride}, x.data(), n, ldx, y.data(), ldy, beta,
                          {.threads = threads, .isa = isa});
              for (std::size_t r = 0; r < n; ++r)
                for (std::size_t c = 0; c < ldy; ++c) {
                  if (c >= length) {
                    EXPECT_EQ(y[r * ldy + c], before[r * ldy + c]) << "past the columns: untouched";
                    continue;
                  }
                  double expected = beta * double(before[r * ldy + c]), scale = std::abs(expected);
                  for (std::size_t i = 0; i < count; ++i) {
                    expected += double(x[r * ldx + i]) * w[i * length + c];
                    scale += std::abs(double(x[r * ldx + i]) * w[i * length + c]);
                  }
                  ASSERT_NEAR(y[r * ldy + c], expected, 1e-5 * scale + 1e-6)
                      << to_string(isa) << " " << to_string(format) << " n " << n << " column " << c;
                }
            }
  // Threads split the rows (each its own run of them, summed apart, then added): 3 threads
  // over 50 rows (4 pieces of 16, two a thread) leave the third with none, which adds nothing;
  // beta 1 keeps y's sum.
  const std::size_t count = 50, length = 4096, stride = length * sizeof(float);
  const std::vector<std::byte> bytes = random_rows(RowFormat::f32, count, length, stride, 3);
  const std::vector<float> w = widened_rows(RowFormat::f32, bytes, count, length, stride);
  const std::vector<float> x = random_floats(2 * count, 4);
  std::vector<float> y = random_floats(2 * length, 5);
  const std::vector<float> before = y;
  matvec_axpy({RowFormat::f32, bytes.data(), count, length, stride}, x.data(), 2, count, y.data(), length, 1.0f,
              {.threads = 3});
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < length; ++c) {
      double expected = before[r * length + c], scale = std::abs(expected);
      for (std::size_t i = 0; i < count; ++i) {
        expected += double(x[r * count + i]) * w[i * length + c];
        scale += std::abs(double(x[r * count + i]) * w[i * length + c]);
      }
      ASSERT_NEAR(y[r * length + c], expected, 1e-5 * scale + 1e-6) << "3 threads, row " << r << " column " << c;
    }
}

// The quantized products (Q8_0, Q4_K, Q5_K, Q6_K) on every path are as close to the exact
// sum as an f32 loop over the widened rows is (within 1e-6 of Σ |x·w|, the scale of a dot
// product's rounding), at a large length and at values of x far apart in size; except the int8
// dot products (int8_products above), which hold each 32 values of x within 1/32512 of their
// largest, so may be further off by Σ over the 32s of max |x| / 32512 · Σ |w|; and a
// non-finite x gives a non-finite y.
TEST(Matvec, KQuantProductsAreAsExactAsF32SumsOrTheirInt8Bound) {
  for (const RowFormat format : {RowFormat::q8_0, RowFormat::q4_k, RowFormat::q5_k, RowFormat::q6_k}) {
    const std::size_t count = 64, length = 4096, stride = ggml_row_bytes(ggml_of(format), length);
    const std::vector<std::byte> bytes = random_rows(format, count, length, stride, 11);
    const std::vector<float> w = widened_rows(format, bytes, count, length, stride);
    std::vector<float> x = random_floats(2 * length, 12);
    for (std::size_t i = 0; i < length; ++i)
      x[length + i] *= std::ldexp(1.0f, int(i % 61) - 30);  // 2^-30 .. 2^30
    for (const Isa isa : test::runnable_isas()) {
      const bool int8 = int8_products(format, isa);
      std::vector<float> y(2 * count);
      matvec_dot({format, bytes.data(), count, length, stride}, x.data(), 2, length, y.data(), count, 0.0f,
                 {.threads = 1, .isa = isa});
      for (std::size_t r = 0; r < 2; ++r)
        for (std::size_t c = 0; c < count; ++c) {
          double expected = 0, scale = 0;
          for (std::size_t i = 0; i < length; ++i) {
            expected += double(x[r * length + i]) * w[c * length + i];
            scale += std::abs(double(x[r * length + i]) * w[c * length + i]);
          }
          const double int8_bound = int8 ? test::int8_parts_bound(&x[r * length], &w[c * length], length) : 0.0;
          ASSERT_NEAR(y[r * count + c], expected, 1e-6 * scale + int8_bound)
              << to_string(isa) << " " << to_string(format) << " x " << r << " row " << c;
        }
      for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        std::vector<float> x_bad(x.begin(), x.begin() + length);
        x_bad[300] = bad;
        matvec_dot({format, bytes.data(), count, length, stride}, x_bad.data(), 1, length, y.data(), count, 0.0f,
                   {.threads = 1, .isa = isa});
        for (std::size_t c = 0; c < count; ++c)
          EXPECT_FALSE(std::isfinite(y[c]))
              << to_string(isa) << " " << to_string(format) << " row " << c << " x[300] = " << bad;
      }
    }
  }
}

// Parts side by side (a fused projection, its pieces in different formats as a Q4_K_M file
// mixes them) give each part's own product in its columns, bit for bit, whatever the threads.
TEST(Matvec, PartsSideBySideAreEachPartsOwnProduct) {
  const std::size_t length = 512;
  const RowFormat formats[] = {RowFormat::q4_k, RowFormat::q6_k, RowFormat::q8_0,
                               RowFormat::q5_k, RowFormat::f16,  RowFormat::q4_k};
  const std::size_t counts[] = {300, 45, 33, 20, 70, 1};
  std::vector<std::vector<std::byte>> bytes;
  std::vector<StoredRows> parts;
  std::size_t columns = 0;
  for (std::size_t p = 0; p < std::size(formats); ++p) {
    const std::size_t stride = ggml_row_bytes(ggml_of(formats[p]), length);
    bytes.push_back(random_rows(formats[p], counts[p], length, stride, unsigned(20 + p)));
    parts.push_back({formats[p], bytes.back().data(), counts[p], length, stride});
    columns += counts[p];
  }
  for (const Isa isa : test::runnable_isas())
    for (const std::size_t n : {1, 3})
      for (const int threads : {1, 2}) {
        const std::vector<float> x = random_floats(n * length, 13);
        const std::size_t ldy = columns + 2;
        std::vector<float> together = random_floats(n * ldy, 14), alone = together;
        matvec_dot(parts, x.data(), n, length, together.data(), ldy, 0.5f, {.threads = threads, .isa = isa});
        std::size_t first = 0;
        for (const StoredRows& part : parts) {
          matvec_dot(part, x.data(), n, length, alone.data() + first, ldy, 0.5f, {.threads = 1, .isa = isa});
          first += part.count;
        }
        EXPECT_EQ(together, alone) << to_string(isa) << " n " << n << " threads " << threads;
      }
  parts[1].length = 256;
  std::vector<float> x(length), y(columns);
  EXPECT_THROW(matvec_dot(parts, x.data(), 1, length, y.data(), columns, 0.0f), std::logic_error)
      << "parts of different lengths";
}

// A prompt's product by Q8_0 and K-quant rows as int8 dot products (where the CPU has AVX-512
// VNNI), on VNNI's vectors and (where the CPU has them) on AMX's tiles: within the int8
// parts' bound of the exact product, for rows past whole panels of 16, rows of x past whole
// vector tiles of 3 and AMX tiles of 16, beta, strides wider than the rows, 1 and 2 threads;
// y's padding untouched. Where it does not apply it says so (false) and leaves y as it was.
TEST(Matvec, Int8GemmIsTheProductWithinTheInt8Bound) {
  const std::vector<Isa> isas = test::runnable_isas();
  if (std::find(isas.begin(), isas.end(), Isa::avx512_bf16) == isas.end())
    GTEST_SKIP() << "the int8 products run where the CPU has AVX-512 VNNI, and this one has not";
  for (const RowFormat format : {RowFormat::q8_0, RowFormat::q4_k, RowFormat::q5_k, RowFormat::q6_k}) {
    const std::size_t count = 37, length = 512, stride = ggml_row_bytes(ggml_of(format), length) + 16;
    const std::vector<std::byte> bytes = random_rows(format, count, length, stride, 31);
    const std::vector<float> w = widened_rows(format, bytes, count, length, stride);
    const StoredRows rows{format, bytes.data(), count, length, stride};
    for (const std::size_t n : {1, 5, 6, 13, 16, 35, 300}) {  // (300: past the tiles' 256 rows at a time)
      const std::size_t ldx = length + 3, ldy = count + 2;
      std::vector<float> x = random_floats(n * ldx, unsigned(40 + n));
      for (std::size_t i = 0; i < length; ++i)
        x[(n - 1) * ldx + i] *= std::ldexp(1.0f, int(i % 61) - 30);  // 2^-30 .. 2^30
      const std::vector<float> before = random_floats(n * ldy, 50);
      for (const auto& [threads, tiles] : {std::pair{1, false}, {2, false}, {1, true}, {2, true}}) {
        std::vector<float> y = before;
        ASSERT_TRUE(int8_gemm(rows, x.data(), n, ldx, y.data(), ldy, 0.5f,
                              {.threads = threads, .isa = Isa::avx512_bf16, .tiles = tiles}));
        for (std::size_t r = 0; r < n; ++r) {
          for (std::size_t c = 0; c < count; ++c) {
            double expected = 0.5 * before[r * ldy + c], scale = std::abs(expected);
            for (std::size_t i = 0; i < length; ++i) {
              expected += double(x[r * ldx + i]) * w[c * length + i];
              scale += std::abs(double(x[r * ldx + i]) * w[c * length + i]);
            }
            ASSERT_NEAR(y[r * ldy + c], expected,
                        1e-6 * scale + test::int8_parts_bound(&x[r * ldx], &w[c * length], length))
                << to_string(format) << " n " << n << " threads " << threads << (tiles ? " tiles" : "") << " x " << r
                << " row " << c;
          }
          for (std::size_t c = count; c < ldy; ++c)
            ASSERT_EQ(y[r * ldy + c], before[r * ldy + c]) << "y's padding, x " << r;
        }
      }
    }
    std::vector<float> x = random_floats(7 * length, 60), y(7 * count, 1.0f);
    x[3 * length + 100] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(int8_gemm(rows, x.data(), 7, length, y.data(), count, 0.0f, {.isa = Isa::avx512_bf16}))
        << "a NaN in x: the caller's own product";
    x[3 * length + 100] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(int8_gemm(rows, x.data(), 7, length, y.data(), count, 0.0f, {.isa = Isa::avx512_bf16}));
    EXPECT_FALSE(int8_gemm(rows, x.data(), 7, length, y.data(), count, 0.0f, {.isa = Isa::avx512}))
        << "an instruction set without VNNI";
    EXPECT_EQ(y, std::vector<float>(7 * count, 1.0f)) << "y untouched when refused";
    std::vector<float> long_x = random_floats(300 * length, 61), long_y(300 * count, 1.0f);
    long_x[290 * length + 5] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(int8_gemm(rows, long_x.data(), 300, length, long_y.data(), count, 0.0f))
        << "an infinity past the first 256 rows";
    long_x[290 * length + 5] = 3.2e38f;
    if (int8_gemm_tiles())
      EXPECT_FALSE(int8_gemm(rows, long_x.data(), 300, length, long_y.data(), count, 0.0f))
          << "a value whose bf16 parts would overflow: refused on the tiles";
    EXPECT_EQ(long_y, std::vector<float>(300 * count, 1.0f)) << "y untouched when refused";
  }
  std::vector<float> w(64 * 32), x(8 * 32), y(8 * 64);
  EXPECT_FALSE(int8_gemm({RowFormat::f32, reinterpret_cast<const std::byte*>(w.data()), 64, 32, 128}, x.data(), 8, 32,
                         y.data(), 64, 0.0f))
      << "f32 rows";
}

TEST(Matvec, RefusesRowsThatAreNotWholeBlocksAndQuantizedInputRows) {
  std::vector<std::byte> bytes(1024);
  std::vector<float> x(256), y(8);
  EXPECT_THROW(matvec_dot({RowFormat::q4_k, bytes.data(), 1, 100, 144}, x.data(), 1, 256, y.data(), 8, 0.0f),
               std::logic_error);
  EXPECT_THROW(matvec_dot({RowFormat::f32, bytes.data(), 2, 64, 128}, x.data(), 1, 256, y.data(), 8, 0.0f),
               std::logic_error)
      << "a stride shorter than the row";
  EXPECT_THROW(matvec_axpy({RowFormat::q8_0, bytes.data(), 1, 32, 34}, x.data(), 1, 256, y.data(), 8, 0.0f),
               std::logic_error);
}

}  // namespace matvec_test
