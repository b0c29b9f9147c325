// Model directories (attnlab/model/model_dir.hpp).
#include "attnlab/model/model_dir.hpp"

#include <fmt/format.h>
#include <filesystem>

#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/selective_decoder.hpp"

namespace attnlab {

namespace {
// A tokenizer whose ids run past the model's embeddings belongs to another model.
void check_tokenizer_fits(const std::optional<BpeTokenizer>& tokenizer, std::size_t vocab_size,
                          const std::string& source) {
  if (tokenizer && tokenizer->id_limit() > vocab_size)
    fail(source, fmt::format("token ids run to {} but the model has {} embeddings; the tokenizer is not this model's",
                             tokenizer->id_limit() - 1, vocab_size));
}
}  // namespace

std::optional<BpeTokenizer> open_tokenizer(const std::filesystem::path& root, std::size_t vocab_size) {
  // tokenizer.json when there is one (what today's checkpoints ship; it says everything
  // vocab.json + merges.txt say, and more), else GPT-2's two files.
  std::optional<BpeTokenizer> tokenizer;
  std::filesystem::path file;
  if (std::filesystem::exists(root / "tokenizer.json")) {
    file = root / "tokenizer.json";
    tokenizer = BpeTokenizer::load_tokenizer_json(file);
  } else if (std::filesystem::exists(root / "vocab.json") && std::filesystem::exists(root / "merges.txt")) {
    file = root / "vocab.json";
    tokenizer = BpeTokenizer::load(root / "vocab.json", root / "merges.txt");
  }
  check_tokenizer_fits(tokenizer, vocab_size, file.string());
  return tokenizer;
}

ModelDir open_model_dir(const std::string& dir) {
  const std::string path = resolve_model_path(dir);  // once: an Ollama name reads the store's manifest
  if (is_gguf_path(path)) {                          // the tokenizer is in the metadata
    ModelDir m{dir, {}, std::nullopt};
    m.model = load_gguf(path, &m.tokenizer);
    check_tokenizer_fits(m.tokenizer, m.model.config.vocab_size, dir);
    return m;
  }
  ModelDir m{dir, load_model(path), std::nullopt};
  m.tokenizer = open_tokenizer(dir, m.model.config.vocab_size);
  return m;
}

std::vector<int> encode_text(const ModelDir& m, std::string_view text) {
  if (!m.tokenizer)
    fail("text", is_gguf_path(m.dir)
                     ? fmt::format("{} carries no tokenizer in its metadata (tokenizer.ggml.*) to tokenize text "
                                   "with; give token ids instead (--ids 1,2,3)",
                                   m.dir)
                     : fmt::format("{} has no tokenizer (tokenizer.json, or vocab.json and merges.txt) to tokenize "
                                   "text with; give token ids instead (--ids 1,2,3), or put the tokenizer's files "
                                   "beside the model",
                                   m.dir));
  std::vector<TokenId> ids = m.tokenizer->encode(text);
  // The beginning-of-text token the tokenizer's post-processor adds (Llama, Gemma), as
  // transformers' tokenizer(text) gives it: these models were trained with it first.
  if (const std::optional<TokenId> bos = m.tokenizer->bos()) ids.insert(ids.begin(), *bos);
  return {ids.begin(), ids.end()};
}

std::vector<std::string> token_texts(const ModelDir& m, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids)
    out.push_back(m.tokenizer && static_cast<std::size_t>(id) < m.tokenizer->id_limit() ? m.tokenizer->token_text(id)
                                                                                        : fmt::format("#{}", id));
  return out;
}

TokenShown show_token(const ModelDir& m, int id) {
  TokenShown t{id, token_texts(m, {id})[0], ""};
  t.text = valid_utf8(t.bytes);
  return t;
}

std::vector<TokenShown> show_tokens(const ModelDir& m, const std::vector<int>& ids) {
  std::vector<TokenShown> out;
  out.reserve(ids.size());
  for (int id : ids)
    out.push_back(show_token(m, id));
  return out;
}

std::vector<int> byte_values(std::string_view bytes) {
  std::vector<int> out;
  out.reserve(bytes.size());
  for (char c : bytes)
    out.push_back(static_cast<unsigned char>(c));
  return out;
}

void add_tokens_json(nlohmann::json& out, const ModelDir& m, const std::vector<int>& ids) {
  nlohmann::json texts = nlohmann::json::array(), bytes = nlohmann::json::array();
  for (const TokenShown& t : show_tokens(m, ids)) {
    texts.push_back(t.text);
    bytes.push_back(byte_values(t.bytes));
  }
  out["tokens"] = std::move(texts);
  out["token_bytes"] = std::move(bytes);
}

nlohmann::json generation_json(const ModelDir& m, const std::vector<int>& prompt,
                               const std::vector<GeneratedToken>& generated, const GenerateOptions& options) {
  nlohmann::json steps = nlohmann::json::array();
  std::vector<int> all = prompt;
  const ModelConfig& c = m.model.config;
  for (const GeneratedToken& t : generated) {
    const TokenShown shown = show_token(m, t.id);
    nlohmann::json step = {{"id", t.id},
                           {"token", shown.text},
                           {"bytes", byte_values(shown.bytes)},
                           {"probability", t.probability},
                           {"cache_tokens", t.cache_tokens},
                           {"cache_bytes", t.cache_bytes}};
    if (options.trace) {
      step["position"] = t.position;
      step["cache_bytes_per_layer"] = t.cache_bytes / c.n_layer;
      nlohmann::json alternatives = nlohmann::json::array();
      for (const TokenProbability& a : t.alternatives)
        alternatives.push_back(candidate_json(m, a.id, a.probability));
      step["alternatives"] = std::move(alternatives);
      // [L][H][position + 1]: each head's row over the cache the token was chosen after
      const std::size_t row = t.position + 1;
      nlohmann::json layers = nlohmann::json::array();
      for (std::size_t l = 0; l < c.n_layer; ++l) {
        nlohmann::json heads = nlohmann::json::array();
        for (std::size_t h = 0; h < c.n_head; ++h) {
          const float* w = t.attention.data() + (l * c.n_head + h) * row;
          heads.push_back(std::vector<float>(w, w + row));
        }
        layers.push_back(std::move(heads));
      }
      step["attention"] = std::move(layers);
    }
    steps.push_back(std::move(step));
    all.push_back(t.id);
  }
  nlohmann::json prompt_json = {{"ids", prompt}};
  add_tokens_json(prompt_json, m, prompt);
  nlohmann::json text = nullptr;
  if (m.tokenizer) text = valid_utf8(m.tokenizer->decode(std::vector<TokenId>(all.begin(), all.end())));
  nlohmann::json out = {
      {"prompt", std::move(prompt_json)}, {"generated", std::move(steps)},      {"ids", all},
      {"text", std::move(text)},          {"temperature", options.temperature}, {"seed", options.seed}};
  if (options.trace)  // the cache's shape: what each step's bytes are made of
    out["cache"] = {{"dtype", cache_type_name(options.cache)},
                    {"layers", c.n_layer},
                    {"heads", c.n_head},
                    {"kv_heads", c.kv_heads()},
                    {"head_dim", c.head_dim()},
                    {"bytes_per_token", cache_token_bytes(c, options.cache)}};
  return out;
}

nlohmann::json candidate_json(const ModelDir& m, int id, double probability) {
  const TokenShown shown = show_token(m, id);
  return {{"id", id}, {"token", shown.text}, {"bytes", byte_values(shown.bytes)}, {"probability", probability}};
}

std::string visible_token(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c == ' ')
      out += "␣";
    else if (c == '\n')
      out += "↵";
    else if (c == '\t')
      out += "⇥";
    else
      out += c;
  return out;
}

}  // namespace attnlab
