// The KV cache and decoding: the documented storage layout, bytes from the allocations,
// and the main claim: decoding a sequence token by token against the cache gives the same
// outputs as full causal attention over the whole sequence (attnlab::attend, in double, as
// the oracle), for several shapes, GQA ratios 1, 4/1 and 8/2, in every storage dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/core/attention.hpp"
#include "attnlab/core/decode.hpp"
#include "attnlab/core/kv_cache.hpp"
#include "attnlab/core/rng.hpp"
#include "compare.hpp"

using namespace attnlab;
using attnlab::test::all_close;
using attnlab::test::Tolerance;

namespace {

std::vector<float> random_row(SplitMix64& rng, std::size_t count) {
  std::vector<float> row(count);
  for (float& x : row)
    x = static_cast<float>(rng.normal());
  return row;
}

// Columns [first, first + count) of a row-major f32 matrix with `cols` columns, as the
// reference path's double Matrix.
Matrix column_block(const std::vector<float>& w, std::size_t rows, std::size_t cols, std::size_t first,
                    std::size_t count) {
  Matrix out(rows, count);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < count; ++c)
      out(i, c) = w[i * cols + first + c];
  return out;
}

// The oracle's input: every query head h gets W_Q's block h and the K/V weights of the KV
// head it shares, g = h / (H / H_kv).
AttentionInput oracle_input(const AttentionLayerWeights& w, const Matrix& x) {
  AttentionInput input;
  input.queries_from = x;
  input.keys_from = x;
  input.mask.causal = true;
  const std::size_t group = w.heads / w.kv_heads, q_cols = w.heads * w.head_dim, kv_cols = w.kv_heads * w.head_dim;
  for (std::size_t h = 0; h < w.heads; ++h) {
    const std::size_t g = h / group;
    input.heads.push_back({"h" + std::to_string(h), column_block(w.w_q, w.d_model, q_cols, h * w.head_dim, w.head_dim),
                           column_block(w.w_k, w.d_model, kv_cols, g * w.head_dim, w.head_dim),
                           column_block(w.w_v, w.d_model, kv_cols, g * w.head_dim, w.head_dim)});
  }
  return input;
}

// Tolerances, |decoded - oracle| <= atol + rtol·|oracle|, from the storage dtype's unit
// roundoff u (f32 2^-24, f16 2^-11 ≈ 4.9e-4, bf16 2^-8 ≈ 3.9e-3). Keys and values of
// about unit size are stored with relative error <= u, so a scaled score q·k/√d moves by
// about u·|score| and a weight by about that much relative; the output, a convex mix of
// values of unit size, then moves by a few u. 4u covers it: f16 ≈ 2e-3, bf16 ≈ 1.6e-2.
// In f32 the storage is exact and what is left is f32 arithmetic (projections over
// d_model terms, dot products over d_head terms): 1e-5 is many times that.
Tolerance tolerance_for(DType dtype) {
  if (dtype == DType::f32) return {1e-5, 1e-5};
  const double u = dtype_unit_roundoff(dtype);
  return {4 * u, 4 * u};
}

struct Shape {
  std::size_t d_model, heads, kv_heads, head_dim, n;
};

}  // namespace

TEST(KVCache, AppendStoresOneRowPerTokenPerKVHeadInTheDocumentedLayout) {
  KVCache cache(2, 3, 4, DType::f32);
  SplitMix64 rng(1);
  std::vector<std::vector<float>> keys, values;
  for (int t = 0; t < 5; ++t) {
    keys.push_back(random_row(rng, 12));
    values.push_back(random_row(rng, 12));
    cache.append(1, keys.back(), values.back());
  }
  EXPECT_EQ(cache.length(1), 5u);
  EXPECT_EQ(cache.length(0), 0u);
  for (std::size_t g = 0; g < 3; ++g) {
    const float* k = static_cast<const float*>(cache.keys(1, g));
    const float* v = static_cast<const float*>(cache.values(1, g));
    for (std::size_t t = 0; t < 5; ++t)
      for (std::size_t c = 0; c < 4; ++c) {
        EXPECT_EQ(k[t * 4 + c], keys[t][g * 4 + c]);
        EXPECT_EQ(v[t * 4 + c], values[t][g * 4 + c]);
      }
  }
}

TEST(KVCache, HalfPrecisionStorageHoldsTheRoundedBitPatterns) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    KVCache cache(1, 2, 8, dtype);
    SplitMix64 rng(2);
    const std::vector<float> k = random_row(rng, 16), v = random_row(rng, 16);
    cache.append(0, k, v);
    const auto* stored = static_cast<const std::uint16_t*>(cache.keys(0, 1));
    std::vector<float> loaded(8);
    cache.load_keys(0, 1, 0, 1, loaded);
    for (std::size_t c = 0; c < 8; ++c) {
      EXPECT_EQ(stored[c], dtype == DType::f16 ? f32_to_f16(k[8 + c]) : f32_to_bf16(k[8 + c]));
      EXPECT_EQ(loaded[c], dtype == DType::f16 ? f16_to_f32(stored[c]) : bf16_to_f32(stored[c]));
      EXPECT_NEAR(loaded[c], k[8 + c], std::abs(k[8 + c]) * dtype_unit_roundoff(dtype));
    }
  }
}

// q8_0 as ggml's block_q8_0 defines it: per 32 values, the f16 scale d = max|x| / 127 and
// the int8s round(x / d), read back as q · d. A row of 40 values is two blocks, the second
// holding 8 values and 24 zeros: 68 bytes a row.
TEST(KVCache, Q8_0StorageIsLlamaCppsBlockOf32) {
  KVCache cache(1, 1, 40, CacheType::q8_0);
  EXPECT_EQ(cache.row_bytes(), 68u);
  SplitMix64 rng(5);
  std::vector<float> k = random_row(rng, 40), v = random_row(rng, 40);
  k[3] = -7.5f;  // the first block's largest magnitude, negative
  cache.append(0, k, v);
  EXPECT_EQ(cache.used_bytes(), 2u * 68);
  const auto* bytes = static_cast<const unsigned char*>(cache.keys(0, 0));
  std::vector<float> loaded(40);
  cache.load_keys(0, 0, 0, 1, loaded);
  for (std::size_t block = 0; block < 2; ++block) {
    const std::size_t first = block * 32, count = block == 0 ? 32 : 8;
    float largest = 0;
    for (std::size_t i = 0; i < count; ++i)
      largest = std::max(largest, std::abs(k[first + i]));
    const float d = largest / 127;
    std::uint16_t stored_d;
    std::memcpy(&stored_d, bytes + block * 34, 2);
    EXPECT_EQ(stored_d, f32_to_f16(d));
    const auto* q = reinterpret_cast<const std::int8_t*>(bytes + block * 34 + 2);
    for (std::size_t i = 0; i < 32; ++i) {
      const int expected = i < count ? static_cast<int>(std::lround(k[first + i] / d)) : 0;
      EXPECT_EQ(q[i], expected) << "block " << block << " value " << i;
      if (i < count) EXPECT_EQ(loaded[first + i], static_cast<float>(q[i]) * f16_to_f32(stored_d));
    }
    if (block == 0) EXPECT_EQ(q[3], -127) << "the largest magnitude takes the whole range";
  }
  std::vector<float> rounded = k;
  round_cache_row(CacheType::q8_0, rounded);
  EXPECT_EQ(rounded, loaded) << "round_cache_row is the store and the load";
}

TEST(KVCache, BytesComeFromTheAllocationsAndUsedBytesIsTheFormula) {
  const ModelShape shape{"small", "", 3, 0, 8, 2, 16, 0, ""};
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    KVCache cache(3, 2, 16, dtype);
    cache.reserve(100);
    EXPECT_EQ(cache.bytes(), kv_cache_bytes(shape, dtype, 100)) << "reserve is exact";
    const std::vector<float> row(32, 1.0f);
    for (std::size_t l = 0; l < 3; ++l)
      for (int t = 0; t < 40; ++t)
        cache.append(l, row, row);
    EXPECT_EQ(cache.used_bytes(), kv_cache_bytes(shape, dtype, 40));
    EXPECT_EQ(cache.bytes(), kv_cache_bytes(shape, dtype, 100));
  }
}

TEST(KVCache, GrowingPastTheCapacityKeepsEveryRow) {
  KVCache cache(1, 1, 3, DType::f16);
  for (int t = 0; t < 1000; ++t) {
    const std::vector<float> k{float(t), float(-t), 0.5f}, v{1.0f, float(t % 7), 2.0f};
    cache.append(0, k, v);
  }
  EXPECT_GE(cache.capacity(), 1000u);
  EXPECT_LT(cache.capacity(), 2000u) << "grows by doubling";
  EXPECT_EQ(cache.bytes(), 2 * cache.capacity() * 3 * 2);
  std::vector<float> rows(1000 * 3);
  cache.load_keys(0, 0, 0, 1000, rows);
  for (int t = 0; t < 1000; ++t)
    EXPECT_EQ(rows[t * 3], f16_to_f32(f32_to_f16(float(t)))) << t;
}

TEST(Decode, TokenByTokenEqualsFullCausalAttentionEveryShapeGQARatioAndDtype) {
  const std::vector<Shape> shapes{
      {8, 1, 1, 4, 7},     // one head
      {16, 4, 4, 8, 13},   // H_kv = H: ratio 1
      {16, 4, 1, 8, 20},   // GQA 4/1 (multi-query)
      {24, 8, 2, 6, 33},   // GQA 8/2, d_head not a multiple of 16
      {32, 4, 2, 32, 75},  // long enough to cross a 16-wide dot product several times
  };
  for (const Shape& s : shapes)
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(testing::Message() << "d_model " << s.d_model << ", H " << s.heads << ", H_kv " << s.kv_heads
                                      << ", d_head " << s.head_dim << ", n " << s.n << ", " << dtype_name(dtype));
      const AttentionLayerWeights w = random_attention_weights(s.d_model, s.heads, s.kv_heads, s.head_dim, 11);
      SplitMix64 rng(5);
      std::vector<std::vector<float>> tokens;
      Matrix x(s.n, s.d_model);
      for (std::size_t t = 0; t < s.n; ++t) {
        tokens.push_back(random_row(rng, s.d_model));
        for (std::size_t c = 0; c < s.d_model; ++c)
          x(t, c) = tokens[t][c];
      }
      const Trace oracle = attend(oracle_input(w, x));

      KVCache cache(1, s.kv_heads, s.head_dim, dtype);
      Matrix decoded(s.n, s.heads * s.head_dim);
      std::vector<float> out(s.heads * s.head_dim);
      for (std::size_t t = 0; t < s.n; ++t) {
        decode_step(w, cache, 0, tokens[t], out);
        for (std::size_t c = 0; c < out.size(); ++c)
          decoded(t, c) = out[c];
      }
      EXPECT_EQ(cache.length(0), s.n);
      EXPECT_TRUE(all_close(decoded, oracle.output, tolerance_for(dtype)));
    }
}

TEST(Decode, SeveralNewTokensAtOnceEqualOneAtATime) {
  const AttentionLayerWeights w = random_attention_weights(16, 8, 2, 8, 3);
  SplitMix64 rng(9);
  KVCache one(1, 2, 8, DType::f32), batch(1, 2, 8, DType::f32);
  std::vector<float> queries, one_by_one;
  std::vector<float> q(64), k(16), v(16), out(64);
  for (int t = 0; t < 10; ++t) {
    const std::vector<float> x = random_row(rng, 16);
    project_row(x, w.w_q, 64, q);
    project_row(x, w.w_k, 16, k);
    project_row(x, w.w_v, 16, v);
    one.append(0, k, v);
    batch.append(0, k, v);
    decode_attention(one, 0, 8, q, 1, out);
    if (t >= 6) {  // the last four tokens, decoded together below
      queries.insert(queries.end(), q.begin(), q.end());
      one_by_one.insert(one_by_one.end(), out.begin(), out.end());
    }
  }
  std::vector<float> together(4 * 64);
  decode_attention(batch, 0, 8, queries, 4, together);
  for (std::size_t c = 0; c < together.size(); ++c)
    EXPECT_FLOAT_EQ(together[c], one_by_one[c]) << c;
}

TEST(Decode, ManyLayersKeepSeparateCaches) {
  const AttentionLayerWeights w = random_attention_weights(8, 2, 1, 4, 3);
  KVCache cache(3, 1, 4, DType::f32);
  std::vector<float> out(8);
  SplitMix64 rng(4);
  for (int t = 0; t < 5; ++t)
    decode_step(w, cache, 0, random_row(rng, 8), out);
  decode_step(w, cache, 2, random_row(rng, 8), out);
  EXPECT_EQ(cache.length(0), 5u);
  EXPECT_EQ(cache.length(1), 0u);
  EXPECT_EQ(cache.length(2), 1u);
  // One token attending only to itself returns its own value (weight 1).
  std::vector<float> v(4);
  cache.load_values(2, 0, 0, 1, v);
  for (std::size_t c = 0; c < 4; ++c)
    EXPECT_FLOAT_EQ(out[c], v[c]);
}
