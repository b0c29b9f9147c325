// model generate: one check, one entry and one reply for every face (operations/generate.hpp).
#include "attnlab/operations/generate.hpp"

#include <fmt/format.h>

#include "attnlab/model/forward.hpp"

namespace attnlab {

std::vector<int> token_ids(const ModelDir& m, const TokenInput& tokens, std::string_view field) {
  const ModelConfig& c = m.model.config;
  const auto within_positions = [&](std::vector<int> ids, std::string_view named) {
    if (ids.size() > c.n_positions)
      fail(named,
           fmt::format("{} tokens is more than the model's {} positions; give fewer", ids.size(), c.n_positions));
    return ids;
  };
  if (tokens.text) {
    if (!m.tokenizer)
      fail(field, fmt::format("this model has no tokenizer (tokenizer.json, or vocab.json and merges.txt); give {} "
                              "instead",
                              ids_key(field)));
    std::vector<int> ids;
    try {
      ids = encode_text(m, *tokens.text);
    } catch (const InputError& e) {
      throw e.renamed(field);
    }
    if (ids.empty()) fail(field, "no tokens; give some text");
    return within_positions(std::move(ids), field);
  }
  const std::string ids_field = ids_key(field);
  if (!tokens.ids) fail(field, fmt::format("missing; give {} or {}", field, ids_field));
  if (tokens.ids->empty()) fail(ids_field, "no tokens; give at least one id");
  for (std::size_t k = 0; k < tokens.ids->size(); ++k)
    check_token_id(c, (*tokens.ids)[k], fmt::format("{}[{}]", ids_field, k));
  return within_positions(*tokens.ids, ids_field);
}

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
