// The machine's available memory, the process's peak reset, and malloc's count.
#include "attnlab/analysis/machine_memory.hpp"

#include <malloc.h>

#include <fmt/format.h>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

std::uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      std::uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  return 0;
}

std::uint64_t heap_bytes_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

void release_free_heap() { malloc_trim(0); }

void require_available_memory(std::uint64_t needed, std::string_view field, std::string_view what,
                              std::string_view fix) {
  const std::uint64_t available = available_memory();
  if (available == 0 || needed <= available) return;
  fail(field, fmt::format("{} needs {} ({} bytes) and this machine has {} available (MemAvailable in "
                          "/proc/meminfo); {}",
                          what, format_bytes(needed), format_count(needed), format_bytes(available), fix));
}

}  // namespace attnlab
