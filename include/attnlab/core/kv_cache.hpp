// A KV cache: the keys and values of every token decoded so far, per layer and KV head,
// so that a new token's attention costs one pass over the cache instead of recomputing
// every earlier token's projections.
//
// Storage (kernels may read it directly):
//   for each layer l and KV head g, two separate contiguous arrays,
//     keys(l, g)    length(l) × head_dim values, row t = token t's key for head g
//     values(l, g)  length(l) × head_dim values, row t = token t's value for head g
//   each row in the storage type: f32 (float), f16 or bf16 (std::uint16_t bit patterns, see
//   dtype.hpp), or q8_0, llama.cpp's block of 32 values: one f16 scale d = max|x| / 127 and 32
//   int8 q = round(x / d), read back as q · d, 34 bytes (a row of head_dim values is
//   ⌈head_dim / 32⌉ blocks, the last one zero-padded). Rows are appended in token order and
//   never move relative to each other; the arrays themselves may move when they grow
//   (pointers are valid until the next append or reserve).
//
// Grouped-query attention: H query heads share H_kv KV heads (H_kv divides H); query head
// h reads KV head h / (H / H_kv), i.e. consecutive query heads share one KV head (the
// grouping of Llama, Mistral, Qwen and Gemma checkpoints).
//
// Memory: the arrays are malloc'd and grown with realloc (doubling when append runs out
// of room, exactly to the request with reserve). bytes() is what the arrays were allocated,
// used_bytes() what the tokens occupy (the formula 2 × L × H_kv × length × row bytes, a row
// d_head × 4, 2 or 2 bytes, or ⌈d_head / 32⌉ × 34 in q8_0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "attnlab/core/dtype.hpp"

namespace attnlab {

// How a cache stores its keys and values (see above).
enum class CacheType { f32, f16, bf16, q8_0 };
std::string_view cache_type_name(CacheType type);  // "f32", "f16", "bf16", "q8_0"
// InputError naming `field` for anything but those four names.
CacheType parse_cache_type(std::string_view text, std::string_view field);
CacheType cache_type(DType dtype);  // the cache type storing values as `dtype`
// The dtype a cache of `type` holds its values in, read in place by the kernels (q8_0's blocks are
// read back as f32 first: f32).
DType stored_dtype(CacheType type);
// Bytes one KV head's row of head_dim values takes stored as `type` (q8_0: 34 per block of 32).
std::size_t cache_row_bytes(CacheType type, std::size_t head_dim);
// One row of head_dim values stored as `type` into `out` [cache_row_bytes], and `count` stored
// rows read back as f32 into `out` [count × head_dim].
void store_cache_row(CacheType type, std::span<const float> row, void* out);
void load_cache_rows(CacheType type, const void* rows, std::size_t count, std::size_t head_dim, std::span<float> out);
// `row` as `type` stores it and reads it back.
void round_cache_row(CacheType type, std::span<float> row);

class KVCache {
 public:
  KVCache(std::size_t layers, std::size_t kv_heads, std::size_t head_dim, CacheType type);
  KVCache(std::size_t layers, std::size_t kv_heads, std::size_t head_dim, DType dtype)
      : KVCache(layers, kv_heads, head_dim, cache_type(dtype)) {}
  ~KVCache();
  KVCache(KVCache&&) noexcept;
  KVCache& operator=(KVCache&&) noexcept;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  std::size_t layers() const { return layers_; }
  std::size_t kv_heads() const { return kv_heads_; }
  std::size_t head_dim() const { return head_dim_; }
  CacheType type() const { return type_; }
  std::size_t row_bytes() const { return row_bytes_; }  // one KV head's key (or value) row

  // Tokens held by `layer`.
  std::size_t length(std::size_t layer) const { return lengths_[layer]; }
  // Tokens every array has room for before it must grow.
  std::size_t capacity() const { return capacity_; }

  // Grows every array to room for `tokens` tokens, exactly (never shrinks). Throws
  // std::bad_alloc when the memory is not there.
  void reserve(std::size_t tokens);

  // Appends one token to `layer`: keys and values are [kv_heads × head_dim] (KV head g's
  // row at g·head_dim), rounded to the storage type.
  void append(std::size_t layer, std::span<const float> keys, std::span<const float> values);

  // The raw arrays of one layer and KV head (see the storage layout above).
  const void* keys(std::size_t layer, std::size_t kv_head) const { return array(layer, kv_head, 0); }
  const void* values(std::size_t layer, std::size_t kv_head) const { return array(layer, kv_head, 1); }

  // Rows [first, first + count) of keys (or values) as f32, row after row, into `out`
  // ([count × head_dim]).
  void load_keys(std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                 std::span<float> out) const;
  void load_values(std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                   std::span<float> out) const;

  // Bytes allocated for the arrays: 2 × L × H_kv × capacity × row bytes.
  std::size_t bytes() const;
  // Bytes the tokens occupy: Σ over layers of 2 × H_kv × length × row bytes.
  std::size_t used_bytes() const;

 private:
  void* array(std::size_t layer, std::size_t kv_head, int which) const {
    return arrays_[(layer * kv_heads_ + kv_head) * 2 + static_cast<std::size_t>(which)];
  }
  void load(int which, std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
            std::span<float> out) const;
  void release();

  std::size_t layers_ = 0, kv_heads_ = 0, head_dim_ = 0;
  CacheType type_ = CacheType::f32;
  std::size_t row_bytes_ = 0;
  std::size_t capacity_ = 0;
  std::vector<std::size_t> lengths_;  // per layer
  std::vector<void*> arrays_;         // (layer, kv head, keys/values) -> malloc'd array
};

}  // namespace attnlab
