// Decoding over a chosen part of the KV cache (attnlab/model/selective_decoder.hpp): the
// block's own steps (transformer.hpp), its heads written out here over the kept keys.
#include "attnlab/model/selective_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/forward.hpp"
#include "transformer/transformer.hpp"

namespace attnlab {

using namespace transformer;

std::size_t cache_token_bytes(const ModelConfig& c, CacheType type) {
  return 2 * c.n_layer * c.kv_heads() * cache_row_bytes(type, c.head_dim());
}

SelectiveDecoder::SelectiveDecoder(const Model& model, CacheType type)
    : model_(model), type_(type), keys_(model.config.n_layer), values_(model.config.n_layer) {}

SelectiveDecoder::Step SelectiveDecoder::step(int id, std::span<const std::size_t> kept, bool commit) {
  const ModelConfig& c = model_.config;
  const std::size_t t = length_, hd = c.head_dim(), kv_width = c.kv_heads() * hd, seen = kept.size() + 1;
  const int ids[] = {id};
  check_ids(c, ids, t);
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (kept[i] >= t || (i > 0 && kept[i] <= kept[i - 1]))
      fail("kept", fmt::format("must be ascending positions below {}", t));
  Step out;
  out.weights.assign(c.n_layer * c.n_head * seen, 0.0f);
  std::vector<float> x = embed(model_, ids, t);
  BlockActivations<float> a;
  a.keep_residuals = false;
  std::vector<double> scores(seen);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const Heads at = heads_of(c, l);
    std::vector<float>& K = keys_[l];
    std::vector<float>& V = values_[l];
    const HeadsStep<float> heads = [&](const float* qkv, float* z) {
      // The token's key and value rows as the cache stores them, at row t (a trial's are overwritten).
      K.resize((t + 1) * kv_width);
      V.resize((t + 1) * kv_width);
      std::copy_n(qkv + at.k(0), kv_width, K.begin() + std::ptrdiff_t(t * kv_width));
      std::copy_n(qkv + at.v(0), kv_width, V.begin() + std::ptrdiff_t(t * kv_width));
      for (std::size_t g = 0; g < at.H_kv; ++g) {
        round_cache_row(type_, {K.data() + t * kv_width + g * hd, hd});
        round_cache_row(type_, {V.data() + t * kv_width + g * hd, hd});
      }
      const auto position = [&](std::size_t j) { return j < kept.size() ? kept[j] : t; };
      for (std::size_t h = 0; h < at.H; ++h) {
        const std::size_t g = at.kv_of(h);
        const float* q = qkv + at.q(h);
        for (std::size_t j = 0; j < seen; ++j) {
          const std::size_t p = position(j);
          if (p < at.first_key(t)) {
            scores[j] = -INFINITY;  // outside the layer's window
            continue;
          }
          const float* k = K.data() + p * kv_width + g * hd;
          double dot = 0;
          for (std::size_t i = 0; i < hd; ++i)
            dot += double(q[i]) * k[i];
          scores[j] = dot * at.scale;
        }
        softmax_in_place(scores);
        float* w = out.weights.data() + (l * c.n_head + h) * seen;
        float* zh = z + h * hd;
        std::fill_n(zh, hd, 0.0f);
        for (std::size_t j = 0; j < seen; ++j) {
          w[j] = static_cast<float>(scores[j]);
          if (w[j] == 0) continue;
          const float* v = V.data() + position(j) * kv_width + g * hd;
          for (std::size_t i = 0; i < hd; ++i)
            zh[i] += w[j] * v[i];
        }
      }
    };
    block_forward(c, l, model_.blocks[l], 1, t, x, a, heads);
  }
  out.logits = unembed(model_, x, 1);
  if (commit) ++length_;
  return out;
}

}  // namespace attnlab
