// The API's handlers, called as the server calls them (no sockets): the first byte picks
// the endpoint, the rest is the request body, parsed with the server's limits. A handler
// answers or raises an InputError; anything else (another exception, a crash) would be a
// 500 or worse. "measure": true is dropped: it times kernels for seconds on purpose (the
// unit and API tests cover it).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attnlab/core/json.hpp"
#include "attnlab/report/packed_reply.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/limits.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;
using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned endpoint = data[0] % 5;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    json request = parse_json_document(body, "request body", kMaxRequestJsonValues);
    if (request.is_object()) request.erase("measure");
    std::string reply;
    switch (endpoint) {
      case 0: reply = api_attention(request).dump(-1, ' ', false, json::error_handler_t::replace); break;
      case 1: {
        const std::string packed = api_attention_packed(request);
        // The packed reply reads back (its header and every matrix it names).
        (void)unpack_reply(packed);
        break;
      }
      case 2: reply = api_probe(request).dump(-1, ' ', false, json::error_handler_t::replace); break;
      case 3: reply = api_cost(request).dump(-1, ' ', false, json::error_handler_t::replace); break;
      default: reply = api_kv(request).dump(-1, ' ', false, json::error_handler_t::replace); break;
    }
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
