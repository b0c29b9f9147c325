// model generate: one check, one entry and one reply for every face (operations/generate.hpp).
#include "attnlab/operations/generate.hpp"

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

namespace attnlab {

GenerateResult price_generate(const ModelDir& m, const GenerateRequest& r, const GenerateLimits& limits) {
  GenerateResult result{token_ids(m, r.text, "text"), {}, r.options};
  check_generate(m.model.config, result.prompt.size(), r.options);
  const double numbers = trace_numbers(m.model.config, result.prompt.size(), r.options.tokens);
  if (r.options.trace && numbers > limits.max_trace_numbers)
    fail("trace",
         fmt::format("{} new tokens after {} keep {:.3g} attention weights (layers × heads × the cache at each "
                     "step), more than the {:.3g} allowed here; {}",
                     r.options.tokens, result.prompt.size(), numbers, limits.max_trace_numbers, limits.elsewhere));
  return result;
}

void generate_tokens(const ModelDir& m, GenerateResult& result,
                     const std::function<void(const GeneratedToken&)>& each) {
  result.generated = generate(m.model, result.prompt, result.options, each);
}

nlohmann::json generate_json(const ModelDir& m, const GenerateResult& result) {
  return generation_json(m, result.prompt, result.generated, result.options);
}

}  // namespace attnlab
