// The tiled kernel against the reference kernel over a sweep of shapes that are and are
// not tile multiples, grouped KV heads, causal and windowed masks (including rows that see
// no key at all), temperatures, extreme scores, two tile sizes, 1 and 2 threads, and every
// instruction set this CPU can run.
//
// Tolerance (f32): |tiled - reference| <= 3e-5 + 3e-4·|reference|, scaled by 1/T. The
// tiled kernel rounds scores to f32 (relative error ~1e-7 · d_k summands) and uses a
// polynomial 2^x (relative error 2e-7); the reference works in double. A logit error ε
// becomes a relative weight error ε, and logits are scores / T, so the bound grows as 1/T.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "compare.hpp"
#include "runnable_isas.hpp"

using namespace attnlab;
using test::runnable_isas;

namespace {

std::vector<float> random_floats(SplitMix64& rng, std::size_t count, double scale = 1.0) {
  std::vector<float> x(count);
  for (float& v : x)
    v = static_cast<float>(rng.normal() * scale);
  return x;
}

struct Case {
  AttentionShape shape;
  AttentionOptions options;
  double input_scale = 1.0;
  std::string describe() const {
    return fmt::format(
        "H={} H_kv={} n={} m={} d_k={} d_v={} causal={} window={} T={} tiles={}x{} threads={} isa={} x{}", shape.heads,
        shape.kv_heads, shape.n, shape.m, shape.d_k, shape.d_v, options.causal, options.window.value_or(0),
        options.temperature, options.block_q, options.block_k, options.threads, to_string(*options.isa), input_scale);
  }
};

void expect_tiled_matches_reference(const Case& c) {
  SCOPED_TRACE(c.describe());
  const AttentionShape& s = c.shape;
  SplitMix64 rng(s.n * 1000003 + s.m * 1009 + s.d_k);
  const auto q = random_floats(rng, s.heads * s.n * s.d_k, c.input_scale);
  const auto k = random_floats(rng, s.kv_heads * s.m * s.d_k, c.input_scale);
  const auto v = random_floats(rng, s.kv_heads * s.m * s.d_v);
  std::vector<float> fast(s.heads * s.n * s.d_v, NAN), slow(s.heads * s.n * s.d_v, NAN);
  flash_attention(q.data(), k.data(), v.data(), fast.data(), s, c.options);
  reference_attention(q.data(), k.data(), v.data(), slow.data(), s, c.options);
  const double loosen = 1.0 / std::min(1.0, c.options.temperature) * c.input_scale * c.input_scale;
  EXPECT_TRUE(test::all_close(fast, slow, {3e-5 * loosen, 3e-4 * loosen}));
}

}  // namespace

TEST(FlashAttention, SweepOfShapesMasksTilesThreadsAndInstructionSets) {
  const std::size_t sizes[] = {1, 3, 64, 75, 113, 1000};
  const std::size_t widths[] = {8, 64, 128};
  const std::pair<std::size_t, std::size_t> head_groups[] = {{1, 1}, {4, 1}, {8, 2}};
  const double temperatures[] = {1.0, 0.1, 3.0};
  const auto isas = runnable_isas();
  std::size_t counter = 0;
  for (std::size_t n : sizes)
    for (std::size_t m : sizes)
      for (std::size_t d_k : widths) {
        Case c;
        const bool large = n * m >= 100000;
        const auto [heads, kv_heads] = head_groups[large ? 0 : counter % 3];
        c.shape = {heads, kv_heads, n, m, d_k, counter % 4 == 3 ? d_k / 2 + 4 : d_k};
        c.options.causal = (counter / 3) % 2 == 1;
        if ((counter / 2) % 3 == 2) c.options.window = 1 + counter % 40;
        c.options.temperature = temperatures[(counter / 5) % 3];
        c.options.block_q = counter % 2 ? 96 : 12;
        c.options.block_k = counter % 2 ? 128 : 32;
        c.options.threads = 1 + (counter / 7) % 2;
        c.options.isa = isas[counter % isas.size()];
        expect_tiled_matches_reference(c);
        ++counter;
      }
}

TEST(FlashAttention, MicroTileEdgesAtTheDefaultTileSizes) {
  // With AVX-512 the scores are computed in micro-tiles of 8 keys × 3 vectors of queries and
  // the mixing in 6 queries × 4 vectors of d_v; a tile of 48 keys and a block of 288 queries
  // by default (96 when causal). Every remainder of rows (1..8 keys, 1..5 queries) and every panel width
  // (1..8 vectors) occurs here, on every instruction set.
  const std::size_t key_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 53, 100};
  const std::size_t query_counts[] = {1, 17, 49, 80, 289};
  std::size_t counter = 0;
  for (std::size_t d_v = 16; d_v <= 128; d_v += 16)
    for (std::size_t m : key_counts)
      for (Isa isa : runnable_isas()) {
        Case c;
        c.shape = {2, 1, query_counts[counter % 5], m, counter % 2 ? d_v : d_v + 8, d_v};
        c.options.causal = counter % 3 == 0;
        c.options.isa = isa;
        expect_tiled_matches_reference(c);
        ++counter;
      }
}

TEST(FlashAttention, TransposedOutputWhenTheValueWidthIsNotWholeVectors) {
  // A d_v that is not a multiple of 16 keeps the output as Oᵀ (d_v rows × queries) and mixes
  // in the scores' micro-tile: every remainder of 1..7 rows of d_v below a block of 8, one to
  // three vectors of queries and their tails, masked and open tiles, on every instruction set.
  const std::size_t value_widths[] = {1, 7, 9, 15, 17, 40, 72, 73, 79, 100, 130};
  const std::size_t key_counts[] = {1, 5, 48, 49, 100};
  const std::size_t query_counts[] = {1, 17, 49, 80, 289};
  std::size_t counter = 0;
  for (std::size_t d_v : value_widths)
    for (std::size_t m : key_counts)
      for (Isa isa : runnable_isas()) {
        Case c;
        c.shape = {2, 1, query_counts[counter % 5], m, counter % 2 ? d_v : 72, d_v};
        c.options.causal = counter % 3 == 0;
        if (counter % 7 == 3) c.options.window = 1 + counter % 30;
        c.options.isa = isa;
        expect_tiled_matches_reference(c);
        ++counter;
      }
}

TEST(FlashAttention, RowsThatSeeNoKeyGiveZeroNotNaN) {
  // n > m with a causal mask: query i stands at i + m - n, so the first n - m rows see nothing.
  for (Isa isa : runnable_isas()) {
    Case c{{2, 1, 113, 75, 64, 64}, {}};
    c.options.causal = true;
    c.options.isa = isa;
    expect_tiled_matches_reference(c);
    SplitMix64 rng(5);
    const auto q = random_floats(rng, 2 * 113 * 64), k = random_floats(rng, 75 * 64), v = random_floats(rng, 75 * 64);
    std::vector<float> out(2 * 113 * 64, NAN);
    flash_attention(q.data(), k.data(), v.data(), out.data(), c.shape, c.options);
    for (std::size_t i = 0; i < 113 - 75; ++i)
      EXPECT_EQ(out[i * 64], 0.0f) << "row " << i;
  }
}

TEST(FlashAttention, ExtremeScoresStayFiniteAndCorrect) {
  // Logits hundreds apart: a running max that missed any key's score would overflow 2^x.
  // Open tiles take their max from the score GEMM's registers, masked ones from Sᵀ.
  for (Isa isa : runnable_isas())
    for (bool causal : {true, false}) {
      Case c{{1, 1, 75, 113, 64, 64}, {}, 6.0};  // scores ~ 36·√64: logits in the hundreds
      c.options.isa = isa;
      c.options.causal = causal;
      expect_tiled_matches_reference(c);
    }
}

TEST(FlashAttention, TheRunningMaxSeesEveryKeyOfAnOpenTile) {
  // In the second tile of 48 keys one key, at position p, scores ~1150 (log2 units) above
  // the rest. Open tiles take each query's max from the score GEMM's registers: a max that
  // missed that key's row for any p would make its weight 2^1150, an overflow to inf.
  const AttentionShape s{1, 1, 16, 96, 16, 16};
  SplitMix64 rng(11);
  const auto v = random_floats(rng, s.m * s.d_v);
  for (std::size_t p = 0; p < 48; ++p)
    for (Isa isa : runnable_isas()) {
      SCOPED_TRACE(fmt::format("p={} isa={}", p, to_string(isa)));
      auto q = random_floats(rng, s.n * s.d_k, 0.1), k = random_floats(rng, s.m * s.d_k, 0.1);
      for (std::size_t i = 0; i < s.n; ++i)
        q[i * s.d_k] = 400.0f;
      for (std::size_t j = 0; j < s.m; ++j)
        k[j * s.d_k] = j == 48 + p ? 8.0f : 0.0f;
      AttentionOptions options;
      options.isa = isa;
      std::vector<float> fast(s.n * s.d_v, NAN), slow(s.n * s.d_v, NAN);
      flash_attention(q.data(), k.data(), v.data(), fast.data(), s, options);
      reference_attention(q.data(), k.data(), v.data(), slow.data(), s, options);
      EXPECT_TRUE(test::all_close(fast, slow, {3e-5, 3e-4}));
    }
}

TEST(FlashAttention, HeadSizesModelsUseThatAreNotPowersOfTwo) {
  for (std::size_t d : {72, 80, 96})
    for (Isa isa : runnable_isas()) {
      Case c{{4, 2, 200, 200, d, d}, {}};
      c.options.isa = isa;
      c.options.causal = d == 80;
      expect_tiled_matches_reference(c);
    }
}

// A model's layout: every head of a token in one row of a fused projection [n × (H·d_k +
// H_kv·d_k + H_kv·d_v + 3)], queries, keys and values side by side (3 columns of gap at the
// end), and the outputs into [n × H·d_v + 5]. The kernel reads and writes them where they lie
// and computes, bit for bit, what it computes on the heads copied out one after another; the
// gaps of the output stay as they were.
TEST(FlashAttention, OperandsWhereAModelsFusedProjectionHoldsThemGiveTheContiguousResults) {
  std::size_t counter = 0;
  for (const AttentionShape s : {AttentionShape{4, 2, 113, 113, 64, 64}, AttentionShape{3, 1, 75, 75, 72, 72},
                                 AttentionShape{2, 2, 40, 40, 8, 20}, AttentionShape{2, 1, 1, 1, 64, 64}})
    for (Isa isa : runnable_isas())
      for (Precision precision : {Precision::f32, Precision::bf16}) {
        AttentionOptions options;
        options.isa = isa;
        options.precision = precision;
        options.causal = counter % 2 == 0;
        if (counter % 3 == 1) options.window = 7;
        options.block_k = counter % 2 ? 48 : 33;
        ++counter;
        SCOPED_TRACE(fmt::format("H={} H_kv={} n={} d_k={} d_v={} isa={} {} causal={} window={}", s.heads, s.kv_heads,
                                 s.n, s.d_k, s.d_v, to_string(isa), precision == Precision::bf16 ? "bf16" : "f32",
                                 options.causal, options.window.value_or(0)));
        const std::size_t q_width = s.heads * s.d_k, k_width = s.kv_heads * s.d_k, v_width = s.kv_heads * s.d_v;
        const std::size_t row = q_width + k_width + v_width + 3, out_row = s.heads * s.d_v + 5;
        SplitMix64 rng(s.n + s.d_k + counter);
        const auto fused = random_floats(rng, s.n * row);
        const float* q_at = fused.data();
        const float* k_at = q_at + q_width;
        const float* v_at = k_at + k_width;
        const AttentionLayout layout{.q_head = s.d_k,
                                     .q_row = row,
                                     .k_head = s.d_k,
                                     .k_row = row,
                                     .v_head = s.d_v,
                                     .v_row = row,
                                     .out_head = s.d_v,
                                     .out_row = out_row};
        std::vector<float> in_place(s.n * out_row, -7.0f);
        flash_attention(q_at, k_at, v_at, in_place.data(), s, layout, options);

        // The same heads copied out, [H][n][d_k], [H_kv][m][d_k], [H_kv][m][d_v].
        std::vector<float> q(s.heads * s.n * s.d_k), k(s.kv_heads * s.m * s.d_k), v(s.kv_heads * s.m * s.d_v);
        for (std::size_t i = 0; i < s.n; ++i) {
          for (std::size_t h = 0; h < s.heads; ++h)
            std::copy_n(q_at + i * row + h * s.d_k, s.d_k, q.begin() + (h * s.n + i) * s.d_k);
          for (std::size_t g = 0; g < s.kv_heads; ++g) {
            std::copy_n(k_at + i * row + g * s.d_k, s.d_k, k.begin() + (g * s.m + i) * s.d_k);
            std::copy_n(v_at + i * row + g * s.d_v, s.d_v, v.begin() + (g * s.m + i) * s.d_v);
          }
        }
        std::vector<float> contiguous(s.heads * s.n * s.d_v, NAN);
        flash_attention(q.data(), k.data(), v.data(), contiguous.data(), s, options);

        std::size_t differ = 0, gaps_written = 0;
        for (std::size_t i = 0; i < s.n; ++i) {
          for (std::size_t h = 0; h < s.heads; ++h)
            for (std::size_t t = 0; t < s.d_v; ++t)
              differ += in_place[i * out_row + h * s.d_v + t] != contiguous[(h * s.n + i) * s.d_v + t];
          for (std::size_t t = s.heads * s.d_v; t < out_row; ++t)
            gaps_written += in_place[i * out_row + t] != -7.0f;
        }
        EXPECT_EQ(differ, 0u);
        EXPECT_EQ(gaps_written, 0u);
      }
}

TEST(FlashAttention, FlopCountFollowsTheFlashAttentionConvention) {
  const AttentionShape s{2, 2, 8, 8, 4, 4};
  EXPECT_EQ(attention_flops(s, false), 2 * 4.0 * 8 * 8 * 4);
  EXPECT_EQ(attention_flops(s, true), 2 * 4.0 * 8 * 8 * 4 / 2);
}

// bf16: Q·c, K, P and V rounded to bf16 (8 significant bits, relative error <= 2^-9), with
// f32 accumulation. Each rounding moves a weight or value by at most ~0.2%; a score over
// d_k terms by ~0.2%·|score|. Tolerance: |bf16 - reference| <= 2e-2 + 2e-2·|reference|.
TEST(FlashAttentionBf16, MatchesTheReferenceWithinBf16Precision) {
  std::size_t counter = 0;
  for (std::size_t n : {1, 75, 113, 300})
    for (std::size_t d : {8, 64, 72, 128}) {
      Case c{{4, 2, n, n + counter % 3, d, d}, {}};
      c.options.precision = Precision::bf16;
      c.options.causal = counter % 2 == 0;
      c.options.block_k = counter % 3 ? 128 : 33;  // an odd tile: its last pair of keys is half padding
      c.options.isa = best_isa();
      ++counter;
      SCOPED_TRACE(c.describe());
      const AttentionShape& s = c.shape;
      SplitMix64 rng(s.n + s.d_k);
      const auto q = random_floats(rng, s.heads * s.n * s.d_k), k = random_floats(rng, s.kv_heads * s.m * s.d_k),
                 v = random_floats(rng, s.kv_heads * s.m * s.d_v);
      std::vector<float> fast(s.heads * s.n * s.d_v), slow(fast.size());
      flash_attention(q.data(), k.data(), v.data(), fast.data(), s, c.options);
      reference_attention(q.data(), k.data(), v.data(), slow.data(), s, c.options);
      EXPECT_TRUE(test::all_close(fast, slow, {2e-2, 2e-2}));
    }
}

// The portable bf16 step (any CPU) computes what the CPU's bf16 dot-product instruction
// computes: the same roundings, the same order of additions.
TEST(FlashAttentionBf16, PortableFallbackGivesTheSameResultsAsTheNativeInstruction) {
  if (best_isa() != Isa::avx512_bf16) GTEST_SKIP() << "this CPU has no bf16 dot product; only the portable path runs";
  const AttentionShape s{4, 1, 200, 200, 80, 80};
  SplitMix64 rng(77);
  const auto q = random_floats(rng, s.heads * s.n * s.d_k), k = random_floats(rng, s.m * s.d_k),
             v = random_floats(rng, s.m * s.d_v);
  AttentionOptions native;
  native.precision = Precision::bf16;
  native.causal = true;
  AttentionOptions portable = native;
  portable.isa = Isa::generic;
  std::vector<float> a(s.heads * s.n * s.d_v), b(a.size());
  flash_attention(q.data(), k.data(), v.data(), a.data(), s, native);
  flash_attention(q.data(), k.data(), v.data(), b.data(), s, portable);
  EXPECT_TRUE(test::all_close(a, b, {1e-6, 1e-5}));
}

TEST(AttendTiled, EveryBundledScenarioGivesTheReferenceOutputs) {
  for (const auto& bundled : bundled_scenarios()) {
    SCOPED_TRACE(bundled.name);
    const Scenario s = load_scenario(bundled.name);
    if (!s.mask.hidden_keys.empty()) continue;
    const AttentionInput input = attention_input(s);
    const Trace fast = attend_tiled(input), slow = attend(input);
    EXPECT_TRUE(test::all_close(fast.output, slow.output, {3e-5, 3e-4}));
    EXPECT_EQ(fast.heads[0].weights.rows, 0u) << "the tiled kernel keeps no grid";
  }
}

TEST(AttendTiled, HiddenKeysAreRefusedWithAClearMessage) {
  Scenario s = load_scenario("three-tokens");
  apply_overrides(s, {.mask_tokens = {1}});
  try {
    attend_tiled(attention_input(s));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--kernel reference"), std::string::npos) << e.what();
  }
}
