// Decoding one token at a time over a KV cache whose tokens a caller chooses. Each step's
// token attends to the cached tokens it is given (the kept set) and to itself, and every
// head's weights on them come back: what KV-cache eviction is measured with
// (analysis/eviction.hpp). A token left out is one no query of this step sees, in any layer
// or head; the tokens kept keep the keys and values computed when they went in, rotated at
// their own positions (as a cache that drops rows does, H2O's; StreamingLLM renumbers the
// positions inside its cache instead).
//
// Each step is the full forward's last row when every earlier token is kept (a test checks):
//   x = embed(id, position t)
//   per block:  q | k | v of the row;  k_t, v_t stored as the cache type rounds them
//               z_h = Σ_{j ∈ kept ∪ {t}, in the layer's window} softmax_j(q_h · k_j · scale) v_j
//   logits = norm_f(x) · Uᵀ
//
// Storage types: a KVCache's (core/kv_cache.hpp): f32, f16, bf16, and q8_0 (llama.cpp's block
// of 32 values: one f16 scale d = max|x| / 127 and 32 int8 q = round(x / d), read back as q ·
// d). Each KV head's row of d_head values is cut into blocks of 32, the last one zero-padded
// where d_head is not a multiple of 32.
#pragma once
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "attnlab/core/kv_cache.hpp"  // CacheType
#include "attnlab/model/model.hpp"

namespace attnlab {

// Bytes one token takes in the cache: its key and value rows in every layer and KV head.
std::size_t cache_token_bytes(const ModelConfig& config, CacheType type);

class SelectiveDecoder {
 public:
  explicit SelectiveDecoder(const Model& model, CacheType type = CacheType::f32);

  struct Step {
    std::vector<float> logits;   // [vocab] the next token's odds
    std::vector<float> weights;  // [L × H × (kept.size() + 1)]: layer l, head h's weight on kept[j], the last
                                 // column on the token itself; 0 on a key outside the layer's window
  };
  // Token `id` at position length(), attending to the cached tokens `kept` (strictly ascending
  // positions below length()) and to itself. `commit`: its keys and values join the cache and
  // length() grows by one; otherwise the step is a trial and the next step takes the same
  // position. InputError naming "ids" past the model's positions or vocabulary.
  Step step(int id, std::span<const std::size_t> kept, bool commit = true);
  std::size_t length() const { return length_; }

 private:
  const Model& model_;
  CacheType type_;
  std::vector<std::vector<float>> keys_, values_;  // [L][length × H_kv·d_head], rounded as the type stores them
  std::size_t length_ = 0;
};

}  // namespace attnlab
