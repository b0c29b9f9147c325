// The reference decode: for each new token and KV head, one pass over the cached keys
// (scores), a softmax, one pass over the cached values (mix). The cache is read in chunks
// of rows converted to f32, each chunk used by every query head of the KV head's group.
#include "attnlab/core/decode.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "attnlab/core/rng.hpp"

namespace attnlab {

namespace {

constexpr std::size_t kChunkRows = 256;

}  // namespace

float dot_f32(const float* a, const float* b, std::size_t d) {
  float partial[16] = {};
  std::size_t c = 0;
  for (; c + 16 <= d; c += 16)
    for (std::size_t l = 0; l < 16; ++l)
      partial[l] += a[c + l] * b[c + l];
  float sum = 0.0f;
  for (; c < d; ++c)
    sum += a[c] * b[c];
  for (float p : partial)
    sum += p;
  return sum;
}

void decode_attention(const KVCache& cache, std::size_t layer, std::size_t heads, std::span<const float> queries,
                      std::size_t n_new, std::span<float> out) {
  const std::size_t d = cache.head_dim(), kv_heads = cache.kv_heads(), m = cache.length(layer);
  assert(heads % kv_heads == 0 && n_new <= m);
  assert(queries.size() == n_new * heads * d && out.size() == n_new * heads * d);
  const std::size_t group = heads / kv_heads;  // query heads per KV head
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  std::vector<float> chunk(kChunkRows * d);
  std::vector<float> scores;  // [group × visible]
  std::vector<double> mixed(group * d);
  for (std::size_t t = 0; t < n_new; ++t) {
    const std::size_t visible = m - n_new + t + 1;  // keys 0..p
    scores.assign(group * visible, 0.0f);
    for (std::size_t g = 0; g < kv_heads; ++g) {
      const float* q = queries.data() + (t * heads + g * group) * d;  // the group's first query head

      // Score and scale: s_hj = q_h · k_j / √d for every visible key j.
      for (std::size_t first = 0; first < visible; first += kChunkRows) {
        const std::size_t rows = std::min(kChunkRows, visible - first);
        cache.load_keys(layer, g, first, rows, {chunk.data(), rows * d});
        for (std::size_t h = 0; h < group; ++h)
          for (std::size_t r = 0; r < rows; ++r)
            scores[h * visible + first + r] = dot_f32(q + h * d, chunk.data() + r * d, d) * scale;
      }

      // Softmax per query head, in f64: weights = exp(s - max) / Σ exp(s - max).
      for (std::size_t h = 0; h < group; ++h) {
        float* s = scores.data() + h * visible;
        const float largest = *std::max_element(s, s + visible);
        double sum = 0.0;
        for (std::size_t j = 0; j < visible; ++j) {
          const double e = std::exp(static_cast<double>(s[j]) - largest);
          s[j] = static_cast<float>(e);
          sum += e;
        }
        const double inverse = 1.0 / sum;
        for (std::size_t j = 0; j < visible; ++j)
          s[j] = static_cast<float>(s[j] * inverse);
      }

      // Mix: out_h = Σ_j w_hj · v_j.
      std::fill(mixed.begin(), mixed.end(), 0.0);
      for (std::size_t first = 0; first < visible; first += kChunkRows) {
        const std::size_t rows = std::min(kChunkRows, visible - first);
        cache.load_values(layer, g, first, rows, {chunk.data(), rows * d});
        for (std::size_t h = 0; h < group; ++h) {
          double* o = mixed.data() + h * d;
          for (std::size_t r = 0; r < rows; ++r) {
            const float w = scores[h * visible + first + r];
            const float* v = chunk.data() + r * d;
            for (std::size_t c = 0; c < d; ++c)
              o[c] += static_cast<double>(w * v[c]);
          }
        }
      }
      for (std::size_t h = 0; h < group; ++h)
        for (std::size_t c = 0; c < d; ++c)
          out[(t * heads + g * group + h) * d + c] = static_cast<float>(mixed[h * d + c]);
    }
  }
}

AttentionLayerWeights random_attention_weights(std::size_t d_model, std::size_t heads, std::size_t kv_heads,
                                               std::size_t head_dim, std::uint64_t seed) {
  SplitMix64 rng(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_model));
  const auto draw = [&](std::size_t cols) {
    std::vector<float> w(d_model * cols);
    for (float& x : w)
      x = static_cast<float>(rng.normal()) * scale;
    return w;
  };
  AttentionLayerWeights weights{d_model, heads, kv_heads, head_dim, {}, {}, {}};
  weights.w_q = draw(heads * head_dim);
  weights.w_k = draw(kv_heads * head_dim);
  weights.w_v = draw(kv_heads * head_dim);
  return weights;
}

void project_row(std::span<const float> x, const std::vector<float>& w, std::size_t cols, std::span<float> out) {
  assert(w.size() == x.size() * cols && out.size() == cols);
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float xi = x[i];
    const float* row = w.data() + i * cols;
    for (std::size_t c = 0; c < cols; ++c)
      out[c] += xi * row[c];
  }
}

void decode_step(const AttentionLayerWeights& weights, KVCache& cache, std::size_t layer, std::span<const float> x,
                 std::span<float> out) {
  const std::size_t q_cols = weights.heads * weights.head_dim, kv_cols = weights.kv_heads * weights.head_dim;
  assert(x.size() == weights.d_model && out.size() == q_cols);
  assert(cache.kv_heads() == weights.kv_heads && cache.head_dim() == weights.head_dim);
  std::vector<float> q(q_cols), k(kv_cols), v(kv_cols);
  project_row(x, weights.w_q, q_cols, q);
  project_row(x, weights.w_k, kv_cols, k);
  project_row(x, weights.w_v, kv_cols, v);
  cache.append(layer, k, v);
  decode_attention(cache, layer, weights.heads, q, 1, out);
}

}  // namespace attnlab
