// The packed reader: read_packed, then every matrix reference in the header resolved
// (unpack_reply). Packing the unpacked header again (its matrices now lists of rows) and
// unpacking that gives the same header back.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attnlab/report/packed_reply.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)read_packed(bytes);
    const nlohmann::json unpacked = unpack_reply(bytes);
    // Lists of rows travel as they are: packing the unpacked header with no values reads
    // back to the same header.
    const PackedArrays none;
    fuzz::check(unpack_reply(pack_reply(unpacked, none)) == unpacked, "pack_reply of an unpacked header differs",
                unpacked.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200));
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
