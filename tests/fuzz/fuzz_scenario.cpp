// The scenario reader: a scenario file's text, as `attnlab run FILE` reads it. A scenario
// that is read must round-trip: written with scenario_to_json and read again, it gives the
// same document back.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attnlab/core/json.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "attnlab/server/limits.hpp"  // the server reads scenarios with its own work limit
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    // parse_scenario, within the server's work limit: the CLI's 2 GiB would let one input
    // draw random heads for minutes (the price check itself is what is fuzzed).
    const nlohmann::json document = parse_json_document(text, "fuzz.json");
    const Scenario scenario = scenario_from_json(document, kMaxApiWorkBytes);
    const nlohmann::json written = scenario_to_json(scenario);
    const Scenario again = scenario_from_json(written, kMaxApiWorkBytes);
    fuzz::check(scenario_to_json(again) == written, "scenario_to_json does not round-trip:", written.dump());
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
