// A model directory as a user has it: config.json and model.safetensors, and beside them
// (when present) the tokenizer's vocab.json and merges.txt. Everything the `attnlab model`
// commands and the lab need to go from text to tokens to a forward pass and back.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/bpe.hpp"
#include "attnlab/model/gpt2.hpp"

namespace attnlab {

struct ModelDir {
  std::string dir;
  Gpt2Model model;
  std::optional<BpeTokenizer> tokenizer;  // when vocab.json and merges.txt are in the directory
};

// Loads the model and, when its files are there, the tokenizer (a tokenizer whose
// vocabulary is larger than the model's is refused).
ModelDir open_model_dir(const std::string& dir);

// The text as token ids; InputError naming "text" when the directory has no tokenizer.
std::vector<int> encode_text(const ModelDir& model, std::string_view text);

// Each id as the model sees it: the tokenizer's text (" world", its leading space kept), or
// "#ID" without a tokenizer.
std::vector<std::string> token_texts(const ModelDir& model, const std::vector<int>& ids);

// A token's text made visible for display: a space is "␣", a newline "↵", a tab "⇥".
std::string visible_token(std::string_view text);

}  // namespace attnlab
