// The one error type attnlab raises for bad input (files, flags, requests).
//
// Its message names the field, the bad value, the limit, and how to fix it; the CLI prints
// it on stderr and exits with 2, the server answers 400 with {"error": message}.
// Broken invariants inside the library are assertions, not InputErrors.
#pragma once
#include <stdexcept>
#include <string>

namespace attnlab {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InputError(message). Code that the page's WebAssembly engine shares (src/wasm/,
// built without exceptions) raises its errors through this; there it stops the engine
// instead, and the page falls back to asking the server, which says what was wrong.
[[noreturn]] void raise_input_error(const std::string& message);

}  // namespace attnlab
