// GPT-2's byte-level BPE tokenizer (attnlab/model/bpe.hpp): the bytes-to-unicode table,
// loading and validating vocab.json and merges.txt, the pre-tokenizing pattern (PCRE2),
// the merges applied by rank, and decoding.
#include "attnlab/model/bpe.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

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
#include <utility>

#include "attnlab/core/error.hpp"

namespace attnlab {

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

// ---- UTF-8 ---------------------------------------------------------------------------

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

// The code point that starts at s[i] and its length in bytes, or length 0 when the bytes
// there are not well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF).
struct CodePoint {
  char32_t value;
  std::size_t length;
};
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

// A short, quoted, escaped excerpt of a token for an error message: never the whole of a
// long value.
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

// "line L, column C" (both 1-based) of the byte at `index` in `text`.
std::string line_and_column(std::string_view text, std::size_t index) {
  const std::string_view before = text.substr(0, std::min(index, text.size()));
  const std::size_t line_start = before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
  return fmt::format("line {}, column {}", 1 + std::count(before.begin(), before.end(), '\n'), 1 + index - line_start);
}

std::string read_file(const std::filesystem::path& path, std::string_view field) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) fail(field, fmt::format("cannot read {}: {}", path.string(), error.message()));
  if (size > kMaxVocabFileBytes)
    fail(field, fmt::format("{} is {} bytes; the limit is {} bytes (64 MiB)", path.string(), size, kMaxVocabFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(field, fmt::format("cannot open {}", path.string()));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<std::uintmax_t>(in.gcount()) != size)
    fail(field, fmt::format("cannot read all of {}", path.string()));
  return bytes;
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

// ---- the pre-tokenizing pattern ------------------------------------------------------

// GPT-2's pattern, as its encoder writes it for Python's `regex` module,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s spelled \p{White_Space} and \S spelled \P{White_Space}: that is what \s means to
// Python's module (Unicode's White_Space property). PCRE2's own \s also matches U+180E, the
// Mongolian vowel separator, which Unicode stopped counting as a space in version 6.3.
// Compiled once per process. PCRE2_UTF reads the subject as UTF-8 code points; PCRE2_UCP
// gives \p{L} and \p{N} their Unicode meanings.
const pcre2_code* pattern() {
  static const pcre2_code* const code = [] {
    constexpr std::string_view kPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
                                          R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(),
                                         PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!compiled) {
      // Not the user's input: this PCRE2 lacks Unicode support or \p{White_Space} (10.40+).
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw std::runtime_error(
          fmt::format("PCRE2 cannot compile GPT-2's pattern (PCRE2 10.40 or later, with "
                      "Unicode support, is needed): {}",
                      reinterpret_cast<const char*>(message)));
    }
    return compiled;
  }();
  return code;
}

// Calls piece(p) for each piece of `text` (valid UTF-8, checked by the caller), in order.
void for_each_piece(std::string_view text, const std::function<void(std::string_view)>& piece) {
  if (text.empty()) return;
  const pcre2_code* code = pattern();
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start < text.size()) {
    // PCRE2_NO_UTF_CHECK: the text was checked once as a whole; checking it again at each
    // match would make the loop quadratic in the length of the text.
    const int found = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (found < 0) {
      // Every character is a letter, a number, whitespace or something else, so the pattern
      // matches at every position; what is left is a resource limit of PCRE2.
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(found, message, sizeof message);
      fail("text", fmt::format("the pre-tokenizer stopped at byte {}: {}", start, reinterpret_cast<char*>(message)));
    }
    const PCRE2_SIZE* bounds = pcre2_get_ovector_pointer(match.get());
    assert(bounds[0] == start && bounds[1] > start && "the pattern covers the text without gaps or empty pieces");
    piece(text.substr(bounds[0], bounds[1] - bounds[0]));
    start = bounds[1];
  }
}

}  // namespace

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
// Merging works on symbols, not strings: each distinct symbol string (the 256 byte
// symbols, then every part and result of a merge) gets a small integer, so a pair is two
// integers and a merge is one table look-up. Symbols with the same string are the same
// symbol, whatever merges produced them, exactly as when the algorithm runs on strings.

using Symbol = std::int32_t;

struct Merge {
  Symbol left, right, result;
};

struct BpeTokenizer::Impl {
  // vocab.json, both ways.
  std::unordered_map<std::string, TokenId> id_of_symbol;
  std::vector<std::string> symbol_of_id;  // by id; "" for an id no entry has
  std::vector<std::string> bytes_of_id;   // by id: the bytes the token stands for
  std::size_t entries = 0;
  std::optional<TokenId> end_of_text;

  // Symbols and merges.
  std::unordered_map<std::string, Symbol> symbol_index;
  std::vector<std::string> symbol_text;             // by symbol
  std::vector<TokenId> token_of_symbol;             // by symbol; -1 when vocab.json lacks it
  std::vector<std::pair<Symbol, Symbol>> parts_of;  // by symbol: the first merge that makes it; (-1, -1) if none
  std::array<Symbol, 256> symbol_of_byte{};
  std::vector<Merge> merges;  // by rank
  std::unordered_map<std::uint64_t, std::int32_t> rank_of_pair;

  // Pieces already encoded, keyed by the piece's bytes. Short pieces only, and cleared when
  // full, so it stays small; guarded by a mutex, so encode() may run on several threads.
  static constexpr std::size_t kCachedPieceBytes = 64;
  static constexpr std::size_t kCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache;

  static std::uint64_t pair_key(Symbol left, Symbol right) {
    return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
  }

  Symbol intern(const std::string& text) {
    const auto [at, added] = symbol_index.try_emplace(text, static_cast<Symbol>(symbol_text.size()));
    if (added) {
      symbol_text.push_back(text);
      parts_of.emplace_back(-1, -1);
    }
    return at->second;
  }

  void read_vocab(std::string_view text);
  void read_merges(std::string_view text);
  void link_symbols_to_tokens();

  std::vector<Symbol> merge(std::vector<Symbol> word) const;
  void append_tokens(Symbol symbol, std::vector<TokenId>& out) const;
  void append_piece(std::string_view piece, std::vector<TokenId>& out) const;
  std::vector<TokenId> encode(std::string_view text, bool with_special) const;
  void check_id(TokenId id, std::string_view field) const;
};

void BpeTokenizer::Impl::read_vocab(std::string_view text) {
  VocabReader reader(text);
  const bool parsed = json::sax_parse(text, &reader);
  if (!parsed || !reader.error.empty())
    fail("vocab.json", reader.error.empty() ? "is not a JSON object of token -> id" : reader.error);
  if (reader.entries.empty()) fail("vocab.json", "has no entries: expected an object of token -> id");

  entries = reader.entries.size();
  TokenId largest = 0;
  for (const auto& [symbol, id] : reader.entries)
    largest = std::max(largest, id);
  symbol_of_id.assign(std::size_t(largest) + 1, std::string());
  bytes_of_id.assign(std::size_t(largest) + 1, std::string());
  for (std::size_t entry = 0; entry < reader.entries.size(); ++entry) {
    auto& [symbol, id] = reader.entries[entry];
    if (!symbol_of_id[id].empty())
      fail("vocab.json", fmt::format("entry {} ({}): id {} is already the id of {}; ids must be unique", entry,
                                     excerpt(symbol), id, excerpt(symbol_of_id[id])));
    if (!id_of_symbol.try_emplace(symbol, id).second)
      fail("vocab.json", fmt::format("entry {}: the token {} appears twice", entry, excerpt(symbol)));
    // The token's bytes: each character through the table backwards. A character outside
    // the table (possible only in an added token, never in GPT-2's files) stands for its
    // own UTF-8 bytes, so such a token decodes to its own text.
    std::string& bytes = bytes_of_id[id];
    for (std::size_t i = 0; i < symbol.size();) {
      const CodePoint c = read_utf8(symbol, i);  // JSON strings are UTF-8: nlohmann checks
      assert(c.length != 0);
      if (const auto byte = unicode_to_byte(c.value))
        bytes += char(*byte);
      else
        append_utf8(bytes, c.value);
      i += c.length;
    }
    symbol_of_id[id] = std::move(symbol);
  }
  if (const auto it = id_of_symbol.find(std::string(kEndOfText)); it != id_of_symbol.end()) end_of_text = it->second;
}

void BpeTokenizer::Impl::read_merges(std::string_view text) {
  // The 256 byte symbols come first, so every piece can be written as symbols.
  for (unsigned b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(s, kByteToUnicode[b]);
    symbol_of_byte[b] = intern(s);
  }
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

    const Symbol left = intern(std::string(parts[0]));
    const Symbol right = intern(std::string(parts[1]));
    const Symbol result = intern(std::string(parts[0]) + std::string(parts[1]));
    const auto rank = static_cast<std::int32_t>(merges.size());
    if (!rank_of_pair.try_emplace(pair_key(left, right), rank).second)
      fail("merges.txt", fmt::format("line {}: the merge {} {} appears twice; each pair has one rank", line_number,
                                     excerpt(parts[0]), excerpt(parts[1])));
    if (parts_of[result].first < 0) parts_of[result] = {left, right};
    merges.push_back({left, right, result});
  }
}

void BpeTokenizer::Impl::link_symbols_to_tokens() {
  token_of_symbol.assign(symbol_text.size(), -1);
  for (std::size_t s = 0; s < symbol_text.size(); ++s)
    if (const auto it = id_of_symbol.find(symbol_text[s]); it != id_of_symbol.end()) token_of_symbol[s] = it->second;
}

// Step 3 on one piece: while some adjacent pair is a merge, take the pair of lowest rank
// and join each of its occurrences, left to right; then look again.
//
// Done with a priority queue of candidate pairs, keyed (rank, position), so a long piece
// (a megabyte of letters) costs O(n log n) rather than a scan of the word per merge. One
// round pops every candidate of the lowest rank, in position order: that is "join each
// occurrence, left to right" (a candidate whose symbols have changed since it was queued
// is stale and skipped; "a a a" joins the first two only). The pairs a round creates are
// queued only when the round is over, as the plain algorithm looks at the new word only
// after it has joined every occurrence.
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

  std::vector<std::pair<std::size_t, std::size_t>> new_pairs;
  while (!queue.empty()) {
    const std::int32_t round = queue.top().rank;
    const Merge& m = merges[round];
    new_pairs.clear();
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
    }
    for (const auto& [left, right] : new_pairs)
      if (left != none && right != none && word[left] != kGone && word[right] != kGone && next[left] == right)
        consider(left, right);
  }

  std::vector<Symbol> joined;
  for (std::size_t i = 0; i != n; i = next[i])
    joined.push_back(word[i]);
  return joined;
}

// Step 4 for one symbol: its id; or, for a symbol vocab.json lacks (a merge whose result
// is not a token), the ids of the two symbols it was joined from.
void BpeTokenizer::Impl::append_tokens(Symbol symbol, std::vector<TokenId>& out) const {
  if (token_of_symbol[symbol] >= 0) {
    out.push_back(token_of_symbol[symbol]);
    return;
  }
  const auto [left, right] = parts_of[symbol];
  if (left < 0) {
    // Only a byte symbol has no parts here: every other symbol in a word was made by a merge.
    fail("text", fmt::format("holds a byte whose symbol {} is not in vocab.json, so it has no token",
                             excerpt(symbol_text[symbol])));
  }
  append_tokens(left, out);
  append_tokens(right, out);
}

// Steps 2 to 4 for one piece.
void BpeTokenizer::Impl::append_piece(std::string_view piece, std::vector<TokenId>& out) const {
  const bool cacheable = piece.size() <= kCachedPieceBytes;
  if (cacheable) {
    const std::lock_guard lock(cache_mutex);
    if (const auto it = cache.find(std::string(piece)); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<Symbol> word;
  word.reserve(piece.size());
  for (const char byte : piece)
    word.push_back(symbol_of_byte[static_cast<unsigned char>(byte)]);
  std::vector<TokenId> ids;
  for (const Symbol s : merge(std::move(word)))
    append_tokens(s, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    const std::lock_guard lock(cache_mutex);
    if (cache.size() >= kCacheEntries) cache.clear();
    cache.emplace(piece, std::move(ids));
  }
}

std::vector<TokenId> BpeTokenizer::Impl::encode(std::string_view text, bool with_special) const {
  check_text(text);
  std::vector<TokenId> out;
  const auto encode_ordinary = [&](std::string_view part) {
    for_each_piece(part, [&](std::string_view piece) { append_piece(piece, out); });
  };
  if (!with_special || !end_of_text) {
    encode_ordinary(text);
    return out;
  }
  // "<|endoftext|>" is one token wherever it appears; the text between is ordinary text,
  // pre-tokenized on its own (so the pattern's look-ahead stops at the special token).
  for (std::size_t start = 0;;) {
    const std::size_t found = text.find(kEndOfText, start);
    encode_ordinary(text.substr(start, found == std::string_view::npos ? std::string_view::npos : found - start));
    if (found == std::string_view::npos) break;
    out.push_back(*end_of_text);
    start = found + kEndOfText.size();
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

BpeTokenizer BpeTokenizer::from_text(std::string_view vocab_json, std::string_view merges_txt) {
  if (vocab_json.size() > kMaxVocabFileBytes)
    fail("vocab.json",
         fmt::format("is {} bytes; the limit is {} bytes (64 MiB)", vocab_json.size(), kMaxVocabFileBytes));
  if (merges_txt.size() > kMaxVocabFileBytes)
    fail("merges.txt",
         fmt::format("is {} bytes; the limit is {} bytes (64 MiB)", merges_txt.size(), kMaxVocabFileBytes));
  auto impl = std::make_unique<Impl>();
  impl->read_vocab(vocab_json);
  impl->read_merges(merges_txt);
  impl->link_symbols_to_tokens();
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
  const std::string vocab = read_file(vocab_json, "vocab.json");
  const std::string merges = read_file(merges_txt, "merges.txt");
  return from_text(vocab, merges);
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text) const { return impl_->encode(text, true); }

std::vector<TokenId> BpeTokenizer::encode_ordinary(std::string_view text) const { return impl_->encode(text, false); }

std::vector<std::string> BpeTokenizer::pre_tokenize(std::string_view text) const {
  check_text(text);
  std::vector<std::string> pieces;
  for_each_piece(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids) const {
  std::string bytes;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    impl_->check_id(ids[i], fmt::format("ids[{}]", i));
    bytes += impl_->bytes_of_id[ids[i]];
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
  const auto it = impl_->id_of_symbol.find(std::string(symbol));
  if (it == impl_->id_of_symbol.end()) return std::nullopt;
  return it->second;
}

std::optional<TokenId> BpeTokenizer::end_of_text() const { return impl_->end_of_text; }
std::size_t BpeTokenizer::vocab_size() const { return impl_->entries; }
std::size_t BpeTokenizer::id_limit() const { return impl_->symbol_of_id.size(); }
std::size_t BpeTokenizer::merge_count() const { return impl_->merges.size(); }

}  // namespace attnlab
