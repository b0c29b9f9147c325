// A program that links attnlab::heap_counter: its heap bytes are counted (a 1 MiB vector
// shows in current_bytes while it lives).
#include <cstdio>
#include <vector>

#include "attnlab/analysis/memory.hpp"

int main() {
  const std::size_t before = attnlab::memory::current_bytes();
  std::vector<char> block(1 << 20);
  const std::size_t during = attnlab::memory::current_bytes();
  std::printf("counted %d, grew %s\n", attnlab::memory::heap_counted() ? 1 : 0,
              during - before >= block.size() ? "by at least 1 MiB" : "too little");
}
