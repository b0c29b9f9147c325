// The BPE tokenizer (attnlab/model/bpe.hpp): the bytes-to-unicode table; loading and
// validating GPT-2's vocab.json and merges.txt into a recipe (tokenizer_json.cpp makes one
// from a tokenizer.json); building the tables from a recipe; and the one encoder: added
// tokens cut out, the text steps of bpe_steps.cpp, the merges applied by rank, the look-up;
// and decoding.
#include "attnlab/model/bpe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "attnlab/core/error.hpp"
#include "tokenizers/bpe_recipe.hpp"

namespace attnlab {

using namespace bpe_detail;

namespace {

// ---- the bytes-to-unicode table ------------------------------------------------------
//
// BPE works on strings of symbols, and GPT-2 wants every symbol to be a printable
// character (so vocab.json and merges.txt are readable text, and a space inside a merge
// line cannot be confused with the separator). So each byte gets a stand-in character:
// the bytes that are already printable latin-1 stand for themselves, and the other 68
// (0..32, 127..160, 173) take U+0100, U+0101, ... in increasing byte order.

constexpr bool printable_latin1(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

constexpr std::array<char32_t, 256> make_byte_table() {
  std::array<char32_t, 256> table{};
  char32_t next_stand_in = 0x100;
  for (unsigned b = 0; b < 256; ++b)
    table[b] = printable_latin1(b) ? char32_t(b) : next_stand_in++;
  return table;
}
constexpr std::array<char32_t, 256> kByteToUnicode = make_byte_table();
constexpr char32_t kTableEnd = 0x100 + 68;  // one past the largest stand-in, U+0143
static_assert(kByteToUnicode[' '] == 0x120 && kByteToUnicode['\n'] == 0x10A && kByteToUnicode[173] == kTableEnd - 1);

// Refuses text that encode() will not take: longer than kMaxEncodeBytes, or not UTF-8.
void check_text(std::string_view text) {
  if (text.size() > kMaxEncodeBytes)
    fail("text", fmt::format("is {} bytes; the tokenizer takes at most {} bytes (1 MiB) at once: split the text",
                             text.size(), kMaxEncodeBytes));
  for (std::size_t i = 0; i < text.size();) {
    const CodePoint c = read_utf8(text, i);
    if (c.length == 0)
      fail("text", fmt::format("byte {} (0x{:02X}) is not valid UTF-8; the tokenizer reads UTF-8 text only "
                               "(decode the text as UTF-8, replacing bad bytes with U+FFFD, before encoding it)",
                               i, static_cast<unsigned char>(text[i])));
    i += c.length;
  }
}

// ---- vocab.json ----------------------------------------------------------------------
//
// Read as a stream of JSON events (nlohmann's SAX interface), so that the shape is checked
// as it is read: one object, each value a non-negative integer. The first event that does
// not fit stops the parse, whatever follows (a nested array is refused when it opens).

using json = nlohmann::json;

class VocabReader : public nlohmann::json_sax<json> {
 public:
  explicit VocabReader(std::string_view text) : text_(text) {}

  std::vector<std::pair<std::string, TokenId>> entries;
  std::string error;  // "" while the file is good

  bool key(string_t& token) override {
    if (entries.size() == kMaxVocabEntries)
      return refuse(fmt::format("has more than {} entries; the limit is {}", kMaxVocabEntries, kMaxVocabEntries));
    key_ = std::move(token);
    return true;
  }
  bool number_unsigned(number_unsigned_t id) override {
    if (depth_ != 1) return wrong_shape("a number");
    if (key_.empty()) return refuse(fmt::format("entry {}: a token must not be the empty string", entries.size()));
    if (id >= kMaxVocabEntries)
      return refuse(fmt::format("entry {} ({}): id {} is too large; ids must be below {}", entries.size(),
                                excerpt(key_), id, kMaxVocabEntries));
    entries.emplace_back(std::move(key_), static_cast<TokenId>(id));
    return true;
  }
  bool number_integer(number_integer_t) override { return value_is("a negative number"); }
  bool number_float(number_float_t, const string_t&) override { return value_is("a number with a fraction"); }
  bool null() override { return value_is("null"); }
  bool boolean(bool) override { return value_is("a boolean"); }
  bool string(string_t&) override { return value_is("a string"); }
  bool binary(binary_t&) override { return value_is("binary data"); }
  bool start_array(std::size_t) override { return value_is("an array"); }
  bool end_array() override { return true; }  // never reached: start_array refuses
  bool start_object(std::size_t) override {
    if (depth_ != 0) return value_is("an object");
    depth_ = 1;
    return true;
  }
  bool end_object() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    // `position` counts the bytes read, the offending one included.
    return refuse(fmt::format("is not valid JSON: the error is at {}", line_and_column(text_, position - 1)));
  }

 private:
  std::string_view text_;
  std::string key_;
  int depth_ = 0;

  bool refuse(std::string message) {
    error = std::move(message);
    return false;
  }
  bool wrong_shape(std::string_view got) {
    return refuse(fmt::format("must be a JSON object of token -> id, like {{\"hello\": 31373}}, but is {}", got));
  }
  // A value that is not an id: inside the object it is a bad entry, at the top the wrong shape.
  bool value_is(std::string_view got) {
    if (depth_ != 1) return wrong_shape(got);
    return refuse(fmt::format("entry {} ({}): the id must be a non-negative integer, but is {}", entries.size(),
                              excerpt(key_), got));
  }
};

// vocab.json's entries, in file order, ids and tokens unique.
std::vector<std::pair<std::string, TokenId>> read_vocab(std::string_view text) {
  VocabReader reader(text);
  const bool parsed = json::sax_parse(text, &reader);
  if (!parsed || !reader.error.empty())
    fail("vocab.json", reader.error.empty() ? "is not a JSON object of token -> id" : reader.error);
  if (reader.entries.empty()) fail("vocab.json", "has no entries: expected an object of token -> id");

  TokenId largest = 0;
  for (const auto& [symbol, id] : reader.entries)
    largest = std::max(largest, id);
  std::vector<const std::string*> owner(std::size_t(largest) + 1, nullptr);  // by id
  std::unordered_set<std::string_view> seen;
  for (std::size_t entry = 0; entry < reader.entries.size(); ++entry) {
    const auto& [symbol, id] = reader.entries[entry];
    if (owner[id])
      fail("vocab.json", fmt::format("entry {} ({}): id {} is already the id of {}; ids must be unique", entry,
                                     excerpt(symbol), id, excerpt(*owner[id])));
    if (!seen.insert(symbol).second)
      fail("vocab.json", fmt::format("entry {}: the token {} appears twice", entry, excerpt(symbol)));
    owner[id] = &symbol;
  }
  return std::move(reader.entries);
}

// ---- merges.txt ------------------------------------------------------------------------

// merges.txt's merges, by rank: one "a b" per line, a first "#version" line a comment,
// blank lines skipped, each pair once.
std::vector<std::pair<std::string, std::string>> read_merges(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> merges;
  std::unordered_set<std::string> seen;  // "a b": the parts hold no space or tab
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && line.starts_with("#version")) continue;

    // The parts, separated by runs of spaces or tabs.
    std::vector<std::string_view> parts;
    for (std::size_t i = 0; i < line.size();) {
      const std::size_t first = line.find_first_not_of(" \t", i);
      if (first == std::string_view::npos) break;
      const std::size_t last = std::min(line.find_first_of(" \t", first), line.size());
      parts.push_back(line.substr(first, last - first));
      i = last;
    }
    if (parts.empty()) continue;  // a blank line
    if (parts.size() != 2)
      fail("merges.txt", fmt::format("line {}: a merge is two symbols separated by a space, like \"Ġ t\", but this "
                                     "line has {} part{}",
                                     line_number, parts.size(), parts.size() == 1 ? "" : "s"));
    if (merges.size() == kMaxMerges)
      fail("merges.txt",
           fmt::format("line {}: more than {} merges; the limit is {}", line_number, kMaxMerges, kMaxMerges));
    if (!seen.insert(fmt::format("{} {}", parts[0], parts[1])).second)
      fail("merges.txt", fmt::format("line {}: the merge {} {} appears twice; each pair has one rank", line_number,
                                     excerpt(parts[0]), excerpt(parts[1])));
    merges.emplace_back(parts[0], parts[1]);
  }
  return merges;
}

// The byte a SentencePiece byte token "<0xNN>" stands for (either case of hex digit, as
// Hugging Face's ByteFallback decoder reads it), or nothing.
std::optional<std::uint8_t> byte_token(std::string_view symbol) {
  if (symbol.size() != 6 || !symbol.starts_with("<0x") || symbol[5] != '>') return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = digit(symbol[3]), low = digit(symbol[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<std::uint8_t>(high * 16 + low);
}

// The byte token the fallback writes for `byte`: "<0x0A>" (upper-case hex, as Hugging Face).
std::string byte_token_name(std::uint8_t byte) { return fmt::format("<0x{:02X}>", byte); }

}  // namespace

// ---- helpers the other tokenizer files share (bpe_recipe.hpp) ------------------------

namespace bpe_detail {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

CodePoint read_utf8(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned lead = byte(i);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  char32_t value = 0, smallest = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, smallest = 0x10000;
  } else {
    return {0, 0};  // a continuation byte, or 0xF8..0xFF
  }
  if (i + length > s.size()) return {0, 0};
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 0};
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  if (value < smallest || (value >= 0xD800 && value <= 0xDFFF) || value > 0x10FFFF) return {0, 0};
  return {value, length};
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string excerpt(std::string_view s) {
  constexpr std::size_t kShown = 32;
  std::size_t end = 0;  // the longest prefix of whole characters within kShown bytes
  while (end < s.size()) {
    const std::size_t length = std::max<std::size_t>(read_utf8(s, end).length, 1);
    if (end + length > kShown) break;
    end += length;
  }
  const std::string quoted =
      nlohmann::json(std::string(s.substr(0, end))).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return end < s.size() ? quoted + fmt::format(" (the first {} of {} bytes)", end, s.size()) : quoted;
}

}  // namespace bpe_detail

char32_t byte_to_unicode(std::uint8_t byte) { return kByteToUnicode[byte]; }

std::optional<std::uint8_t> unicode_to_byte(char32_t c) {
  static const std::array<std::int16_t, kTableEnd> inverse = [] {
    std::array<std::int16_t, kTableEnd> table;
    table.fill(-1);
    for (unsigned b = 0; b < 256; ++b)
      table[kByteToUnicode[b]] = static_cast<std::int16_t>(b);
    return table;
  }();
  if (c >= kTableEnd || inverse[c] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(inverse[c]);
}

// ---- the tokenizer's state -----------------------------------------------------------
//
// Merging works on symbols, not strings: each distinct symbol string (every vocabulary key,
// the 256 byte symbols, every part and result of a merge) gets a small integer, so a pair
// is two integers and a merge is one table look-up. Symbols with the same string are the
// same symbol, whatever merges produced them, exactly as when the algorithm runs on strings.

using Symbol = std::int32_t;

struct Merge {
  Symbol left, right, result;
};

struct BpeTokenizer::Impl {
  BpeRecipe::Dialect dialect = BpeRecipe::Dialect::gpt2;
  std::string source, vocab_name;

  // Ids, both ways: the vocabulary, and the added tokens it lacks.
  StringMap<TokenId> id_of_symbol;
  std::vector<std::string> symbol_of_id;  // by id; "" for an id no entry has
  std::vector<std::string> bytes_of_id;   // by id: the bytes the token stands for
  std::size_t entries = 0;
  std::size_t added_tokens = 0;
  std::optional<TokenId> end_of_text, bos;

  // Symbols and merges.
  StringMap<Symbol> symbol_index;
  std::vector<std::string_view> symbol_text;        // by symbol: its key in symbol_index
  std::vector<TokenId> token_of_symbol;             // by symbol; -1 when the vocabulary lacks it
  std::vector<std::pair<Symbol, Symbol>> parts_of;  // by symbol: the first merge that makes it; (-1, -1) if none
  std::array<Symbol, 256> symbol_of_byte{};         // byte-level tokenizers
  std::vector<Merge> merges;                        // by rank
  std::unordered_map<std::uint64_t, std::int32_t> rank_of_pair;

  // The model's options (bpe_recipe.hpp).
  bool byte_level = true;
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::array<Symbol, 256> fallback_of_byte{};  // the symbol of "<0xNN>"; -1 when absent
  Symbol unk = -1;

  // The steps before the merges, and the way back.
  AddedTokenMatcher raw_added;         // matched in the text as given
  AddedTokenMatcher normalized_added;  // matched in the normalized text
  std::vector<NormalizeStep> normalizer;
  std::vector<PreTokenizeStep> pre_tokenizer;
  DecodeRules decoding;

  // Pieces already encoded, keyed by the piece's bytes. Short pieces only, and cleared when
  // full, so it stays small; guarded by a mutex, so encode() may run on several threads.
  static constexpr std::size_t kCachedPieceBytes = 64;
  static constexpr std::size_t kCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex;
  mutable StringMap<std::vector<TokenId>> cache;

  static std::uint64_t pair_key(Symbol left, Symbol right) {
    return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
  }

  Symbol intern(std::string_view text) {
    if (const auto it = symbol_index.find(text); it != symbol_index.end()) return it->second;
    const auto at = symbol_index.emplace(std::string(text), static_cast<Symbol>(symbol_text.size())).first;
    symbol_text.push_back(at->first);  // node-based map: the key stays where it is
    parts_of.emplace_back(-1, -1);
    return at->second;
  }
  // The symbol of `text` when it is a vocabulary key, else -1.
  Symbol token_symbol(std::string_view text) const {
    const auto it = symbol_index.find(text);
    return it != symbol_index.end() && token_of_symbol[it->second] >= 0 ? it->second : -1;
  }

  void build(BpeRecipe& recipe);
  std::string bytes_of_key(std::string_view key) const;

  void fall_back(std::string_view text, std::vector<Symbol>& word, bool& after_unk) const;
  std::vector<Symbol> initial_word(std::string_view piece) const;
  std::vector<Symbol> merge(std::vector<Symbol> word) const;
  void append_tokens(Symbol symbol, std::vector<TokenId>& out) const;
  void append_piece(std::string_view piece, std::vector<TokenId>& out) const;
  void encode_stretch(std::string_view text, bool at_start, bool with_added, std::vector<TokenId>& out) const;
  std::vector<TokenId> encode(std::string_view text, bool with_added) const;
  void check_id(TokenId id, std::string_view field) const;
};

// The bytes a vocabulary key stands for, as the decoder says.
std::string BpeTokenizer::Impl::bytes_of_key(std::string_view key) const {
  std::string bytes;
  if (decoding.byte_level) {
    // Each character through the table backwards. A character outside the table (possible
    // only in an added token, never in GPT-2's files) stands for its own UTF-8 bytes, so such
    // a token decodes to its own text.
    for (std::size_t i = 0; i < key.size();) {
      const CodePoint c = read_utf8(key, i);  // keys are UTF-8: the loaders' JSON parsers check
      assert(c.length != 0);
      if (const auto byte = unicode_to_byte(c.value))
        bytes += char(*byte);
      else
        append_utf8(bytes, c.value);
      i += c.length;
    }
    return bytes;
  }
  if (decoding.byte_fallback)
    if (const auto byte = byte_token(key)) return std::string(1, char(*byte));
  bytes = key;
  for (const auto& [from, to] : decoding.replace)
    bytes = replace_all(bytes, from, to);
  return bytes;
}

void BpeTokenizer::Impl::build(BpeRecipe& recipe) {
  dialect = recipe.dialect;
  source = std::move(recipe.source);
  vocab_name = std::move(recipe.vocab_name);
  byte_level = recipe.byte_level;
  ignore_merges = recipe.ignore_merges;
  byte_fallback = recipe.byte_fallback;
  fuse_unk = recipe.fuse_unk;
  normalizer = std::move(recipe.normalizer);
  pre_tokenizer = std::move(recipe.pre_tokenizer);
  decoding = std::move(recipe.decoding);
  bos = recipe.bos;

  // Ids.
  TokenId largest = 0;
  for (const auto& [key, id] : recipe.vocab)
    largest = std::max(largest, id);
  for (const AddedToken& token : recipe.added_tokens)
    largest = std::max(largest, token.id);
  symbol_of_id.assign(std::size_t(largest) + 1, std::string());
  bytes_of_id.assign(std::size_t(largest) + 1, std::string());
  entries = recipe.vocab.size();
  id_of_symbol.reserve(recipe.vocab.size() + recipe.added_tokens.size());
  for (const auto& [key, id] : recipe.vocab) {
    bytes_of_id[id] = bytes_of_key(key);
    symbol_of_id[id] = key;
    id_of_symbol.emplace(key, id);
  }

  // Symbols: the bytes first (so every piece can be written as symbols), every vocabulary
  // key (so a fallback token or unk_token is a symbol too), then the merges' parts.
  // A merge by ids (merge_ids) names vocabulary keys only: its symbols are those keys'.
  const std::size_t merge_count = recipe.merges.size() + recipe.merge_ids.size();
  symbol_index.reserve(256 + recipe.vocab.size() + merge_count);
  symbol_text.reserve(256 + recipe.vocab.size() + merge_count);
  parts_of.reserve(256 + recipe.vocab.size() + merge_count);
  if (byte_level)
    for (unsigned b = 0; b < 256; ++b) {
      std::string s;
      append_utf8(s, kByteToUnicode[b]);
      symbol_of_byte[b] = intern(s);
    }
  std::vector<Symbol> symbol_of_token(symbol_of_id.size(), -1);  // by id
  for (const auto& [key, id] : recipe.vocab)
    symbol_of_token[id] = intern(key);
  merges.reserve(merge_count);
  rank_of_pair.reserve(merge_count);
  const auto add_merge = [&](Symbol left, Symbol right, Symbol result) {
    rank_of_pair.emplace(pair_key(left, right), static_cast<std::int32_t>(merges.size()));
    if (parts_of[result].first < 0) parts_of[result] = {left, right};
    merges.push_back({left, right, result});
  };
  for (const auto& [left_text, right_text] : recipe.merges)
    add_merge(intern(left_text), intern(right_text), intern(left_text + right_text));
  for (const auto& [left, right, result] : recipe.merge_ids)
    add_merge(symbol_of_token[left], symbol_of_token[right], symbol_of_token[result]);
  token_of_symbol.assign(symbol_text.size(), -1);
  for (std::size_t s = 0; s < symbol_text.size(); ++s)
    if (const auto it = id_of_symbol.find(symbol_text[s]); it != id_of_symbol.end()) token_of_symbol[s] = it->second;

  // The fallbacks.
  for (unsigned b = 0; b < 256; ++b)
    fallback_of_byte[b] = byte_fallback ? token_symbol(byte_token_name(static_cast<std::uint8_t>(b))) : -1;
  if (recipe.unk_token) unk = token_symbol(*recipe.unk_token);

  // Added tokens: an id the vocabulary lacks gets the content as its symbol and its bytes
  // (it is matched literally, so it decodes to itself); every one is matched in the text.
  added_tokens = recipe.added_tokens.size();
  for (const AddedToken& token : recipe.added_tokens) {
    if (symbol_of_id[token.id].empty()) {
      symbol_of_id[token.id] = token.content;
      bytes_of_id[token.id] = token.content;
      id_of_symbol.emplace(token.content, token.id);
      ++entries;
    }
    if (token.normalized && !normalizer.empty())
      normalized_added.add(normalize(normalizer, token.content), token.id, token.lstrip, token.rstrip);
    else
      raw_added.add(token.content, token.id, token.lstrip, token.rstrip);
  }
  if (const auto it = id_of_symbol.find(std::string_view("<|endoftext|>")); it != id_of_symbol.end())
    end_of_text = it->second;
}

// A piece's text that has no symbol of its own (a character or byte the vocabulary lacks),
// as the recipe says: the symbols of its "<0xNN>" bytes, else unk_token (one for a run of
// them with fuse_unk), else an InputError.
void BpeTokenizer::Impl::fall_back(std::string_view text, std::vector<Symbol>& word, bool& after_unk) const {
  if (byte_fallback && std::all_of(text.begin(), text.end(),
                                   [&](char b) { return fallback_of_byte[static_cast<unsigned char>(b)] >= 0; })) {
    for (const char b : text)
      word.push_back(fallback_of_byte[static_cast<unsigned char>(b)]);
    after_unk = false;
    return;
  }
  if (unk >= 0) {
    if (!(fuse_unk && after_unk)) word.push_back(unk);
    after_unk = true;
    return;
  }
  if (byte_level)
    fail("text",
         fmt::format("holds a byte whose symbol {} is not in {}, so it has no token", excerpt(text), vocab_name));
  fail("text", fmt::format("holds the character {} (U+{:04X}), which is not in {}, and the tokenizer has no "
                           "byte_fallback or unk_token to write it with",
                           excerpt(text), static_cast<std::uint32_t>(read_utf8(text, 0).value), vocab_name));
}

// Step 2 for one piece: its symbols before any merge, a byte or a character each.
std::vector<Symbol> BpeTokenizer::Impl::initial_word(std::string_view piece) const {
  std::vector<Symbol> word;
  word.reserve(piece.size());
  bool after_unk = false;
  if (byte_level) {
    for (const char byte : piece) {
      const Symbol s = symbol_of_byte[static_cast<unsigned char>(byte)];
      // GPT-2's dialect leaves a missing byte symbol to append_tokens, after the merges.
      if (dialect == BpeRecipe::Dialect::gpt2 || token_of_symbol[s] >= 0) {
        word.push_back(s);
        after_unk = false;
      } else {
        fall_back(symbol_text[s], word, after_unk);
      }
    }
    return word;
  }
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t length = read_utf8(piece, i).length;
    const std::string_view character = piece.substr(i, length);
    if (const Symbol s = token_symbol(character); s >= 0) {
      word.push_back(s);
      after_unk = false;
    } else {
      fall_back(character, word, after_unk);
    }
    i += length;
  }
  return word;
}

// Step 3 on one piece: while some adjacent pair is a merge, take the pair of lowest rank
// and join it (see BpeRecipe::Dialect for the two ways: in rounds, or one at a time).
//
// Done with a priority queue of candidate pairs, keyed (rank, position), so a long piece
// (a megabyte of letters) costs O(n log n) rather than a scan of the word per merge. A
// candidate whose symbols have changed since it was queued is stale and skipped ("a a a"
// joins the first two only). In GPT-2's rounds, one round pops every candidate of the
// lowest rank, in position order (that is "join each occurrence, left to right"), and the
// pairs the round creates are queued only when it is over, as the original algorithm looks
// at the new word only after it has joined every occurrence. One at a time (Hugging Face),
// the pairs a join creates are queued at once; a new pair never has the rank of the merge
// that made it (its one side is longer), so the round loop serves both.
std::vector<Symbol> BpeTokenizer::Impl::merge(std::vector<Symbol> word) const {
  const std::size_t n = word.size();
  if (n < 2) return word;
  constexpr Symbol kGone = -1;  // a symbol joined into its left neighbour
  const std::size_t none = n;   // "no neighbour"
  std::vector<std::size_t> next(n), previous(n);
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = i + 1;  // n past the last symbol
    previous[i] = i == 0 ? none : i - 1;
  }

  struct Candidate {
    std::int32_t rank;
    std::size_t left, right;  // positions in the piece (they keep their order as symbols join)
    bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : left > other.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](std::size_t left, std::size_t right) {
    if (left == none || right == none) return;
    if (const auto it = rank_of_pair.find(pair_key(word[left], word[right])); it != rank_of_pair.end())
      queue.push({it->second, left, right});
  };
  for (std::size_t i = 0; i + 1 < n; ++i)
    consider(i, i + 1);

  const bool in_rounds = dialect == BpeRecipe::Dialect::gpt2;
  std::vector<std::pair<std::size_t, std::size_t>> new_pairs;
  const auto queue_new_pairs = [&] {
    for (const auto& [left, right] : new_pairs)
      if (left != none && right != none && word[left] != kGone && word[right] != kGone && next[left] == right)
        consider(left, right);
    new_pairs.clear();
  };
  while (!queue.empty()) {
    const std::int32_t round = queue.top().rank;
    const Merge& m = merges[round];
    while (!queue.empty() && queue.top().rank == round) {
      const Candidate c = queue.top();
      queue.pop();
      const bool still_there = word[c.left] == m.left && next[c.left] == c.right && word[c.right] == m.right;
      if (!still_there) continue;
      word[c.left] = m.result;
      word[c.right] = kGone;
      next[c.left] = next[c.right];
      if (next[c.left] != n) previous[next[c.left]] = c.left;
      new_pairs.emplace_back(previous[c.left], c.left);
      new_pairs.emplace_back(c.left, next[c.left]);
      if (!in_rounds) queue_new_pairs();
    }
    queue_new_pairs();
  }

  std::vector<Symbol> joined;
  for (std::size_t i = 0; i != n; i = next[i])
    joined.push_back(word[i]);
  return joined;
}

// Step 4 for one symbol: its id; or, for a symbol the vocabulary lacks (GPT-2's files: a
// merge whose result is not a token), the ids of the two symbols it was joined from.
void BpeTokenizer::Impl::append_tokens(Symbol symbol, std::vector<TokenId>& out) const {
  if (token_of_symbol[symbol] >= 0) {
    out.push_back(token_of_symbol[symbol]);
    return;
  }
  const auto [left, right] = parts_of[symbol];
  if (left < 0) {
    // Only a byte symbol has no parts here: every other symbol in a word was made by a merge.
    fail("text", fmt::format("holds a byte whose symbol {} is not in {}, so it has no token",
                             excerpt(symbol_text[symbol]), vocab_name));
  }
  append_tokens(left, out);
  append_tokens(right, out);
}

// Steps 2 to 4 for one piece.
void BpeTokenizer::Impl::append_piece(std::string_view piece, std::vector<TokenId>& out) const {
  if (ignore_merges) {
    // The piece as its symbol string: through the byte table, or as it is.
    std::string key;
    if (byte_level)
      for (const char byte : piece)
        key += symbol_text[symbol_of_byte[static_cast<unsigned char>(byte)]];
    if (const Symbol s = token_symbol(byte_level ? std::string_view(key) : piece); s >= 0) {
      out.push_back(token_of_symbol[s]);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCachedPieceBytes;
  if (cacheable) {
    const std::lock_guard lock(cache_mutex);
    if (const auto it = cache.find(piece); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  for (const Symbol s : merge(initial_word(piece)))
    append_tokens(s, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    const std::lock_guard lock(cache_mutex);
    if (cache.size() >= kCacheEntries) cache.clear();
    cache.emplace(piece, std::move(ids));
  }
}

// A stretch of text between added tokens: normalized, cut by the added tokens that are
// matched in normalized text, pre-tokenized, and each piece merged.
void BpeTokenizer::Impl::encode_stretch(std::string_view text, bool at_start, bool with_added,
                                        std::vector<TokenId>& out) const {
  std::string normalized = normalize(normalizer, text);
  if (!with_added || normalized_added.empty()) {
    for (const std::string& piece : bpe_detail::pre_tokenize(pre_tokenizer, std::move(normalized), at_start))
      append_piece(piece, out);
    return;
  }
  for (const auto& part : normalized_added.split(normalized)) {
    if (part.token >= 0) {
      out.push_back(part.token);
      continue;
    }
    for (const std::string& piece :
         bpe_detail::pre_tokenize(pre_tokenizer, std::string(part.text), at_start && part.offset == 0))
      append_piece(piece, out);
  }
}

std::vector<TokenId> BpeTokenizer::Impl::encode(std::string_view text, bool with_added) const {
  check_text(text);
  std::vector<TokenId> out;
  if (!with_added || raw_added.empty()) {
    encode_stretch(text, true, with_added, out);
    return out;
  }
  // An added token is one token wherever it appears; the text between is tokenized on its
  // own (so the pattern's look-ahead stops at the token, and a normalizer's Prepend applies
  // to each stretch).
  for (const auto& part : raw_added.split(text)) {
    if (part.token >= 0)
      out.push_back(part.token);
    else
      encode_stretch(part.text, part.offset == 0, with_added, out);
  }
  return out;
}

void BpeTokenizer::Impl::check_id(TokenId id, std::string_view field) const {
  if (id < 0 || std::size_t(id) >= symbol_of_id.size() || symbol_of_id[id].empty())
    fail(field, fmt::format("token id {} is not in the vocabulary ({} tokens{})", id, entries,
                            entries == symbol_of_id.size() ? fmt::format(", ids 0 to {}", entries - 1)
                                                           : fmt::format(", ids below {}", symbol_of_id.size())));
}

// ---- the public face -----------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;

BpeTokenizer BpeTokenizer::from_recipe(BpeRecipe recipe) {
  auto impl = std::make_unique<Impl>();
  impl->build(recipe);
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::from_text(std::string_view vocab_json, std::string_view merges_txt) {
  if (vocab_json.size() > kMaxVocabFileBytes)
    fail("vocab.json",
         fmt::format("is {} bytes; the limit is {} bytes (64 MiB)", vocab_json.size(), kMaxVocabFileBytes));
  if (merges_txt.size() > kMaxVocabFileBytes)
    fail("merges.txt",
         fmt::format("is {} bytes; the limit is {} bytes (64 MiB)", merges_txt.size(), kMaxVocabFileBytes));
  // GPT-2's recipe: bytes through the table, GPT-2's pattern, merges in rounds, and
  // "<|endoftext|>" (when the vocabulary has it) the one token matched in the text.
  BpeRecipe recipe;
  recipe.dialect = BpeRecipe::Dialect::gpt2;
  recipe.source = "vocab.json + merges.txt";
  recipe.vocab_name = "vocab.json";
  recipe.vocab = read_vocab(vocab_json);
  recipe.merges = read_merges(merges_txt);
  recipe.byte_level = true;
  recipe.decoding.byte_level = true;
  PreTokenizeStep split;
  split.regex = SplitRegex::gpt2();
  recipe.pre_tokenizer.push_back(std::move(split));
  for (const auto& [key, id] : recipe.vocab)
    if (key == kEndOfText) recipe.added_tokens.push_back({id, key, /*special=*/true});
  return from_recipe(std::move(recipe));
}

BpeTokenizer BpeTokenizer::load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
  const std::string vocab = read_file_within(vocab_json, kMaxVocabFileBytes, "vocab.json");
  const std::string merges = read_file_within(merges_txt, kMaxVocabFileBytes, "merges.txt");
  return from_text(vocab, merges);
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text) const { return impl_->encode(text, true); }

std::vector<TokenId> BpeTokenizer::encode_ordinary(std::string_view text) const { return impl_->encode(text, false); }

std::vector<std::string> BpeTokenizer::pre_tokenize(std::string_view text) const {
  check_text(text);
  return bpe_detail::pre_tokenize(impl_->pre_tokenizer, normalize(impl_->normalizer, text), true);
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids) const {
  std::string bytes;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    impl_->check_id(ids[i], fmt::format("ids[{}]", i));
    bytes += impl_->bytes_of_id[ids[i]];
  }
  // What the decoder strips from the joined text (Llama 2: the space its "▁" put in front).
  const DecodeRules& rules = impl_->decoding;
  if (!rules.strip.empty()) {
    const std::string_view strip = rules.strip;
    std::size_t front = 0, back = bytes.size();
    for (std::size_t k = 0; k < rules.strip_start && std::string_view(bytes).substr(front).starts_with(strip); ++k)
      front += strip.size();
    for (std::size_t k = 0;
         k < rules.strip_stop && std::string_view(bytes).substr(front, back - front).ends_with(strip); ++k)
      back -= strip.size();
    bytes = bytes.substr(front, back - front);
  }
  return bytes;
}

std::string BpeTokenizer::token_text(TokenId id) const {
  impl_->check_id(id, "id");
  return impl_->bytes_of_id[id];
}

std::string_view BpeTokenizer::token_symbol(TokenId id) const {
  impl_->check_id(id, "id");
  return impl_->symbol_of_id[id];
}

std::optional<TokenId> BpeTokenizer::find_symbol(std::string_view symbol) const {
  const auto it = impl_->id_of_symbol.find(symbol);
  if (it == impl_->id_of_symbol.end()) return std::nullopt;
  return it->second;
}

std::optional<TokenId> BpeTokenizer::end_of_text() const { return impl_->end_of_text; }
std::optional<TokenId> BpeTokenizer::bos() const { return impl_->bos; }
std::size_t BpeTokenizer::vocab_size() const { return impl_->entries; }
std::size_t BpeTokenizer::id_limit() const { return impl_->symbol_of_id.size(); }
std::size_t BpeTokenizer::merge_count() const { return impl_->merges.size(); }
std::size_t BpeTokenizer::added_token_count() const { return impl_->added_tokens; }
const std::string& BpeTokenizer::source() const { return impl_->source; }

}  // namespace attnlab
