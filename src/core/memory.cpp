// Counting operator new/delete: every heap allocation records its size in a header so
// delete can subtract it. Cheap (two relaxed atomics per call) and always on.
#include "attnlab/memory.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace attnlab::memory {

namespace {
std::atomic<std::size_t> live{0};
std::atomic<std::size_t> peak{0};
constexpr std::size_t kHeader = 64;  // keeps every alignment up to 64 bytes

// Layout: [padding ... size, header][user bytes]: the two words just before the user's
// pointer hold the allocation's size and the header's length (a multiple of the alignment).
void* allocate(std::size_t size, std::size_t alignment) {
  const std::size_t header = alignment > kHeader ? alignment : kHeader;
  char* block = static_cast<char*>(std::aligned_alloc(header, (size + header + header - 1) / header * header));
  if (!block) throw std::bad_alloc();
  char* user = block + header;
  reinterpret_cast<std::size_t*>(user)[-2] = size;
  reinterpret_cast<std::size_t*>(user)[-1] = header;
  const std::size_t now = live.fetch_add(size, std::memory_order_relaxed) + size;
  std::size_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  return user;
}

void release(void* p) {
  if (!p) return;
  const std::size_t size = static_cast<std::size_t*>(p)[-2], header = static_cast<std::size_t*>(p)[-1];
  live.fetch_sub(size, std::memory_order_relaxed);
  std::free(static_cast<char*>(p) - header);
}

std::size_t read_status_kib(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  std::size_t kib = 0;
  const std::size_t key_length = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, key_length) == 0) kib = std::strtoull(line + key_length, nullptr, 10);
  std::fclose(f);
  return kib * 1024;
}
}  // namespace

std::size_t current_bytes() { return live.load(std::memory_order_relaxed); }
std::size_t peak_bytes() { return peak.load(std::memory_order_relaxed); }
void reset_peak() { peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed); }
std::size_t resident_bytes() { return read_status_kib("VmRSS:"); }
std::size_t resident_peak_bytes() { return read_status_kib("VmHWM:"); }

}  // namespace attnlab::memory

void* operator new(std::size_t size) { return attnlab::memory::allocate(size, 16); }
void* operator new[](std::size_t size) { return attnlab::memory::allocate(size, 16); }
void* operator new(std::size_t size, std::align_val_t a) { return attnlab::memory::allocate(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) { return attnlab::memory::allocate(size, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { attnlab::memory::release(p); }
void operator delete[](void* p) noexcept { attnlab::memory::release(p); }
void operator delete(void* p, std::size_t) noexcept { attnlab::memory::release(p); }
void operator delete[](void* p, std::size_t) noexcept { attnlab::memory::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { attnlab::memory::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { attnlab::memory::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { attnlab::memory::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { attnlab::memory::release(p); }
