// KVCache: malloc'd arrays, one per layer, KV head and keys/values, grown with realloc
// (for large arrays glibc moves the pages with mremap instead of copying them).
#include "attnlab/core/kv_cache.hpp"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace attnlab {

KVCache::KVCache(std::size_t layers, std::size_t kv_heads, std::size_t head_dim, DType dtype)
    : layers_(layers),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      dtype_(dtype),
      lengths_(layers, 0),
      arrays_(layers * kv_heads * 2, nullptr) {
  assert(layers > 0 && kv_heads > 0 && head_dim > 0);
}

KVCache::~KVCache() { release(); }

KVCache::KVCache(KVCache&& other) noexcept { *this = std::move(other); }

KVCache& KVCache::operator=(KVCache&& other) noexcept {
  if (this == &other) return *this;
  release();
  layers_ = std::exchange(other.layers_, 0);
  kv_heads_ = std::exchange(other.kv_heads_, 0);
  head_dim_ = std::exchange(other.head_dim_, 0);
  dtype_ = other.dtype_;
  capacity_ = std::exchange(other.capacity_, 0);
  lengths_ = std::move(other.lengths_);
  arrays_ = std::move(other.arrays_);
  other.lengths_.clear();
  other.arrays_.clear();
  return *this;
}

void KVCache::release() {
  for (void*& a : arrays_) {
    std::free(a);
    a = nullptr;
  }
}

void KVCache::reserve(std::size_t tokens) {
  if (tokens <= capacity_) return;
  const std::size_t bytes = tokens * head_dim_ * dtype_bytes(dtype_);
  for (void*& a : arrays_) {
    void* grown = std::realloc(a, bytes);
    if (!grown) throw std::bad_alloc();
    a = grown;
  }
  capacity_ = tokens;
}

void KVCache::append(std::size_t layer, std::span<const float> keys, std::span<const float> values) {
  assert(layer < layers_);
  assert(keys.size() == kv_heads_ * head_dim_ && values.size() == kv_heads_ * head_dim_);
  const std::size_t t = lengths_[layer];
  if (t == capacity_) reserve(capacity_ == 0 ? 16 : 2 * capacity_);
  for (std::size_t g = 0; g < kv_heads_; ++g)
    for (int which = 0; which < 2; ++which) {
      const float* src = (which == 0 ? keys : values).data() + g * head_dim_;
      void* base = array(layer, g, which);
      switch (dtype_) {
        case DType::f32: std::memcpy(static_cast<float*>(base) + t * head_dim_, src, head_dim_ * sizeof(float)); break;
        case DType::f16:
          f32_to_f16({src, head_dim_}, {static_cast<std::uint16_t*>(base) + t * head_dim_, head_dim_});
          break;
        case DType::bf16:
          f32_to_bf16({src, head_dim_}, {static_cast<std::uint16_t*>(base) + t * head_dim_, head_dim_});
          break;
      }
    }
  lengths_[layer] = t + 1;
}

void KVCache::load(int which, std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                   std::span<float> out) const {
  assert(layer < layers_ && kv_head < kv_heads_ && first + count <= lengths_[layer]);
  assert(out.size() == count * head_dim_);
  const void* base = array(layer, kv_head, which);
  const std::size_t offset = first * head_dim_, size = count * head_dim_;
  switch (dtype_) {
    case DType::f32: std::memcpy(out.data(), static_cast<const float*>(base) + offset, size * sizeof(float)); break;
    case DType::f16: f16_to_f32({static_cast<const std::uint16_t*>(base) + offset, size}, out); break;
    case DType::bf16: bf16_to_f32({static_cast<const std::uint16_t*>(base) + offset, size}, out); break;
  }
}

void KVCache::load_keys(std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                        std::span<float> out) const {
  load(0, layer, kv_head, first, count, out);
}

void KVCache::load_values(std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                          std::span<float> out) const {
  load(1, layer, kv_head, first, count, out);
}

std::size_t KVCache::bytes() const { return arrays_.size() * capacity_ * head_dim_ * dtype_bytes(dtype_); }

std::size_t KVCache::used_bytes() const {
  std::size_t tokens = 0;
  for (std::size_t l : lengths_)
    tokens += l;
  return 2 * kv_heads_ * tokens * head_dim_ * dtype_bytes(dtype_);
}

}  // namespace attnlab
