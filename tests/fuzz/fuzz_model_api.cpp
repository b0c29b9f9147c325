// The model API's handlers on the tiny GPT-2 fixture, called as the server calls them (no
// sockets): the first byte picks the endpoint (POST /api/model/run, /api/model/attribute,
// /api/model/analysis, /api/model/generate), the rest is the request body, parsed with the server's limits. A
// handler answers or raises an InputError; anything else would be a 500 or worse. An
// analysis job that starts is cancelled at once and waited for: the fuzzer covers the
// request's reading and pricing, and whatever of the work runs before the cancel lands.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "attnlab/core/json.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/server/analysis_jobs.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/limits.hpp"
#include "attnlab/server/model_sources.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;
using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto model = std::make_shared<const ModelDir>(open_model_dir(ATTNLAB_FUZZ_MODEL));
  static const ModelSources models(model, "/nonexistent/attnlab-fuzz-runs");
  if (size == 0) return 0;
  const unsigned endpoint = data[0] % 4;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const json request = parse_json_document(body, "request body", kMaxRequestJsonValues);
    switch (endpoint) {
      case 0: (void)api_model_run(models, request); break;
      case 1: (void)api_model_attribute(models, request).dump(-1, ' ', false, json::error_handler_t::replace); break;
      case 3: (void)api_model_generate(models, request).dump(-1, ' ', false, json::error_handler_t::replace); break;
      default: {
        AnalysisJobs jobs(models);
        const json started = jobs.start(request);
        fuzz::check(started["state"] == "running", "a job that starts is running");
        (void)jobs.cancel();
        jobs.shut_down();
        const std::string state = jobs.view()["state"];
        fuzz::check(state == "cancelled" || state == "done" || state == "failed", "a job ends", state);
        // A job fails only with a message for the user (the texts give the same metric, say).
        fuzz::check(state != "failed" || jobs.view()["error"].is_string(), "a failed job says why");
        break;
      }
    }
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
