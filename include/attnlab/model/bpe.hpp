// Byte-pair encoding (BPE) tokenizers: GPT-2's, read from a checkpoint's vocab.json and
// merges.txt, and today's models' (Llama 3, SmolLM2, Qwen2.5/3, Llama 2, TinyLlama, Gemma),
// read from a Hugging Face tokenizer.json. A sentence becomes the token ids the model reads,
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
// A tokenizer.json (Hugging Face's `tokenizers` format) says the same steps as data, and
// the one BpeTokenizer runs what it says:
//   - added_tokens: each token's content, wherever it appears literally in the text, is one
//     token (longest first, as Hugging Face matches them), and the text between is
//     tokenized on its own: "<|im_start|>", "<|begin_of_text|>", "<s>". encode() does this
//     for every added token; encode_ordinary() for none.
//   - normalizer: null; NFC, NFD, NFKC or NFKD (Qwen: NFC, through utf8proc); Prepend and
//     Replace (Llama 2: "▁" in front, each " " as "▁"); or a Sequence of them.
//   - pre_tokenizer: Split by a regular expression (the file's own, compiled with PCRE2:
//     Llama 3's and Qwen's), Digits, Metaspace, ByteLevel (GPT-2's table, and with use_regex
//     GPT-2's pattern), or a Sequence of them. Without ByteLevel the symbols are the UTF-8
//     characters themselves (SentencePiece-style: Llama 2, Gemma), and with byte_fallback a
//     character the vocabulary lacks becomes the "<0xNN>" tokens of its bytes.
//   - model: BPE only (WordPiece and Unigram are refused), merges written "a b" or ["a", "b"],
//     ignore_merges (Llama 3: a piece that is itself a vocabulary entry is that one token),
//     byte_fallback, unk_token, fuse_unk. The merges run one at a time, as Hugging Face runs
//     them (see bpe_recipe.hpp for how that differs from GPT-2's rounds).
//   - post_processor: encode() never adds tokens the text does not hold. When the template
//     puts a token before the text (Llama 2's "<s>", Gemma's "<bos>", Llama 3's
//     "<|begin_of_text|>"), bos() gives its id, for the caller to prepend.
//   - decoder: ByteLevel; or Replace "▁" -> " ", ByteFallback, Fuse and Strip (Llama 2), or
//     Metaspace. token_text() is one token's bytes with "▁" shown as " ", and decode() joins
//     them and strips what the decoder strips (one leading space for Llama 2), so
//     decode(encode(text)) == text (in the normalizer's form: NFC for Qwen) for text without a
//     literal "▁" or, with Llama 2's Prepend, an added token inside it ("a</s>b" decodes as
//     "a</s> b": the "▁" put in front of "b" is a space). Hugging Face's decoder gives the same.
// Anything else in those fields is refused, naming the field's JSON path
// ("pre_tokenizer.pretokenizers[0].behavior"), so a file is never read half-understood.
// "truncation" and "padding" (settings for batches) are not read: encode() never cuts or
// pads.
//
// Text is UTF-8. Invalid UTF-8 is refused (InputError on "text") rather than replaced: the
// reference tokenizers work on Unicode strings, so there is no agreed answer to copy.
//
// Files are validated once, on load; errors are InputErrors whose field is "vocab.json",
// "merges.txt" or "tokenizer.json" and whose message names the entry, line or JSON path.
// Untrusted input is priced before work: the limits below are checked before anything is
// read or allocated.
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

namespace bpe_detail {
struct BpeRecipe;  // what the loaders read (src/model/tokenizers/bpe_recipe.hpp)
}
class GgufFile;  // attnlab/model/gguf.hpp

// A token id: the value of an entry of vocab.json (or of tokenizer.json's model.vocab).
using TokenId = std::int32_t;

// Limits, checked before the work they bound.
inline constexpr std::uintmax_t kMaxVocabFileBytes = 64u << 20;       // vocab.json, and merges.txt
inline constexpr std::size_t kMaxVocabEntries = 1'000'000;            // entries; every id is below this too
inline constexpr std::size_t kMaxMerges = 1'000'000;                  // lines of merges.txt
inline constexpr std::size_t kMaxEncodeBytes = std::size_t{1} << 20;  // text given to encode: 1 MiB
inline constexpr std::uintmax_t kMaxTokenizerJsonBytes = 64u << 20;   // tokenizer.json (Gemma 3's: 33 MB)
inline constexpr std::size_t kMaxTokenizerJsonDepth = 32;             // tokenizer.json's nesting
inline constexpr std::size_t kMaxAddedTokens = 100'000;               // added_tokens (Gemma 3: 6415)
inline constexpr std::size_t kMaxAddedTokenBytes = 1024;              // one added token's content
inline constexpr std::size_t kMaxPatternBytes = 4096;                 // one pre-tokenizer regex
inline constexpr std::size_t kMaxSteps = 32;                          // steps of one Sequence

// The one special token GPT-2 has.
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// GPT-2's bytes-to-unicode table: the code point that stands for byte b in a symbol.
// Bytes 33..126, 161..172 and 174..255 map to themselves; the other 68 bytes (controls,
// space, DEL, the C1 range, no-break space, soft hyphen) map, in increasing order, to
// U+0100, U+0101, ... U+0143. So ' ' (0x20) is U+0120 'Ġ' and '\n' (0x0A) is U+010A 'Ċ'.
char32_t byte_to_unicode(std::uint8_t byte);

// The inverse: the byte that code point c stands for, or nothing when c is not in the table.
std::optional<std::uint8_t> unicode_to_byte(char32_t c);

// Whether a GGUF file carries a tokenizer (tokenizer.ggml.model is set).
bool has_gguf_tokenizer(const GgufFile& file);

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

  // Reads a Hugging Face tokenizer.json (see the top of this file for what it may say). Its
  // size is checked against kMaxTokenizerJsonBytes before it is read, its nesting against
  // kMaxTokenizerJsonDepth before it is parsed, and every count against its limit before
  // the work it prices. Throws InputError ("tokenizer.json", the message starting with the JSON path of
  // the field) when the file cannot be read, is not valid, or asks for something this
  // tokenizer does not do. While loading it holds the parsed document, a few times the
  // file's size (Gemma 3's 33 MB file: about 200 MB).
  static BpeTokenizer load_tokenizer_json(const std::filesystem::path& tokenizer_json);
  // The same from the file's contents.
  static BpeTokenizer from_tokenizer_json(std::string_view tokenizer_json);

  // The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*: "gpt2" byte-level
  // BPE with merges and a named pre-tokenizer, or "llama" SentencePiece with scores), the
  // same ids as the tokenizer.json it was converted from (src/model/tokenizers/gguf_tokenizer.cpp says
  // how). Throws InputError naming the file and the metadata key when the metadata is not a
  // tokenizer attnlab reads.
  static BpeTokenizer from_gguf(const GgufFile& file);

  ~BpeTokenizer();
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // The ids of `text` (UTF-8, at most kMaxEncodeBytes), with "<|endoftext|>" (GPT-2's
  // files) or every added token (tokenizer.json) as one token. Never adds a token the text
  // does not hold: prepend bos() yourself where the model expects it.
  // Throws InputError on "text" when the text is too long or not valid UTF-8, when it
  // holds a byte (a character, for a tokenizer without ByteLevel) that the vocabulary lacks
  // and the tokenizer has no byte_fallback or unk_token for, or when the pre-tokenizer's
  // pattern stops at a PCRE2 limit. With GPT-2's files, a final symbol that is not in the
  // vocabulary (a merge whose result vocab.json lacks) is written as the tokens of the two
  // symbols it was merged from. Safe to call from several threads at once.
  std::vector<TokenId> encode(std::string_view text) const;
  // The same, with no added token recognised: "<|endoftext|>" is ordinary text.
  std::vector<TokenId> encode_ordinary(std::string_view text) const;

  // The pieces that merges run on, before the symbols are made: the text normalized and cut
  // by the pre-tokenizer (UTF-8 text, no added tokens, same limits as encode). With GPT-2's
  // files their concatenation is `text`; with a tokenizer.json it is the normalized text
  // (Llama 2's "▁Hello▁world"), less what a "Removed" split drops.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // The bytes the ids stand for, joined. Bytes are returned as they are, so a sequence
  // that ends inside a multi-byte character (a prefix of a longer encoding) gives a
  // std::string that is not valid UTF-8. Throws InputError on "ids[i]" for an id that is
  // not in the vocabulary, naming the id and the vocabulary's size.
  std::string decode(std::span<const TokenId> ids) const;

  // One token's text as the model sees it: its bytes (" world", "\n", "<|endoftext|>"; a
  // SentencePiece-style "▁world" as " world", "<0x0A>" as "\n"; an added token as its
  // content). May be part of a UTF-8 character (rare characters become byte tokens).
  // Throws InputError on "id" for an unknown id.
  std::string token_text(TokenId id) const;
  // One token's key in the vocabulary ("Ġworld", "▁world"), the form merges are written in;
  // an added token's content. Valid while the tokenizer lives.
  std::string_view token_symbol(TokenId id) const;

  // The id of the vocabulary key or added token `symbol` ("Ġworld", "<|im_start|>"), or nothing.
  std::optional<TokenId> find_symbol(std::string_view symbol) const;
  // The id of "<|endoftext|>", or nothing when the vocabulary lacks it.
  std::optional<TokenId> end_of_text() const;
  // The token a tokenizer.json's post_processor puts before the text ("<|begin_of_text|>",
  // "<s>", "<bos>"), or nothing (GPT-2's files; Qwen). encode() never adds it.
  std::optional<TokenId> bos() const;

  // Distinct ids: the entries of vocab.json (50257 for GPT-2), or of tokenizer.json's
  // model.vocab and the added tokens it lacks (Llama 3: 128256); and one past the largest id.
  std::size_t vocab_size() const;
  std::size_t id_limit() const;
  // Merges (50000 for GPT-2's merges.txt).
  std::size_t merge_count() const;
  // Added tokens (tokenizer.json's added_tokens; GPT-2's files: 1 for "<|endoftext|>", or 0).
  std::size_t added_token_count() const;
  // Where the tokenizer came from: "vocab.json + merges.txt" or "tokenizer.json".
  const std::string& source() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  // Builds the tables from a recipe that meets its contract (bpe_recipe.hpp).
  static BpeTokenizer from_recipe(bpe_detail::BpeRecipe recipe);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab
