// KVCache: malloc'd arrays, one per layer, KV head and keys/values, grown with realloc
// (for large arrays glibc moves the pages with mremap instead of copying them).
#include "attnlab/core/kv_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {
constexpr std::string_view kCacheTypeNames[] = {"f32", "f16", "bf16", "q8_0"};
constexpr std::size_t kQ8Block = 32;  // values per q8_0 block
constexpr std::size_t kQ8BlockBytes = 2 + kQ8Block;
}  // namespace

std::string_view cache_type_name(CacheType type) { return kCacheTypeNames[static_cast<int>(type)]; }

CacheType parse_cache_type(std::string_view text, std::string_view field) {
  for (std::size_t i = 0; i < std::size(kCacheTypeNames); ++i)
    if (text == kCacheTypeNames[i]) return static_cast<CacheType>(i);
  fail(field, fmt::format("\"{}\" is not a cache type; use f32, f16, bf16 or q8_0", text.substr(0, 32)));
}

CacheType cache_type(DType dtype) {
  switch (dtype) {
    case DType::f16: return CacheType::f16;
    case DType::bf16: return CacheType::bf16;
    case DType::f32: break;
  }
  return CacheType::f32;
}

DType stored_dtype(CacheType type) {
  switch (type) {
    case CacheType::f16: return DType::f16;
    case CacheType::bf16: return DType::bf16;
    case CacheType::f32:
    case CacheType::q8_0: break;
  }
  return DType::f32;
}

std::size_t cache_row_bytes(CacheType type, std::size_t head_dim) {
  switch (type) {
    case CacheType::f32: return 4 * head_dim;
    case CacheType::f16:
    case CacheType::bf16: return 2 * head_dim;
    case CacheType::q8_0: return (head_dim + kQ8Block - 1) / kQ8Block * kQ8BlockBytes;
  }
  return 0;
}

void store_cache_row(CacheType type, std::span<const float> row, void* out) {
  switch (type) {
    case CacheType::f32: std::memcpy(out, row.data(), row.size_bytes()); return;
    case CacheType::f16: f32_to_f16(row, {static_cast<std::uint16_t*>(out), row.size()}); return;
    case CacheType::bf16: f32_to_bf16(row, {static_cast<std::uint16_t*>(out), row.size()}); return;
    case CacheType::q8_0: {
      auto* block = static_cast<unsigned char*>(out);
      for (std::size_t first = 0; first < row.size(); first += kQ8Block, block += kQ8BlockBytes) {
        const std::span<const float> x = row.subspan(first, std::min(kQ8Block, row.size() - first));
        float largest = 0;
        for (float v : x)
          largest = std::max(largest, std::abs(v));
        const float d = largest / 127;
        const std::uint16_t stored_d = f32_to_f16(d);
        std::memcpy(block, &stored_d, 2);
        auto* q = reinterpret_cast<std::int8_t*>(block + 2);
        std::fill(q, q + kQ8Block, std::int8_t{0});
        for (std::size_t i = 0; i < x.size(); ++i)
          q[i] = d == 0 ? std::int8_t{0} : static_cast<std::int8_t>(std::round(x[i] / d));
      }
      return;
    }
  }
}

void load_cache_rows(CacheType type, const void* rows, std::size_t count, std::size_t head_dim, std::span<float> out) {
  assert(out.size() == count * head_dim);
  switch (type) {
    case CacheType::f32: std::memcpy(out.data(), rows, out.size_bytes()); return;
    case CacheType::f16: f16_to_f32({static_cast<const std::uint16_t*>(rows), out.size()}, out); return;
    case CacheType::bf16: bf16_to_f32({static_cast<const std::uint16_t*>(rows), out.size()}, out); return;
    case CacheType::q8_0: {
      const auto* block = static_cast<const unsigned char*>(rows);
      for (std::size_t r = 0; r < count; ++r)
        for (std::size_t first = 0; first < head_dim; first += kQ8Block, block += kQ8BlockBytes) {
          std::uint16_t stored_d;
          std::memcpy(&stored_d, block, 2);
          const float d = f16_to_f32(stored_d);
          const auto* q = reinterpret_cast<const std::int8_t*>(block + 2);
          for (std::size_t i = 0; i < std::min(kQ8Block, head_dim - first); ++i)
            out[r * head_dim + first + i] = static_cast<float>(q[i]) * d;
        }
      return;
    }
  }
}

void round_cache_row(CacheType type, std::span<float> row) {
  std::vector<unsigned char> stored(cache_row_bytes(type, row.size()));
  store_cache_row(type, row, stored.data());
  load_cache_rows(type, stored.data(), 1, row.size(), row);
}

KVCache::KVCache(std::size_t layers, std::size_t kv_heads, std::size_t head_dim, CacheType type)
    : layers_(layers),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      type_(type),
      row_bytes_(cache_row_bytes(type, head_dim)),
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
  type_ = other.type_;
  row_bytes_ = other.row_bytes_;
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
  const std::size_t bytes = tokens * row_bytes_;
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
      store_cache_row(type_, {src, head_dim_}, static_cast<char*>(array(layer, g, which)) + t * row_bytes_);
    }
  lengths_[layer] = t + 1;
}

void KVCache::load(int which, std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                   std::span<float> out) const {
  assert(layer < layers_ && kv_head < kv_heads_ && first + count <= lengths_[layer]);
  assert(out.size() == count * head_dim_);
  load_cache_rows(type_, static_cast<const char*>(array(layer, kv_head, which)) + first * row_bytes_, count, head_dim_,
                  out);
}

void KVCache::load_keys(std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                        std::span<float> out) const {
  load(0, layer, kv_head, first, count, out);
}

void KVCache::load_values(std::size_t layer, std::size_t kv_head, std::size_t first, std::size_t count,
                          std::span<float> out) const {
  load(1, layer, kv_head, first, count, out);
}

std::size_t KVCache::bytes() const { return arrays_.size() * capacity_ * row_bytes_; }

std::size_t KVCache::used_bytes() const {
  std::size_t tokens = 0;
  for (std::size_t l : lengths_)
    tokens += l;
  return 2 * kv_heads_ * tokens * row_bytes_;
}

}  // namespace attnlab
