// Heap bytes held by this process, for the measurements that report a kernel's working
// memory (bench's extra bytes, the cost measure's scratch peak) and the KV cache's bytes.
//
// The library never replaces the global operator new. A program that wants heap bytes
// counted links `attnlab::heap_counter` (the attnlab command and the tests do): a
// replacement of operator new/delete that adds each block's usable size to a counter, with
// no header and no change to how memory is allocated. Without it heap_counted() is false and
// the byte counts below stay 0.
#pragma once
#include <cstddef>

namespace attnlab::memory {

bool heap_counted();          // true when the program links attnlab::heap_counter
std::size_t current_bytes();  // live heap bytes allocated through operator new
std::size_t peak_bytes();     // the most live bytes since the last reset_peak()
void reset_peak();            // peak := current

// The process's resident memory from /proc/self/status (VmRSS, VmHWM), in bytes; 0 where
// /proc is missing.
std::size_t resident_bytes();
std::size_t resident_peak_bytes();

// Called by the heap counter only: a block of `bytes` usable bytes was allocated / freed.
void count_allocation(std::size_t bytes);
void count_release(std::size_t bytes);
void mark_heap_counted();

}  // namespace attnlab::memory
