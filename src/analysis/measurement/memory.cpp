// The heap byte counter's state and the process's resident memory. The counting itself is
// done by src/analysis/measurement/heap_counter.cpp, in programs that link it.
#include "attnlab/analysis/memory.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace attnlab::memory {

namespace {
std::atomic<std::size_t> live{0};
std::atomic<std::size_t> peak{0};
std::atomic<bool> counted{false};

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

void count_allocation(std::size_t bytes) {
  const std::size_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::size_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}
void count_release(std::size_t bytes) { live.fetch_sub(bytes, std::memory_order_relaxed); }
void mark_heap_counted() { counted.store(true, std::memory_order_relaxed); }

bool heap_counted() { return counted.load(std::memory_order_relaxed); }
std::size_t current_bytes() { return live.load(std::memory_order_relaxed); }
std::size_t peak_bytes() { return peak.load(std::memory_order_relaxed); }
void reset_peak() { peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed); }
std::size_t resident_bytes() { return read_status_kib("VmRSS:"); }
std::size_t resident_peak_bytes() { return read_status_kib("VmHWM:"); }

}  // namespace attnlab::memory
