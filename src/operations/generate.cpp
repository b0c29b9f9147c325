// model generate: one check, one entry and one reply for every face (operations/generate.hpp).
#include "attnlab/operations/generate.hpp"

namespace attnlab {

GenerateResult price_generate(const ModelDir& m, const GenerateRequest& r) {
  GenerateResult result{token_ids(m, r.text, "text"), {}, r.options};
  check_generate(m.model.config, result.prompt.size(), r.options);
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
