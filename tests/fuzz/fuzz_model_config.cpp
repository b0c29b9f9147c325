// A checkpoint's config.json, of any family (GPT-2, Llama, Mistral, Qwen2/3, Gemma 3): the
// input is the file's bytes. A config that is accepted describes a model attnlab can build:
// heads that divide, even rotary widths, a window per layer, finite positive rotary
// frequencies, a parameter count within the limit, and a one-line description.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > (1 << 16)) return 0;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(data, data + size,
                                [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) { return depth <= 16; });
  } catch (const nlohmann::json::exception&) {
    return 0;  // not JSON: read_config_document refuses it before this reader sees it
  }
  try {
    const ModelConfig c = parse_model_config(doc, "config.json");
    fuzz::check(c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1 && c.vocab_size >= 1, "an empty dimension", "");
    fuzz::check(c.n_head % c.kv_heads() == 0, "KV heads that do not divide the query heads", "");
    fuzz::check(c.parameters() <= kMaxModelParameters, "parameters over the limit", "");
    fuzz::check(c.sliding_window.empty() || c.sliding_window.size() == c.n_layer, "a window list of the wrong size",
                "");
    if (c.rotary) {
      fuzz::check(c.head_dim() % 2 == 0, "an odd rotary head width", "");
      for (std::size_t l = 0; l < c.n_layer; ++l)
        for (double f : rope_frequencies(c, l))
          fuzz::check(std::isfinite(f) && f > 0, "a rotary frequency that is not finite and positive", "");
    }
    fuzz::check(!describe(c).empty() && config_json(c).is_object(), "no description", "");
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
