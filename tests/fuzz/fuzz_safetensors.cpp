// The safetensors header: the input is a whole file, mapped as SafetensorsFile maps one
// (an in-memory file, memfd_create, opened by its /proc path). A file that is accepted has
// every tensor inside the data section, spanning exactly elements × dtype size, and each
// tensor converts to f32.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnlab/model/safetensors.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::MemoryFile input(data, size);
  const std::string path = input.path();
  try {
    const SafetensorsFile file(path);
    for (const TensorInfo& t : file.tensors()) {
      fuzz::check(t.begin <= t.end && t.end <= file.file_bytes(), "a tensor outside the file", t.name);
      fuzz::check(t.end - t.begin == t.elements() * dtype_bytes(t.dtype), "a tensor's bytes are not its shape's",
                  t.name);
      fuzz::check(file.find(t.name) != nullptr, "find misses a tensor", t.name);
      fuzz::check(file.to_f32(t).size() == t.elements(), "to_f32 gives the wrong count", t.name);
    }
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
