// bf16 products (attnlab/model/blas.hpp): gemm_bf16 gives the f32 sums of its bf16
// operands' products over shapes that fit no tile (1, 3, 75, 113, 1000), transposed or not,
// strided, with and without beta; under Bf16Products every layout and type a weight can be
// stored in multiplies like its values rounded to bf16 (x too), the f32 gemm (training's
// products) rounds its operands from 2^18 multiply-adds on, generation's few rows stay on
// the matrix–vector kernels bit for bit, and a model's forward and a training step stay
// within bf16's rounding of the f32 ones. AMX: the tile probe runs, and computes a known sum, exactly where
// the CPU has the tiles, and oneDNN then multiplies on them. Each test says why it is skipped
// on a CPU without bf16 units.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "attnlab/core/dtype.hpp"
#include "attnlab/kernels/peak.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/ggml_type.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/tensor.hpp"
#include "attnlab/model/train_run.hpp"
#include "attnlab/model/training.hpp"
#include "random_inputs.hpp"

using namespace attnlab;
using attnlab::test::random_floats;

namespace bf16_products_test {  // named: the unit tests compile as unity batches

const char* const kNoBf16Units =
    "this CPU has no bf16 units oneDNN multiplies with (AVX-512 BF16 or AMX); the bf16 products are checked where "
    "it has them, and the model's products here stay f32";

float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

std::vector<std::uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    out[i] = f32_to_bf16(values[i]);
  return out;
}

// Whether `actual` is the sum `expected` (in double) of terms whose magnitudes add up to
// `scale`, as an f32 accumulation of `terms` of them can give: every product of two bf16
// values is exact in f32, so the only error is the sums' rounding, at most terms · 2^-24 ·
// scale (the usual bound, doubled for blocked orders).
::testing::AssertionResult sum_close(float actual, double expected, double scale, std::size_t terms) {
  const double bound = 2.0 * double(terms + 1) * std::ldexp(1.0, -24) * scale + 1e-30;
  if (std::abs(double(actual) - expected) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " vs " << expected << " (bound " << bound << ")";
}

TEST(Bf16Gemm, GivesTheF32SumsOfItsBf16OperandsOverShapesLayoutsStridesAndBeta) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  struct Shape {
    std::size_t M, N, K;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 75, 113}, Shape{113, 3, 1000}, Shape{75, 113, 3}, Shape{5, 130, 64}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const float beta : {0.0f, 1.0f}) {
          // Rows further apart than they are long: A stored [K × M] when ta, B [N × K] when tb.
          const std::size_t lda = (ta ? s.M : s.K) + 5, ldb = (tb ? s.K : s.N) + 3, ldc = s.N + 7;
          const std::vector<std::uint16_t> a = to_bf16(random_floats((ta ? s.K : s.M) * lda, 1 + s.K));
          const std::vector<std::uint16_t> b = to_bf16(random_floats((tb ? s.N : s.K) * ldb, 2 + s.N));
          const std::vector<float> c0 = random_floats(s.M * ldc, 3);
          std::vector<float> c = c0;
          gemm_bf16(ta, tb, s.M, s.N, s.K, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          for (std::size_t i = 0; i < s.M; ++i)
            for (std::size_t j = 0; j < s.N; ++j) {
              double sum = beta * double(c0[i * ldc + j]), scale = std::abs(sum);
              for (std::size_t k = 0; k < s.K; ++k) {
                const double term = double(bf16_to_f32(ta ? a[k * lda + i] : a[i * lda + k])) *
                                    bf16_to_f32(tb ? b[j * ldb + k] : b[k * ldb + j]);
                sum += term;
                scale += std::abs(term);
              }
              ASSERT_TRUE(sum_close(c[i * ldc + j], sum, scale, s.K))
                  << s.M << "×" << s.N << "×" << s.K << (ta ? " Aᵀ" : "") << (tb ? " Bᵀ" : "") << " beta " << beta
                  << " at " << i << ", " << j;
            }
          // The gaps between rows are left as they were.
          for (std::size_t i = 0; i < s.M; ++i)
            for (std::size_t j = s.N; j < ldc; ++j)
              ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
        }
}

// The f32 gemm under Bf16Products (training's products): the sums of its operands rounded
// to bf16, for every transposition, strided, with and without beta; a product under 2^18
// multiply-adds stays f32 exactly.
TEST(Bf16Products, TheF32GemmRoundsItsOperandsWhenAskedAndSmallProductsStayF32) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  const std::size_t M = 70, N = 90, K = 130;  // 819,000 multiply-adds
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const float beta : {0.0f, 1.0f}) {
        // Rows further apart than they are long, as a slice of q|k|v is.
        const std::size_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
        const std::vector<float> a = random_floats((ta ? K : M) * lda, 21), b = random_floats((tb ? N : K) * ldb, 22);
        const std::vector<float> c0 = random_floats(M * ldc, 23);
        std::vector<float> c = c0;
        {
          const Bf16Products bf16;
          gemm(ta, tb, M, N, K, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        }
        for (std::size_t i = 0; i < M; ++i)
          for (std::size_t j = 0; j < N; ++j) {
            double sum = beta * double(c0[i * ldc + j]), scale = std::abs(sum);
            for (std::size_t k = 0; k < K; ++k) {
              const double term = double(round_bf16(ta ? a[k * lda + i] : a[i * lda + k])) *
                                  round_bf16(tb ? b[j * ldb + k] : b[k * ldb + j]);
              sum += term;
              scale += std::abs(term);
            }
            ASSERT_TRUE(sum_close(c[i * ldc + j], sum, scale, K))
                << (ta ? "Aᵀ " : "") << (tb ? "Bᵀ " : "") << "beta " << beta << " at " << i << ", " << j;
          }
      }
  // 8 × 8 × 8: f32, bit for bit the product made without asking.
  const std::vector<float> a = random_floats(64, 1), b = random_floats(64, 2);
  std::vector<float> plain(64), asked(64);
  gemm(false, false, 8, 8, 8, a.data(), 8, b.data(), 8, 0.0f, plain.data(), 8);
  {
    const Bf16Products bf16;
    gemm(false, false, 8, 8, 8, a.data(), 8, b.data(), 8, 0.0f, asked.data(), 8);
  }
  EXPECT_EQ(plain, asked);
}

// Called on every thread of a parallel region, each its own product: each is whole (the
// product runs on its caller alone there, not planned for a team it does not have).
TEST(Bf16Gemm, EachThreadOfAParallelRegionGetsItsWholeProduct) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  const std::size_t M = 96, N = 80, K = 64;
  const std::vector<std::uint16_t> a = to_bf16(random_floats(M * K, 31)), b = to_bf16(random_floats(K * N, 32));
  std::vector<double> expected(M * N, 0.0), scale(M * N, 0.0);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j)
      for (std::size_t k = 0; k < K; ++k) {
        const double term = double(bf16_to_f32(a[i * K + k])) * bf16_to_f32(b[k * N + j]);
        expected[i * N + j] += term;
        scale[i * N + j] += std::abs(term);
      }
  std::vector<std::vector<float>> results(2, std::vector<float>(M * N, -1.0f));
#pragma omp parallel for num_threads(2)
  for (int t = 0; t < 2; ++t)
    gemm_bf16(false, false, M, N, K, a.data(), K, b.data(), N, 0.0f, results[std::size_t(t)].data(), N);
  for (const std::vector<float>& c : results)
    for (std::size_t i = 0; i < M * N; ++i)
      ASSERT_TRUE(sum_close(c[i], expected[i], scale[i], K)) << i;
}

TEST(Bf16Products, AreOffUnlessAskedAndAskedOnlyOnTheThreadThatAsked) {
  EXPECT_FALSE(bf16_products());
  {
    const Bf16Products on;
    EXPECT_EQ(bf16_products(), bf16_products_available());
    bool elsewhere = true;
    std::thread([&] { elsewhere = bf16_products(); }).join();
    EXPECT_FALSE(elsewhere);
    {
      const Bf16Products off(false);
      EXPECT_FALSE(bf16_products());
    }
    EXPECT_EQ(bf16_products(), bf16_products_available());
  }
  EXPECT_FALSE(bf16_products());
  EXPECT_EQ(bf16_products_isa() != "none", bf16_products_available());
}

// A weight as a model can hold it: `type` in three pieces side by side (W_Q | W_K | W_V),
// each stored transposed ([cols × in], an nn.Linear's) or as is ([in × cols], a Conv1D's);
// random values for a float type, random blocks (scales set finite) for a quantized one.
struct Weight {
  std::vector<std::vector<std::byte>> bytes;
  Tensor tensor;
  std::vector<float> logical;  // [in × out] its values, read back by Tensor::to_f32
};

Weight weight_of(GgmlType type, bool transposed, std::size_t in, const std::vector<std::size_t>& widths,
                 std::uint64_t seed) {
  Weight w;
  std::vector<Tensor::Piece> pieces;
  std::size_t out = 0;
  for (std::size_t p = 0; p < widths.size(); ++p) {
    const std::size_t cols = widths[p], rows = transposed ? cols : in, width = transposed ? in : cols;
    std::vector<std::byte> bytes(rows * ggml_row_bytes(type, width));
    if (ggml_block_values(type) == 1) {
      const std::vector<float> values = random_floats(rows * width, seed + p);
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t h = type == GgmlType::f16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
        if (type == GgmlType::f32)
          std::memcpy(bytes.data() + 4 * i, &values[i], 4);
        else
          std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    } else {
      SplitMix64 rng(seed + p);
      for (std::byte& b : bytes)
        b = std::byte(rng.next() & 0xFF);
      const std::size_t block = ggml_block_bytes(type), d_at = type == GgmlType::q6_k ? 208 : 0;
      const std::uint16_t d = f32_to_f16(0.01f);
      for (std::size_t at = 0; at < bytes.size(); at += block) {
        std::memcpy(bytes.data() + at + d_at, &d, 2);
        if (type == GgmlType::q4_k) std::memcpy(bytes.data() + at + 2, &d, 2);  // dmin
      }
    }
    w.bytes.push_back(std::move(bytes));
    pieces.push_back({cols, type, transposed, w.bytes.back().data()});
    out += cols;
  }
  w.tensor = Tensor::view(in, out, pieces, nullptr);
  w.logical = w.tensor.to_f32();
  return w;
}

// y = beta·y0 + bf16(x) · bf16(W) as multiply() under Bf16Products must give it, each entry
// checked as a sum of exact products.
void expect_bf16_product(const std::vector<float>& y, const std::vector<float>& y0, float beta,
                         const std::vector<float>& x, std::size_t n, const std::vector<float>& logical, std::size_t in,
                         std::size_t out, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < out; ++j) {
      double sum = beta * double(y0[i * out + j]), scale = std::abs(sum);
      for (std::size_t k = 0; k < in; ++k) {
        const double term = double(round_bf16(x[i * in + k])) * round_bf16(logical[k * out + j]);
        sum += term;
        scale += std::abs(term);
      }
      ASSERT_TRUE(sum_close(y[i * out + j], sum, scale, in)) << what << ", row " << i << ", column " << j;
    }
}

TEST(Bf16Products, EveryLayoutAndTypeMultipliesLikeItsValuesRoundedToBf16) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  struct Case {
    GgmlType type;
    bool transposed;
    std::size_t in;
  };
  const std::vector<Case> cases = {{GgmlType::f32, false, 113},  {GgmlType::f32, true, 113},
                                   {GgmlType::f16, false, 75},   {GgmlType::f16, true, 75},
                                   {GgmlType::bf16, false, 113}, {GgmlType::bf16, true, 113},
                                   {GgmlType::q8_0, true, 256},  {GgmlType::q4_k, true, 512},
                                   {GgmlType::q6_k, true, 256},  {GgmlType::q4_0, true, 256}};
  for (const Case& c : cases) {
    const Weight w = weight_of(c.type, c.transposed, c.in, {40, 3, 17}, 7);
    const std::size_t out = 60;
    for (const std::size_t n : {5u, 113u}) {
      const std::vector<float> x = random_floats(n * c.in, 9), y0 = random_floats(n * out, 10);
      std::vector<float> y = y0;
      {
        const Bf16Products bf16;
        multiply(x.data(), n, c.in, w.tensor, out, y.data(), 1.0f);
      }
      expect_bf16_product(y, y0, 1.0f, x, n, w.logical, c.in, out,
                          std::string(ggml_type_name(c.type)) + (c.transposed ? " transposed" : " as is") + ", " +
                              std::to_string(n) + " rows");
    }
  }
}

TEST(Bf16Products, AnOwnedMatrixLargerThanOneBlockAndTheUnembeddingToo) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  // 700 × 3000 f32 values: more than the 2^21 rounded a block at a time, so two blocks of
  // input rows add their terms into y.
  const std::size_t in = 700, out = 3000, n = 5;
  const Tensor owned(random_floats(in * out, 4));
  const std::vector<float> x = random_floats(n * in, 5);
  std::vector<float> y(n * out), zero(n * out);
  {
    const Bf16Products bf16;
    multiply(x.data(), n, in, owned, out, y.data());
  }
  expect_bf16_product(y, zero, 0.0f, x, n, owned.to_f32(), in, out, "owned 700 × 3000");
  // An F16 linear layer stored [out × in] (transposed), 2100 × 1024: two blocks of its rows,
  // each its own columns of y.
  const Weight linear = weight_of(GgmlType::f16, true, 1024, {2100}, 12);
  const std::vector<float> x2 = random_floats(n * 1024, 13);
  std::vector<float> y2(n * 2100), zero2(n * 2100);
  {
    const Bf16Products bf16;
    multiply(x2.data(), n, 1024, linear.tensor, 2100, y2.data());
  }
  expect_bf16_product(y2, zero2, 0.0f, x2, n, linear.logical, 1024, 2100, "F16 2100 × 1024, transposed");
  // logits = x · Eᵀ, E [vocab × d] in bf16, as a tied embedding is read.
  const std::size_t vocab = 3001, d = 96;
  const Weight e = weight_of(GgmlType::bf16, false, vocab, {d}, 11);  // [vocab × d] as is
  std::vector<float> transposed(d * vocab);                           // Eᵀ [d × vocab], the product's W
  for (std::size_t v = 0; v < vocab; ++v)
    for (std::size_t k = 0; k < d; ++k)
      transposed[k * vocab + v] = e.logical[v * d + k];
  const std::vector<float> h = random_floats(n * d, 6);
  std::vector<float> logits(n * vocab), none(n * vocab);
  {
    const Bf16Products bf16;
    multiply_by_transpose(h.data(), n, d, e.tensor, vocab, logits.data());
  }
  expect_bf16_product(logits, none, 0.0f, h, n, transposed, d, vocab, "the unembedding");
}

// Generation's 1 to 4 rows are as they were without the switch, bit for bit: on the
// matrix–vector kernels (Q4_K), widened in blocks shared over a team of threads (Q4_0, which
// those kernels do not read: every block f32, not bf16 on the asking thread alone), and by
// the transpose (the unembedding).
TEST(Bf16Products, GenerationsFewRowsStayAsTheyWereBitForBit) {
  const std::size_t in = 512, rows = 2000;
  for (const GgmlType type : {GgmlType::q4_k, GgmlType::q4_0}) {
    const Weight w = weight_of(type, true, in, {rows}, 3);
    for (const std::size_t n : {1u, 4u}) {
      const std::vector<float> x = random_floats(n * in, 2);
      std::vector<float> plain(n * rows), asked(n * rows);
      multiply(x.data(), n, in, w.tensor, rows, plain.data());
      {
        const Bf16Products bf16;
        multiply(x.data(), n, in, w.tensor, rows, asked.data());
      }
      EXPECT_EQ(plain, asked) << ggml_type_name(type) << ", " << n << " rows";
    }
  }
  const Weight e = weight_of(GgmlType::f16, false, 3000, {64}, 4);  // [vocab × d] as is
  const std::vector<float> h = random_floats(3 * 64, 5);
  std::vector<float> plain(3 * 3000), asked(3 * 3000);
  multiply_by_transpose(h.data(), 3, 64, e.tensor, 3000, plain.data());
  {
    const Bf16Products bf16;
    multiply_by_transpose(h.data(), 3, 64, e.tensor, 3000, asked.data());
  }
  EXPECT_EQ(plain, asked) << "the unembedding";
}

// The whole forward of three small checkpoints (GPT-2 in bf16, SmolLM in bf16, Qwen2 in f16)
// with every product in bf16: each logit within bf16's rounding of the f32 forward's (tested
// against NumPy in test_families.cpp). Measured on these: the largest difference is about
// 1% of the largest logit; a product read in the wrong layout or a block skipped would be
// of the logits' own size.
TEST(Bf16Products, AModelsForwardStaysWithinBf16RoundingOfTheF32One) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  for (const char* dir : {"tiny-bf16", "smollm-bf16", "qwen2-f16"}) {
    const Model model = load_model((std::filesystem::path(ATTNLAB_MODEL_FIXTURE_DIR) / dir).string());
    std::vector<int> ids(std::min<std::size_t>(12, model.config.n_positions));  // more than generation's 4 rows
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = int((i * 7 + 3) % model.config.vocab_size);
    const ForwardResult f32 = model_forward(model, ids);
    ForwardResult bf16;
    {
      const Bf16Products on;
      bf16 = model_forward(model, ids);
    }
    ASSERT_EQ(f32.logits.size(), bf16.logits.size());
    double largest = 0, difference = 0;
    for (std::size_t i = 0; i < f32.logits.size(); ++i) {
      largest = std::max(largest, std::abs(double(f32.logits[i])));
      difference = std::max(difference, std::abs(double(f32.logits[i]) - bf16.logits[i]));
    }
    std::printf("%s: largest |logit| %.4f, largest difference %.5f (%.2f%%)\n", dir, largest, difference,
                100 * difference / largest);
    EXPECT_GT(difference, 0.0) << dir << ": the products did not change at all; were they bf16?";
    EXPECT_LE(difference, 0.04 * largest) << dir;
  }
}

// A training step's loss and gradients with the products in bf16 (TrainingOptions::bf16),
// the batch split over two threads (each must take the setting): within bf16's rounding of
// the f32 step's (tested against PyTorch and finite differences in test_training.cpp), and
// not equal to it. A model wide enough (d_model 64, context 64) that its products pass the
// 2^18 multiply-adds from which they go bf16. Measured: the gradients within about 0.5%.
TEST(Bf16Products, ATrainingStepsGradientsStayWithinBf16RoundingOfTheF32Ones) {
  if (!bf16_products_available()) GTEST_SKIP() << kNoBf16Units;
  TrainSettings s;
  s.d_model = 64, s.heads = 2, s.context = 64, s.vocab = 300;
  const Model model = initial_model(s);
  const std::vector<float> p = flatten<float>(model);
  Batch batch;
  for (std::size_t b = 0; b < 4; ++b)
    batch.push_back(induction_sequence(b, s.context + 1, s.vocab).ids);
  std::vector<float> f32(p.size()), bf16(p.size());
  const float loss = loss_and_gradients<float>(model.config, p, batch, f32, {.threads = 2});
  const float loss_bf16 = loss_and_gradients<float>(model.config, p, batch, bf16, {.threads = 2, .bf16 = true});
  EXPECT_NEAR(loss_bf16, loss, 0.01 * loss);
  double norm = 0, difference = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    norm += double(f32[i]) * f32[i];
    difference += (double(bf16[i]) - f32[i]) * (double(bf16[i]) - f32[i]);
  }
  const double relative = std::sqrt(difference / norm);
  std::printf("gradients: |g_bf16 - g_f32| / |g_f32| = %.5f\n", relative);
  EXPECT_GT(relative, 0.0) << "the products did not change at all; were they bf16?";
  EXPECT_LT(relative, 0.05);
}

// The tiles: present exactly where /proc/cpuinfo lists amx_tile and amx_bf16 (amx_int8), and
// there the probes' known sums come out right and oneDNN multiplies on them.
bool cpuinfo_lists_amx(const std::string& unit) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool tile = false, listed = false;
    for (std::string w; words >> w;) {
      tile = tile || w == "amx_tile";
      listed = listed || w == unit;
    }
    return tile && listed;
  }
  return false;
}

TEST(AmxTiles, AreUsedExactlyWhereTheCpuHasThemAndComputeAKnownSum) {
  const bool int8 = cpuinfo_lists_amx("amx_int8");
  EXPECT_EQ(amx_int8_available(), int8);
  if (int8)
    EXPECT_GT(amx_int8_peak_gops(1, 100000), 0.0) << "the int8 probe's known sum came out wrong";
  else
    EXPECT_EQ(amx_int8_peak_gops(1, 1000), 0.0);
  const bool listed = cpuinfo_lists_amx("amx_bf16");
  EXPECT_EQ(amx_bf16_available(), listed);
  if (!listed) {
    EXPECT_EQ(amx_bf16_peak_gflops(1, 1000), 0.0);
    EXPECT_NE(bf16_products_isa(), "avx512_core_amx");
    GTEST_SKIP() << "no AMX on this CPU (amx_tile and amx_bf16 absent from /proc/cpuinfo): the tile probe and "
                    "oneDNN's tile products are checked on CPUs that have them; here the products use "
                 << bf16_products_isa();
  }
  EXPECT_GT(amx_bf16_peak_gflops(1, 100000), 0.0) << "the probe's known sum came out wrong";
  EXPECT_EQ(bf16_products_isa(), "avx512_core_amx");
}

// The int8 dot products' probe (VNNI): a peak where the kernels' int8 products run (the tier
// with AVX-512 BF16 and VNNI), its known sums right; none elsewhere.
TEST(Int8Peak, IsMeasuredWhereTheInt8ProductsRunAndNowhereElse) {
  if (best_isa() == Isa::avx512_bf16)
    EXPECT_GT(int8_peak_gops(1, 100000), 0.0) << "the probe's known sums came out wrong";
  else
    EXPECT_EQ(int8_peak_gops(1, 1000), 0.0);
}

}  // namespace bf16_products_test
