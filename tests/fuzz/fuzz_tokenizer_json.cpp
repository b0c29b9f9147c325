// The tokenizer.json reader and the tokenizer it builds. The first byte picks the form:
//   even: one of two tiny tokenizers made here (byte 0 / 2: byte-level, GPT-2's pattern and
//         an NFC normalizer, with an added token; 4 / 6...: SentencePiece-style, Llama 2's
//         normalizer, byte fallback and decoder), and the rest of the input is the text;
//   odd:  the rest is a tokenizer.json and the text, separated by a NUL byte.
// A file either loads or is refused with an InputError (valid UTF-8, as every error).
// Whenever encode succeeds, every id is below id_limit() and decodes; for the tiny
// tokenizers decoding gives the text back (for the first, each stretch between added tokens
// in NFC; for the second, when the text has no literal "▁"); the pre-tokenizer's pieces are
// never empty.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/bpe.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;
using json = nlohmann::json;

namespace {

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

const BpeTokenizer& byte_level_tokenizer() {
  static const BpeTokenizer tokenizer = [] {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b)
      vocab[utf8(byte_to_unicode(static_cast<std::uint8_t>(b)))] = b;
    const std::string g = utf8(byte_to_unicode(' '));  // "Ġ"
    int id = 256;
    for (const std::string& token : {g + "t", std::string("he"), g + "the", std::string("in"), g + "in"})
      vocab[token] = id++;
    const json file = {
        {"added_tokens", {{{"id", 300}, {"content", "<|endoftext|>"}, {"special", true}}}},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern",
              {{"Regex",
                R"((?i:'s|'t)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
             {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model",
         {{"type", "BPE"},
          {"ignore_merges", true},
          {"vocab", vocab},
          {"merges", {g + " t", "h e", g + "t he", "i n", g + " in"}}}}};
    return BpeTokenizer::from_tokenizer_json(file.dump());
  }();
  return tokenizer;
}

const BpeTokenizer& sentencepiece_tokenizer() {
  static const BpeTokenizer tokenizer = [] {
    json vocab = {{"<unk>", 0}};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      vocab[name] = 1 + b;
    }
    int id = 257;
    for (const char* token : {"\u2581", "h", "i", "\u2581h", "\u2581hi", "\u2581\u2581"})
      vocab[token] = id++;
    const json file = {{"normalizer",
                        {{"type", "Sequence"},
                         {"normalizers",
                          {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                           {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
                       {"decoder",
                        {{"type", "Sequence"},
                         {"decoders",
                          {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                           {{"type", "ByteFallback"}},
                           {{"type", "Fuse"}},
                           {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
                       {"model",
                        {{"type", "BPE"},
                         {"byte_fallback", true},
                         {"unk_token", "<unk>"},
                         {"vocab", vocab},
                         {"merges", {"\u2581 h", "\u2581h i", "\u2581 \u2581"}}}}};
    return BpeTokenizer::from_tokenizer_json(file.dump());
  }();
  return tokenizer;
}

// encode, decode and pre_tokenize on `text`; `expected`, when given, is what decoding the
// ids must give.
void check_text(const BpeTokenizer& tokenizer, std::string_view text, const std::optional<std::string>& expected) {
  try {
    const std::vector<TokenId> ids = tokenizer.encode(text);
    for (TokenId id : ids)
      fuzz::check(id >= 0 && static_cast<std::size_t>(id) < tokenizer.id_limit(), "an id out of range");
    const std::string decoded = tokenizer.decode(ids);
    if (expected) fuzz::check(decoded == *expected, "decode(encode(text)) is not the text", text);
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  try {
    for (TokenId id : tokenizer.encode_ordinary(text))
      fuzz::check(id >= 0 && static_cast<std::size_t>(id) < tokenizer.id_limit(), "an id out of range");
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  try {
    for (const std::string& piece : tokenizer.pre_tokenize(text))
      fuzz::check(!piece.empty(), "an empty piece", text);
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
}

// What decoding the byte-level tokenizer's ids must give: each stretch between added
// tokens in NFC (its pre_tokenize() pieces, which its Isolated split keeps whole, joined),
// the added tokens as they are.
std::optional<std::string> expected_byte_level(const BpeTokenizer& tokenizer, std::string_view text) {
  constexpr std::string_view kToken = "<|endoftext|>";
  std::string out;
  try {
    for (std::size_t start = 0;;) {
      const std::size_t found = text.find(kToken, start);
      for (const std::string& piece : tokenizer.pre_tokenize(text.substr(start, found - start)))
        out += piece;
      if (found == std::string_view::npos) return out;
      out += kToken;
      start = found + kToken.size();
    }
  } catch (const InputError&) {
    return std::nullopt;  // encode refuses it too
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    if ((data[0] & 4) == 0) {
      const BpeTokenizer& tokenizer = byte_level_tokenizer();
      check_text(tokenizer, rest, expected_byte_level(tokenizer, rest));
    } else {
      const bool has_meta = rest.find("\u2581") != std::string_view::npos;
      check_text(sentencepiece_tokenizer(), rest, has_meta ? std::nullopt : std::optional<std::string>(rest));
    }
    return 0;
  }
  const std::size_t nul = rest.find('\0');
  const std::string_view file = rest.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  std::optional<BpeTokenizer> tokenizer;
  try {
    tokenizer.emplace(BpeTokenizer::from_tokenizer_json(file));
  } catch (const InputError& e) {
    fuzz::check_error(e);
    return 0;
  }
  check_text(*tokenizer, text, std::nullopt);
  for (TokenId id = 0; static_cast<std::size_t>(id) < std::min<std::size_t>(tokenizer->id_limit(), 64); ++id)
    try {
      (void)tokenizer->token_text(id);
    } catch (const InputError& e) {
      fuzz::check_error(e);
    }
  return 0;
}
