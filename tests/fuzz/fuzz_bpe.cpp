// The BPE tokenizer. The first byte picks the form:
//   even: a tiny vocabulary (the 256 byte symbols, a few merges, one whose result the
//         vocabulary lacks, and "<|endoftext|>"), and the rest of the input is the text;
//   odd:  the rest is vocab.json, merges.txt and the text, separated by NUL bytes.
// Whenever encode succeeds, decoding its ids gives the text back, byte for byte (also for
// encode_ordinary), and the pre-tokenizer's pieces join to the text.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/bpe.hpp"
#include "fuzz_check.hpp"

using namespace attnlab;

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

const BpeTokenizer& tiny_tokenizer() {
  static const BpeTokenizer tokenizer = [] {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b)
      vocab[utf8(byte_to_unicode(static_cast<std::uint8_t>(b)))] = b;
    const std::string g = utf8(byte_to_unicode(' '));  // "Ġ"
    int id = 256;
    for (const std::string& token :
         {g + "t", std::string("he"), g + "the", std::string("in"), g + "in", std::string("'s"), std::string("12")})
      vocab[token] = id++;
    vocab["<|endoftext|>"] = id++;
    // "ng" is merged but not in the vocabulary: it is written as "n" and "g".
    const std::string merges = "#version: 0.2\n" + g + " t\nh e\n" + g + "t he\ni n\n" + g + " in\n' s\n1 2\nn g\n";
    return BpeTokenizer::from_text(vocab.dump(), merges);
  }();
  return tokenizer;
}

void check_round_trip(const BpeTokenizer& tokenizer, std::string_view text) {
  try {
    const std::vector<TokenId> ids = tokenizer.encode(text);
    fuzz::check(tokenizer.decode(ids) == text, "decode(encode(text)) is not the text", text);
    for (TokenId id : ids)
      fuzz::check(id >= 0 && static_cast<std::size_t>(id) < tokenizer.id_limit(), "an id out of range");
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  try {
    const std::vector<TokenId> ids = tokenizer.encode_ordinary(text);
    fuzz::check(tokenizer.decode(ids) == text, "decode(encode_ordinary(text)) is not the text", text);
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
  try {
    std::string joined;
    for (const std::string& piece : tokenizer.pre_tokenize(text)) {
      fuzz::check(!piece.empty(), "an empty piece", text);
      joined += piece;
    }
    fuzz::check(joined == text, "the pieces do not join to the text", text);
  } catch (const InputError& e) {
    fuzz::check_error(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    check_round_trip(tiny_tokenizer(), rest);
    return 0;
  }
  const std::size_t a = rest.find('\0');
  const std::size_t b = a == std::string_view::npos ? a : rest.find('\0', a + 1);
  const std::string_view vocab = rest.substr(0, a);
  const std::string_view merges = a == std::string_view::npos ? std::string_view() : rest.substr(a + 1, b - a - 1);
  const std::string_view text = b == std::string_view::npos ? std::string_view() : rest.substr(b + 1);
  std::optional<BpeTokenizer> tokenizer;
  try {
    tokenizer.emplace(BpeTokenizer::from_text(vocab, merges));
  } catch (const InputError& e) {
    fuzz::check_error(e);
    return 0;
  }
  check_round_trip(*tokenizer, text);
  return 0;
}
