// What every fuzz target shares: a failed property is a crash libFuzzer reports (abort, so
// that it keeps the input), and an error the library raises must read as valid UTF-8, as
// the server and the CLI promise (an error quotes at most 80 bytes of what was sent).
#pragma once
#include <cstdio>
#include <cstdlib>
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

}  // namespace attnlab::fuzz
