// What every fuzz target shares: a failed property is a crash libFuzzer reports (abort, so
// that it keeps the input), and an error the library raises must read as valid UTF-8, as
// the server and the CLI promise (an error quotes at most 80 bytes of what was sent).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"

namespace attnlab::fuzz {

[[noreturn]] inline void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz property failed: %s %.*s\n", what, static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// The error is what the server sends back: it must be valid UTF-8 JSON text.
inline void check_error(const InputError& e) {
  try {
    (void)nlohmann::json(e.what()).dump();
  } catch (const nlohmann::json::exception&) {
    fail("an InputError's message is not valid UTF-8:", e.what());
  }
}

// The input as a file the readers can open and map: an in-memory file (memfd_create),
// opened by its /proc path, closed when this goes.
class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) : fd_(memfd_create("fuzz-input", 0)) {
    if (fd_ < 0) fail("memfd_create failed");
    for (std::size_t written = 0; written < size;) {
      const ssize_t n = write(fd_, data + written, size - written);
      if (n <= 0) fail("write to the memfd failed");
      written += static_cast<std::size_t>(n);
    }
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace attnlab::fuzz
