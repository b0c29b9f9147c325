// The machine's available memory, the process's peak reset, and malloc's count.
#include "attnlab/analysis/machine_memory.hpp"

#include <malloc.h>

#include <fmt/format.h>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

namespace {

// A field of /proc/meminfo ("MemAvailable:") in bytes; 0 when it is not there.
std::uint64_t meminfo_bytes(std::string_view key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      std::istringstream fields(line.substr(key.size()));
      std::uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  return 0;
}

}  // namespace

std::uint64_t available_memory() { return meminfo_bytes("MemAvailable:"); }

MachineDescription describe_machine() {
  MachineDescription m;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (m.cpu.empty() && std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      m.cpu = line.substr(line.find(':') + 2);
  if (m.cpu.empty()) m.cpu = "unknown CPU";
  m.cores = std::thread::hardware_concurrency();
  m.memory_bytes = meminfo_bytes("MemTotal:");
  m.available_bytes = meminfo_bytes("MemAvailable:");
  return m;
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
