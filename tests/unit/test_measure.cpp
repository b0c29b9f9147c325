// The measures: the grid kernel against the reference, doubling lengths and the log-log
// fit, the cost measure's shape (never its wall-clock time), the KV measure agreeing with
// the formula, and work too large for the machine refused up front.
#include <gtest/gtest.h>

#include <cmath>

#include "../sanitizers.hpp"
#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/analysis/measure.hpp"
#include "attnlab/analysis/memory.hpp"
#include "attnlab/analysis/models.hpp"
#include "attnlab/core/attention.hpp"
#include "attnlab/core/error.hpp"
#include "compare.hpp"
#include "random_inputs.hpp"

using namespace attnlab;
using attnlab::test::all_close;

namespace {

// The grid kernel's output against attnlab::attend on the same q, k, v (identity weights).
Matrix kernel_output(const MeasuredKernel& kernel, const Matrix& q, const Matrix& k, const Matrix& v, bool causal) {
  std::vector<float> qf(q.data.begin(), q.data.end()), kf(k.data.begin(), k.data.end()),
      vf(v.data.begin(), v.data.end());
  std::vector<float> out(q.rows * q.cols);
  kernel.run({q.rows, k.rows, q.cols, qf.data(), kf.data(), vf.data(), causal}, out);
  Matrix m(q.rows, q.cols);
  for (std::size_t i = 0; i < out.size(); ++i)
    m.data[i] = out[i];
  return m;
}

Matrix identity(std::size_t d) {
  Matrix m(d, d);
  for (std::size_t i = 0; i < d; ++i)
    m(i, i) = 1;
  return m;
}

}  // namespace

TEST(Measure, EveryKernelMatchesTheReferenceAttention) {
  SplitMix64 rng(3);
  for (const MeasuredKernel& kernel : measured_kernels())
    for (bool causal : {false, true})
      for (std::size_t n : {1u, 3u, 75u}) {
        SCOPED_TRACE(kernel.name + (causal ? " causal n=" : " n=") + std::to_string(n));
        // Inputs rounded to f32 first, so both sides see the same numbers.
        auto f32 = [](Matrix m) {
          for (double& x : m.data)
            x = static_cast<float>(x);
          return m;
        };
        const Matrix q = f32(test::random_matrix(rng, n, 16)), k = f32(test::random_matrix(rng, n, 16)),
                     v = f32(test::random_matrix(rng, n, 16));
        // The reference's weights with W_Q = W_K = I (scores q·k), then weights · v.
        AttentionInput input;
        input.queries_from = q;
        input.keys_from = k;
        input.mask.causal = causal;
        const Matrix id = identity(16);
        const HeadTrace reference = attend_head(input, {"h", id, id, id});
        const Matrix expected = matmul(reference.weights, v);
        EXPECT_TRUE(all_close(kernel_output(kernel, q, k, v, causal), expected, {2e-5, 2e-5}));
      }
}

TEST(Measure, DoublingLengthsAndTheLogLogFit) {
  EXPECT_EQ(doubling_lengths(4096, 6, 16), (std::vector<std::uint64_t>{128, 256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(doubling_lengths(100, 6, 16), (std::vector<std::uint64_t>{25, 50, 100}));
  EXPECT_EQ(doubling_lengths(10, 6, 16), (std::vector<std::uint64_t>{10}));
  const std::vector<double> x{1, 2, 4, 8}, y{3, 12, 48, 192};  // 3·x²
  EXPECT_NEAR(fit_exponent(x, y), 2.0, 1e-12);
}

// The grid kernel's working memory is the n×n f32 grid: counted by the heap counter as
// malloc's usable size, which rounds a block up by at most one page. Time and resident
// memory are machine-dependent: `attnlab cost --measure` reports them, no test asserts them.
TEST(Measure, GridCostGrowsAsNSquaredInMemory) {
  ASSERT_TRUE(memory::heap_counted()) << "the unit tests link attnlab::heap_counter";
  CostMeasureOptions options;
  options.max_tokens = 1024;
  options.d_k = 64;
  options.points = 4;  // 128 .. 1024
  const CostMeasurement m = measure_attention_cost(options, find_measured_kernel("grid", "kernel"));
  ASSERT_EQ(m.points.size(), 4u);
  for (const CostPoint& p : m.points) {
    EXPECT_GE(p.scratch_peak_bytes, p.n * p.n * 4) << "the grid kernel's working memory is the n×n f32 grid";
    EXPECT_LE(p.scratch_peak_bytes, p.n * p.n * 4 + 4096 + 64) << "the grid plus malloc's rounding, nothing more";
    EXPECT_GE(p.runs, 1);
  }
  ASSERT_TRUE(m.memory_exponent);
  EXPECT_NEAR(*m.memory_exponent, 2.0, 0.01);
}

TEST(Measure, TheTiledKernelNeverBuildsTheGrid) {
  CostMeasureOptions options;
  options.max_tokens = 1024;
  options.d_k = 64;
  options.points = 4;
  const CostMeasurement m = measure_attention_cost(options, find_measured_kernel("tiled", "kernel"));
  // A few tiles whatever n is: at n = 1024 far below the 4 MiB grid.
  EXPECT_LT(m.points.back().scratch_peak_bytes, 1024u * 1024 * 4 / 8);
  ASSERT_TRUE(m.memory_exponent);
  EXPECT_LT(*m.memory_exponent, 1.5);
}

TEST(Measure, UnknownKernelListsTheKernels) {
  try {
    find_measured_kernel("fast", "--kernel");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--kernel: unknown kernel \"fast\"; the kernels are: grid, tiled");
  }
}

TEST(Measure, KVCacheMeasuredAgreesWithTheFormulaWithinFivePercentAtTheLargestContext) {
#if ATTNLAB_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator keeps its own books: malloc's counts mean nothing under it";
#endif
  KVMeasureOptions options;
  options.model = find_model("gpt2", "model");
  options.dtype = DType::f16;
  options.max_context = 4096;
  options.extra_contexts = {1000};
  const KVMeasurement m = measure_kv_cache(options);
  EXPECT_EQ(m.layers, 12u) << "gpt2's 12 layers at 4096 tokens (144 MiB) fit: all are decoded";
  ASSERT_GE(m.points.size(), 6u);
  EXPECT_EQ(m.points.back().context, 4096u);
  bool has_extra = false;
  for (const KVPoint& p : m.points) {
    has_extra = has_extra || p.context == 1000;
    EXPECT_EQ(p.formula_bytes, kv_cache_bytes(options.model, DType::f16, p.context));
    EXPECT_EQ(p.cache_bytes, p.formula_bytes) << "reserve sizes the cache exactly";
  }
  EXPECT_TRUE(has_extra);
  const KVPoint& last = m.points.back();
  EXPECT_EQ(last.formula_bytes, 2ull * 12 * 12 * 64 * 4096 * 2);
  const double formula = static_cast<double>(last.formula_bytes);
  EXPECT_NEAR(static_cast<double>(last.allocator_bytes) / formula, 1.0, 0.05);
}

TEST(Measure, WorkTooLargeForTheMachineIsRefusedUpFront) {
  KVMeasureOptions options;
  options.model = find_model("llama-3-70b", "model");
  options.dtype = DType::f32;
  options.max_context = 1u << 24;
  options.layers = 80;
  try {
    measure_kv_cache(options);
    FAIL() << "a 80-layer cache of 16M tokens (~10 TiB) was not refused";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("measure: decoding 80 layers to 16,777,216 tokens needs ", 0), 0u) << message;
    EXPECT_NE(message.find("available (MemAvailable in /proc/meminfo)"), std::string::npos) << message;
  }
  CostMeasureOptions cost;
  cost.max_tokens = 1u << 22;
  try {
    measure_attention_cost(cost, find_measured_kernel("grid", "kernel"));
    FAIL() << "a 64 TiB grid was not refused";
  } catch (const InputError& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind("measure: timing the grid kernel at n = 4,194,304 (d_k 128) needs 64.01 TiB", 0),
        0u)
        << e.what();
  }
}

TEST(Measure, DefaultLayersFitTheMachine) {
  KVMeasureOptions options;
  options.model = find_model("llama-3-8b", "model");
  options.max_context = 131072;
  const std::uint64_t layers = kv_measure_layers(options);
  EXPECT_GE(layers, 1u);
  EXPECT_LE(layers, 32u);
  EXPECT_LE(layers * kv_cache_bytes(ModelShape{"", "", 1, 0, 32, 8, 128, 0, ""}, DType::f16, 131072), 2ull << 30);
}
