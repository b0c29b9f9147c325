// Heap bytes held by this process, counted by attnlab's replacement of the global
// operator new/delete (src/core/memory.cpp): benchmarks report a kernel's peak extra
// memory from it, the KV-cache measurement the bytes the cache holds.
#pragma once
#include <cstddef>

namespace attnlab::memory {

std::size_t current_bytes();  // live heap bytes allocated through operator new
std::size_t peak_bytes();     // the most live bytes since the last reset_peak()
void reset_peak();            // peak := current

// The process's resident memory from /proc/self/status (VmRSS, VmHWM), in bytes; 0 where
// /proc is missing.
std::size_t resident_bytes();
std::size_t resident_peak_bytes();

}  // namespace attnlab::memory
