// GPT-2's tokenizer: byte-level byte-pair encoding (BPE), read from a checkpoint's
// vocab.json and merges.txt, so that a sentence becomes the token ids a GPT-2 model reads
// and each id can be shown as the text the model saw (" world", with its leading space).
//
// How text becomes ids (Radford et al., 2019, section 2.2; the same steps as the original
// encoder and as Hugging Face's GPT2Tokenizer):
//
//   1. pre-tokenize: split the text into pieces with the pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (contractions; a word, a number or a run of other symbols with at most one leading
//      space; whitespace). A merge never crosses a piece boundary. The pattern is
//      case-sensitive: in "I'M", "'M" is not a contraction piece but "'" then "M". \s is
//      Unicode's White_Space, as in Python's `regex` module that GPT-2's encoder uses
//      (JavaScript's \s differs on U+FEFF and U+0085; PCRE2's on U+180E).
//   2. bytes to symbols: each UTF-8 byte of a piece becomes one symbol, a printable
//      character through a fixed table (byte_to_unicode: printable latin-1 bytes stand for
//      themselves, the other 68 bytes for U+0100 + k), so a space becomes "Ġ", a newline "Ċ".
//   3. merge: while some adjacent pair of symbols is a line of merges.txt, join every
//      occurrence of the pair with the lowest rank (the earliest line), left to right.
//   4. look up: each final symbol string is a key of vocab.json; its value is the id.
//
// Decoding runs the table backwards: ids -> symbol strings -> bytes.
//
// Special token: when the vocabulary has "<|endoftext|>" (id 50256 in GPT-2), encode()
// recognises it as one token wherever it appears literally in the text, as Hugging Face's
// GPT2Tokenizer does, and tokenizes the text on either side of it separately.
// encode_ordinary() treats it as plain text ("<|", "endoftext", "|>").
//
// Text is UTF-8. Invalid UTF-8 is refused (InputError on "text") rather than replaced: the
// reference tokenizers work on Unicode strings, so there is no agreed answer to copy.
//
// Files are validated once, on load; errors are InputErrors whose field is "vocab.json"
// or "merges.txt" and whose message names the entry or line. Untrusted input is priced
// before work: the limits below are checked before anything is read or allocated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab {

// A token id: the value of an entry of vocab.json.
using TokenId = std::int32_t;

// Limits, checked before the work they bound.
inline constexpr std::uintmax_t kMaxVocabFileBytes = 64u << 20;       // vocab.json, and merges.txt
inline constexpr std::size_t kMaxVocabEntries = 1'000'000;            // entries; every id is below this too
inline constexpr std::size_t kMaxMerges = 1'000'000;                  // lines of merges.txt
inline constexpr std::size_t kMaxEncodeBytes = std::size_t{1} << 20;  // text given to encode: 1 MiB

// The one special token GPT-2 has.
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// GPT-2's bytes-to-unicode table: the code point that stands for byte b in a symbol.
// Bytes 33..126, 161..172 and 174..255 map to themselves; the other 68 bytes (controls,
// space, DEL, the C1 range, no-break space, soft hyphen) map, in increasing order, to
// U+0100, U+0101, ... U+0143. So ' ' (0x20) is U+0120 'Ġ' and '\n' (0x0A) is U+010A 'Ċ'.
char32_t byte_to_unicode(std::uint8_t byte);

// The inverse: the byte that code point c stands for, or nothing when c is not in the table.
std::optional<std::uint8_t> unicode_to_byte(char32_t c);

class BpeTokenizer {
 public:
  // Reads a checkpoint's vocab.json and merges.txt. Each file's size is checked against
  // kMaxVocabFileBytes before it is read. Throws InputError ("vocab.json" / "merges.txt")
  // when a file cannot be read or is not valid.
  static BpeTokenizer load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt);
  // The same from the files' contents (tests build small vocabularies in memory).
  //   vocab_json: a JSON object, token string -> id (a non-negative integer below
  //               kMaxVocabEntries), ids unique, tokens non-empty, at most kMaxVocabEntries.
  //   merges_txt: one merge "a b" per line, rank = order among the merge lines (0 first);
  //               a first line starting "#version" is a comment; blank lines are skipped;
  //               a line must have exactly two parts, and a pair may appear only once.
  //               A merge whose result is not in the vocabulary is accepted (see encode).
  static BpeTokenizer from_text(std::string_view vocab_json, std::string_view merges_txt);

  ~BpeTokenizer();
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // The ids of `text` (UTF-8, at most kMaxEncodeBytes), with "<|endoftext|>" as one token.
  // Throws InputError on "text" when the text is too long or not valid UTF-8, or when it
  // holds a byte whose symbol the vocabulary lacks. A final symbol that is not in the
  // vocabulary (a merge whose result vocab.json lacks) is written as the tokens of the two
  // symbols it was merged from. Safe to call from several threads at once.
  std::vector<TokenId> encode(std::string_view text) const;
  // The same, with "<|endoftext|>" tokenized as ordinary text.
  std::vector<TokenId> encode_ordinary(std::string_view text) const;

  // Step 1 alone: the pieces the pattern cuts `text` into (UTF-8 text, no special tokens,
  // same limits as encode). Their concatenation is `text`.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // The bytes the ids stand for, joined. Bytes are returned as they are, so a sequence
  // that ends inside a multi-byte character (a prefix of a longer encoding) gives a
  // std::string that is not valid UTF-8. Throws InputError on "ids[i]" for an id that is
  // not in the vocabulary, naming the id and the vocabulary's size.
  std::string decode(std::span<const TokenId> ids) const;

  // One token's text as the model sees it: its bytes (" world", "\n", "<|endoftext|>").
  // May be part of a UTF-8 character (GPT-2 splits rare characters into byte tokens).
  // Throws InputError on "id" for an unknown id.
  std::string token_text(TokenId id) const;
  // One token's key in vocab.json ("Ġworld"), the form merges.txt is written in; valid while
  // the tokenizer lives.
  std::string_view token_symbol(TokenId id) const;

  // The id of the vocab.json key `symbol` ("Ġworld"), or nothing.
  std::optional<TokenId> find_symbol(std::string_view symbol) const;
  // The id of "<|endoftext|>", or nothing when the vocabulary lacks it.
  std::optional<TokenId> end_of_text() const;

  // Entries of vocab.json (50257 for GPT-2), and one past the largest id.
  std::size_t vocab_size() const;
  std::size_t id_limit() const;
  // Lines of merges.txt that are merges (50000 for GPT-2).
  std::size_t merge_count() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab
