// The input document reader (the page's engine runs the same code compiled to WebAssembly):
// packed bytes in, a packed trace out or an InputError naming the field. A trace that comes
// out reads back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attnlab/report/input_document.hpp"
#include "attnlab/report/packed_reply.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::string trace = attend_document(bytes);
    (void)unpack_reply(trace);
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
