// A survey's partial sums (operations/survey.hpp), as a cluster worker sends them and a shard
// file holds them: untrusted JSON read for the tiny GPT-2 fixture (2 layers × 4 heads,
// vocabulary 40). Accepted sums have every head, lists within their limits and ids in the
// vocabulary, and write back to the same JSON; merged with themselves they do not crash. A
// refusal says what is wrong in valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/survey.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ModelDir model = open_model_dir(ATTNLAB_FUZZ_MODEL);
  const nlohmann::json input = nlohmann::json::parse(data, data + size, nullptr, false);
  if (input.is_discarded()) return 0;
  try {
    SurveyTotals totals = survey_from_partial(input, model, "part");
    const ModelConfig& c = model.model.config;
    fuzz::check(totals.per_head.size() == c.n_layer * c.n_head, "not every head's sums");
    for (const HeadSurvey& h : totals.per_head) {
      fuzz::check(h.top.size() <= totals.limits.top_examples, "too many top examples");
      for (const auto& tenth : h.tenths)
        fuzz::check(tenth.size() <= totals.limits.tenth_examples, "too many sampled examples");
      for (const auto& [id, sums] : h.key_tokens)
        fuzz::check(id >= 0 && std::size_t(id) < c.vocab_size, "a key token outside the vocabulary");
    }
    const nlohmann::json again = survey_partial_json(totals, input.value("corpus", ""));
    fuzz::check(survey_partial_json(survey_from_partial(again, model, "again"), input.value("corpus", "")) == again,
                "the sums do not read back as written");
    SurveyTotals twice = totals;
    merge_survey(twice, totals);
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  return 0;
}
