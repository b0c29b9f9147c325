// The page's engine: attend_document (src/report/input_document.cpp) and the attention it
// runs (src/core/attention.cpp), the server's own code compiled to WebAssembly (wasm32-wasi,
// without exceptions) when clang and the WASI libraries are installed (CMakeLists.txt).
// web/engine.js loads it; with it, the temperature slider and the causal toggle recompute
// in the page instead of asking the server.
//
// Exports: attnlab_alloc(bytes) and attnlab_free(p) for the caller's input;
// attnlab_attend(input, size) -> the packed trace, attnlab_result_size() its length;
// attnlab_error() the message of the last refused input (the call itself traps).
#include <cstdlib>
#include <string>

#include "attnlab/core/error.hpp"
#include "attnlab/report/input_document.hpp"

namespace {
std::string result;
std::string last_error;
}  // namespace

namespace attnlab {

// No exceptions here: keep the message for attnlab_error, then stop (a trap in the page,
// which then asks the server, whose answer names what was wrong).
void fail(std::string_view field, std::string_view message) {
  last_error = field.empty() ? std::string(message) : std::string(field) + ": " + std::string(message);
  std::abort();
}

}  // namespace attnlab

extern "C" {

__attribute__((export_name("attnlab_alloc"))) void* attnlab_alloc(std::size_t bytes) { return std::malloc(bytes); }

__attribute__((export_name("attnlab_free"))) void attnlab_free(void* p) { std::free(p); }

__attribute__((export_name("attnlab_attend"))) const char* attnlab_attend(const char* input, std::size_t size) {
  last_error.clear();
  result = attnlab::attend_document({input, size});
  return result.data();
}

__attribute__((export_name("attnlab_result_size"))) std::size_t attnlab_result_size() { return result.size(); }

__attribute__((export_name("attnlab_error"))) const char* attnlab_error() { return last_error.c_str(); }
}
