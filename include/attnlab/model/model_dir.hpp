// A model directory as a user has it: config.json and model.safetensors, and beside them
// (when present) the tokenizer: a Hugging Face tokenizer.json, or GPT-2's vocab.json and
// merges.txt. Everything the `attnlab model` commands and the lab need to go from text to
// tokens to a forward pass and back.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/bpe.hpp"
#include "attnlab/model/generate.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

struct ModelDir {
  std::string dir;
  Model model;
  std::optional<BpeTokenizer> tokenizer;  // when tokenizer.json, or vocab.json and merges.txt, are there
};

// Loads the model and, when its files are there, the tokenizer: tokenizer.json when the
// directory has one (it is preferred), else vocab.json + merges.txt. A tokenizer whose ids
// run past the model's embeddings is refused, naming the tokenizer's file. The tokenizer's
// encode never adds a beginning-of-text token; encode_text (below) does, where the
// tokenizer's post-processor says the model expects one.
ModelDir open_model_dir(const std::string& dir);

// The tokenizer in directory `root` as open_model_dir finds it (nothing when there is none),
// checked against a model of `vocab_size` embeddings.
std::optional<BpeTokenizer> open_tokenizer(const std::filesystem::path& root, std::size_t vocab_size);

// The text as token ids, after the beginning-of-text token when the tokenizer adds one
// (tokenizer.json's post-processor: Llama, Gemma); InputError naming "text" when the
// directory has no tokenizer.
std::vector<int> encode_text(const ModelDir& model, std::string_view text);

// Each id as the model sees it: the tokenizer's text (" world", its leading space kept), or
// "#ID" without a tokenizer.
std::vector<std::string> token_texts(const ModelDir& model, const std::vector<int>& ids);

// A token as every face shows it. A byte-level BPE token often holds part of a UTF-8
// character (GPT-2's "🤗" is two tokens of two bytes each), so a token has two forms:
// `bytes`, exactly what the tokenizer maps the id to, and `text`, always valid UTF-8, with
// each run of bytes that does not make a whole character shown as one U+FFFD "�". JSON replies carry both
// ("tokens": texts, "token_bytes": lists of byte values); text output shows `text`.
struct TokenShown {
  int id = 0;
  std::string bytes;  // the token's bytes, as they are
  std::string text;   // valid UTF-8 for display
};
TokenShown show_token(const ModelDir& model, int id);
std::vector<TokenShown> show_tokens(const ModelDir& model, const std::vector<int>& ids);

// A token's bytes as JSON writes them: [240, 159] (a list of numbers 0..255).
std::vector<int> byte_values(std::string_view bytes);

// The tokens of a JSON reply, the same in every face: sets out["tokens"] (display texts)
// and out["token_bytes"] (each token's bytes exactly).
void add_tokens_json(nlohmann::json& out, const ModelDir& model, const std::vector<int>& ids);

// One candidate of a next-token list: {"id", "token" (display text), "bytes", "probability"}.
nlohmann::json candidate_json(const ModelDir& model, int id, double probability);

// A generation (attnlab/model/generate.hpp) as `attnlab model generate --json` prints it:
// {"prompt": {"ids", "tokens", "token_bytes"}, "generated": [{"id", "token", "bytes",
// "probability", "cache_tokens", "cache_bytes"}], "ids" (the prompt's and the new), "text"
// (all of them decoded; null without a tokenizer), "temperature", "seed"}.
nlohmann::json generation_json(const ModelDir& model, const std::vector<int>& prompt,
                               const std::vector<GeneratedToken>& generated, const GenerateOptions& options);

// A token's text made visible for display: a space is "␣", a newline "↵", a tab "⇥".
std::string visible_token(std::string_view text);

}  // namespace attnlab
