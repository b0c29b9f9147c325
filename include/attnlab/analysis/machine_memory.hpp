// What the machine has available for new work (/proc/meminfo), refusing up front work that
// would not fit, resetting the process's peak resident memory (/proc/self/clear_refs), and
// the bytes malloc has handed out (glibc's mallinfo2, which sees malloc'd memory such as a
// KVCache's arrays as well as operator new). The process's resident memory itself comes
// from memory.hpp (attnlab::memory::resident_bytes, resident_peak_bytes).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace attnlab {

// Sets the peak (VmHWM) back to the current resident size, by writing 5 to
// /proc/self/clear_refs (Linux >= 4.0). Returns false when that is not possible.
bool reset_peak_rss();

// MemAvailable from /proc/meminfo in bytes: what new work can take without swapping
// (0 when unknown).
std::uint64_t available_memory();

// The machine, as a report of a measure names it: its CPU (/proc/cpuinfo's model name),
// the cores this process may use, its memory (MemTotal) and what is available now.
struct MachineDescription {
  std::string cpu;
  unsigned cores = 0;
  std::uint64_t memory_bytes = 0, available_bytes = 0;  // 0: unknown
};
MachineDescription describe_machine();

// Bytes malloc has handed out and not taken back (mallinfo2: uordblks + hblkhd).
std::uint64_t heap_bytes_in_use();

// Gives malloc's free memory back to the system (malloc_trim), so that what a measured
// run allocates next must become resident anew instead of reusing pages already counted.
void release_free_heap();

// Refuses, up front, work that needs more memory than the machine has available: throws
// InputError "FIELD: WHAT needs X and this machine has Y available (...); FIX". Does
// nothing when MemAvailable cannot be read.
void require_available_memory(std::uint64_t needed, std::string_view field, std::string_view what,
                              std::string_view fix);

}  // namespace attnlab
