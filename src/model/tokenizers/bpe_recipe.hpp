// What a BPE tokenizer is made of, as its files say it (private to the model layer).
//
// Two loaders read files into a BpeRecipe: bpe.cpp reads GPT-2's vocab.json + merges.txt,
// tokenizer_json.cpp a Hugging Face tokenizer.json. Each checks its files and fills in a
// recipe that is valid by the contract below; bpe.cpp then builds the one BpeTokenizer from
// it (the tables, the merge loop, decoding). The recipe also names the steps that text goes
// through before the merges, which bpe_steps.cpp carries out:
//
//   text -> added tokens cut out -> normalize -> pre-tokenize -> pieces -> (merges, in bpe.cpp)
//
// Every step works on UTF-8 text that is already known to be valid, and gives valid UTF-8.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/core/files.hpp"  // read_file_within
#include "attnlab/core/json.hpp"   // line_and_column

#include "attnlab/model/bpe.hpp"

namespace attnlab::bpe_detail {

// ---- UTF-8 (bpe.cpp) ------------------------------------------------------------------

// The code point that starts at s[i] and its length in bytes; length 0 when the bytes there
// are not well-formed UTF-8 (RFC 3629).
struct CodePoint {
  char32_t value;
  std::size_t length;
};
CodePoint read_utf8(std::string_view s, std::size_t i);
void append_utf8(std::string& out, char32_t c);
// Unicode's White_Space property (what Oniguruma's and Rust's "whitespace" mean).
bool is_white_space(char32_t c);
// A short, quoted, escaped excerpt of a value for an error message.
std::string excerpt(std::string_view s);

// std::unordered_map keyed by std::string that also finds a std::string_view without
// copying it into a std::string first.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

// ---- normalizing (bpe_steps.cpp) ------------------------------------------------------

// One step of a tokenizer.json "normalizer", applied to each stretch of text between added
// tokens, before pre-tokenizing.
struct NormalizeStep {
  enum class Kind {
    nfc,      // the Unicode normalization forms (utf8proc): canonical composition,
    nfd,      // canonical decomposition,
    nfkc,     // compatibility composition,
    nfkd,     // compatibility decomposition
    prepend,  // `text` put in front of a non-empty stretch (Llama 2: "▁")
    replace,  // each `text` replaced by `replacement`, left to right (" " -> "▁")
  };
  Kind kind;
  std::string text;
  std::string replacement;
};
// `text` after each step in turn.
std::string normalize(std::span<const NormalizeStep> steps, std::string_view text);
// `text` with each `from` (not empty) replaced by `to`, left to right.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

// ---- pre-tokenizing (bpe_steps.cpp) ---------------------------------------------------

// How a split treats the stretches its pattern matches (Hugging Face's
// SplitDelimiterBehavior): kept as pieces of their own, dropped, joined to the piece before
// or after, or joined with their matching neighbours.
enum class SplitBehavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };

// A pre-tokenizer's regular expression, as tokenizer.json writes it for Oniguruma (the
// engine Hugging Face's tokenizers compile it with), compiled by PCRE2 in UTF mode with
// Unicode properties. Oniguruma's \s and \S (Unicode White_Space) are rewritten as
// \p{White_Space} and \P{White_Space}, since PCRE2's \s also takes U+180E; the escapes whose
// meaning differs between the two engines and that no known tokenizer uses (\h \H \w \W \b
// \B) are refused. ^ and $ are line anchors, as in Oniguruma.
class SplitRegex {
 public:
  // Throws InputError("tokenizer.json", "<field>: ...") when the pattern is longer than
  // kMaxPatternBytes, uses a refused escape, or does not compile. `field` is the JSON path
  // ("pre_tokenizer.pretokenizers[0].pattern.Regex"), kept to name it in errors later.
  static std::shared_ptr<const SplitRegex> compile(std::string_view pattern, std::string field);
  // GPT-2's pattern (ByteLevel's use_regex, and GPT-2's own files), compiled once.
  static std::shared_ptr<const SplitRegex> gpt2();

  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Appends the (start, end) byte offsets of each match in `text`, left to right, as Rust's
  // regex iterators give them: after a match, the next search starts at its end; an empty
  // match moves the search on by one character, and one that starts where the previous
  // match ended is skipped. Throws InputError on "text" when PCRE2 stops at one of its
  // limits (the message names this pattern's field).
  void find(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& matches) const;

  const std::string& field() const { return field_; }

 private:
  struct Code;
  SplitRegex(std::unique_ptr<Code> code, std::string field);
  std::unique_ptr<Code> code_;
  std::string field_;
};

// One step of a tokenizer.json "pre_tokenizer". Each step runs on every piece the steps
// before it made.
struct PreTokenizeStep {
  enum class Kind {
    split,         // cut by `regex` (or, without one, the literal `literal`) with `behavior`
    prefix_space,  // ByteLevel's add_prefix_space: " " in front of a piece that lacks one
    metaspace,     // each " " becomes `replacement`; `replacement` in front (see prepend);
                   // then, when `split`, a new piece before each `replacement`
  };
  enum class Prepend { always, first, never };  // first: only a piece that starts the text

  Kind kind = Kind::split;
  std::shared_ptr<const SplitRegex> regex;
  std::string literal;
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;  // the pattern's matches and the stretches between them swap roles
  std::string replacement;
  Prepend prepend = Prepend::always;
  bool split = false;
};
// The pieces `steps` cut `text` into, none empty. `at_start`: `text` begins the whole text
// (Metaspace's prepend_scheme "first" adds its replacement only then).
std::vector<std::string> pre_tokenize(std::span<const PreTokenizeStep> steps, std::string text, bool at_start);

// ---- added tokens (bpe_steps.cpp) -----------------------------------------------------

// Finds added tokens in text, as Hugging Face does: at the leftmost position where some
// token's content starts, the longest content there is one token; then the search goes on
// after it. A token with lstrip (rstrip) also takes the White_Space just before (after) it.
// A trie of the contents: each position of the text costs at most one step per byte of
// the longest content (kMaxAddedTokenBytes), and only where some content's first byte is.
class AddedTokenMatcher {
 public:
  void add(std::string_view content, TokenId id, bool lstrip, bool rstrip);
  bool empty() const { return terminal_.size() <= 1; }

  // A stretch of the text: an added token (token >= 0), or ordinary text between them
  // (token -1). `offset` is where it starts in the text.
  struct Segment {
    std::string_view text;
    TokenId token;
    std::size_t offset;
  };
  // The text cut into ordinary stretches (never empty) and added tokens, in order.
  std::vector<Segment> split(std::string_view text) const;

 private:
  // A trie of the contents' bytes: edge (node, byte) -> node; node 0 is the root.
  std::unordered_map<std::uint64_t, std::uint32_t> edges_;
  struct Terminal {
    TokenId id = -1;
    bool lstrip = false, rstrip = false;
  };
  std::vector<Terminal> terminal_{Terminal{}};  // by node
  std::array<bool, 256> starts_{};              // bytes some content starts with
};

// ---- the recipe -------------------------------------------------------------------------

struct AddedToken {
  TokenId id;
  std::string content;  // non-empty
  bool special = false;
  bool normalized = false;  // matched in the normalized text rather than the raw text
  bool lstrip = false, rstrip = false;
};

// How ids become bytes again (the tokenizer's "decoder").
struct DecodeRules {
  bool byte_level = false;     // a token's characters are bytes through GPT-2's table
  bool byte_fallback = false;  // a token "<0xNN>" is the byte NN
  // In each other token, each first string replaced by the second, in order ("▁" -> " ").
  std::vector<std::pair<std::string, std::string>> replace;
  // decode() removes up to strip_start copies of `strip` from the front of the joined text,
  // and up to strip_stop from its end (Llama 2: one leading space, the one "▁" added).
  std::string strip;
  std::size_t strip_start = 0, strip_stop = 0;
};

// The contract a loader fulfils: vocabulary keys non-empty and unique, ids in
// [0, kMaxVocabEntries) and unique; merges unique pairs of non-empty symbols; for the
// hugging_face dialect, every merge's two symbols and its result are vocabulary keys and
// unk_token is one; added tokens' contents and ids unique, an added token whose content or id
// is in the vocabulary has the same id or content there.
struct BpeRecipe {
  // The two ways of running BPE that the files expect:
  //   gpt2:         the merges go in rounds, GPT-2's original encoder: each round joins every
  //                 occurrence of the lowest-ranked pair present, left to right, and only
  //                 then looks at the pairs it made. A symbol that the vocabulary lacks is
  //                 written as the two symbols it was merged from (InputError for a byte).
  //   hugging_face: one merge at a time (Hugging Face's tokenizers): the lowest-ranked pair,
  //                 leftmost first, and the pairs it makes are candidates at once. The two
  //                 agree when every merge's parts rank before it (files trained by BPE); they
  //                 differ for files converted from SentencePiece, whose merges are ordered by
  //                 score (Gemma's). A character the vocabulary lacks becomes its
  //                 "<0xNN>" byte tokens (byte_fallback), else unk_token, before merging.
  enum class Dialect { gpt2, hugging_face };
  Dialect dialect = Dialect::gpt2;
  std::string source;      // for BpeTokenizer::source(): "vocab.json + merges.txt", "tokenizer.json"
  std::string vocab_name;  // for errors on text: "vocab.json", "tokenizer.json's model.vocab"

  std::vector<std::pair<std::string, TokenId>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, 0 first
  // Or, where every merge's two symbols and result are vocabulary keys (a tokenizer.json),
  // the merges by those keys' ids (left, right, result), by rank: one list or the other.
  std::vector<std::array<TokenId, 3>> merge_ids;
  bool byte_level = true;      // the symbols start as bytes (GPT-2's table), else as characters
  bool ignore_merges = false;  // a piece that is itself a vocabulary key is that one token
  bool byte_fallback = false;
  bool fuse_unk = false;  // consecutive unknown characters make one unk_token
  std::optional<std::string> unk_token;

  std::vector<AddedToken> added_tokens;
  std::vector<NormalizeStep> normalizer;
  std::vector<PreTokenizeStep> pre_tokenizer;
  DecodeRules decoding;
  std::optional<TokenId> bos;
};

// The recipe a tokenizer.json document says (tokenizer_json.cpp): every field checked, each
// refusal an InputError about `source` naming the field's JSON path. The GGUF reader
// (gguf_tokenizer.cpp) builds such a document from a file's metadata, so that one reader
// checks both.
BpeRecipe read_tokenizer_document(const nlohmann::json& document, std::string_view source);

// The name llama.cpp gives a tokenizer.json's pre-tokenizer (tokenizer.ggml.pre: "gpt-2",
// "llama-bpe", "qwen2", "smollm"), or nothing for one it has no name attnlab knows for
// (gguf_tokenizer.cpp, whose table of names this reads).
std::optional<std::string> gguf_pre_tokenizer_name(const nlohmann::json& pre_tokenizer,
                                                   const nlohmann::json& normalizer);

// GGUF's tokenizer.ggml.token_type values, read (gguf_tokenizer.cpp) and written (gguf_write.cpp).
namespace token_type {
enum Type : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };
}  // namespace token_type

}  // namespace attnlab::bpe_detail
