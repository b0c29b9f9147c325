// Fast decoding: the newest token(s) against a KV cache, with the cache split into chunks
// that threads work on independently and a final merge of their partial softmax states
// (the FlashDecoding scheme). Same contract as decode_attention (decode.hpp), which is the
// reference it is tested against.
#pragma once
#include <cstddef>
#include <optional>
#include <span>

#include "attnlab/core/kv_cache.hpp"
#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

struct DecodeOptions {
  int threads = 0;           // 0: all cores
  std::size_t chunk = 1024;  // cached tokens per work item (a multiple of 64 works best)
  double temperature = 1.0;
  std::optional<double> scale;        // logits = q·k · scale / T; default 1/√head_dim
  std::optional<std::size_t> window;  // a sliding window: token t sees only its last w keys (itself included)
  std::optional<Isa> isa;             // force an instruction set (tests); default best_isa()
  // Many new tokens (a prompt) go a block at a time, each block's partial states (a max, a sum
  // and an output row per query and chunk) within these bytes; a block is one token at least,
  // whatever the bound (0 included: correct, a token at a time).
  std::size_t partial_bytes = std::size_t(16) << 20;
};

// queries and out: [n_new × heads × head_dim], token t and head h at (t·heads + h)·head_dim.
// New token t sits at position length(layer) - n_new + t and sees keys 0..that position
// (with a window w, keys position − w + 1..position).
void flash_decode(const KVCache& cache, std::size_t layer, std::size_t heads, std::span<const float> queries,
                  std::size_t n_new, std::span<float> out, const DecodeOptions& options = {});

}  // namespace attnlab
