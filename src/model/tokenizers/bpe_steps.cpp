// The steps text goes through before BPE merges it (bpe_recipe.hpp): Unicode normalization
// (utf8proc) and the other normalizers, the pre-tokenizer's splits (PCRE2 for a file's
// regular expression), and finding added tokens in the text. Each follows what Hugging
// Face's `tokenizers` does, step for step, so that a tokenizer.json means the same here.
#include <fmt/format.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "attnlab/core/error.hpp"
#include "tokenizers/bpe_recipe.hpp"

namespace attnlab::bpe_detail {

namespace {

// The length of the UTF-8 character that starts at s[i] (s is valid UTF-8).
std::size_t char_length(std::string_view s, std::size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The start of the UTF-8 character that ends just before s[i] (i > 0).
std::size_t previous_char(std::string_view s, std::size_t i) {
  do
    --i;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
  return i;
}

// ---- normalizing --------------------------------------------------------------------

// `text` in a Unicode normalization form. Pure ASCII is already in every form.
std::string unicode_form(const std::string& text, int options) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return text;
  utf8proc_uint8_t* out = nullptr;
  // With an explicit length (and no UTF8PROC_NULLTERM) a NUL byte is a character like any other.
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (length < 0) fail("text", fmt::format("cannot be normalized: {}", utf8proc_errmsg(length)));
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(length));
}

// ---- the regular expression ------------------------------------------------------------

[[noreturn]] void refuse_pattern(const std::string& field, std::string_view message) {
  fail("tokenizer.json", fmt::format("{}: {}", field, message));
}

// The pattern as PCRE2 should read it to mean what Oniguruma reads: \s and \S become
// Unicode's White_Space (in a character class too, where \p{...} is allowed); escapes whose
// meaning differs between the engines are refused. Everything else is copied.
std::string oniguruma_to_pcre2(std::string_view pattern, const std::string& field) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char escaped = pattern[++i];
    switch (escaped) {
      case 's': out += "\\p{White_Space}"; break;
      case 'S': out += "\\P{White_Space}"; break;
      case 'h':
      case 'H':
      case 'w':
      case 'W':
      case 'b':
      case 'B':
        refuse_pattern(field, fmt::format("uses \\{}, which means one thing to Oniguruma (the engine Hugging Face's "
                                          "tokenizers compile this pattern with) and another to PCRE2; attnlab does "
                                          "not translate it. Spell the characters out, e.g. with \\p{{...}} classes",
                                          escaped));
      case 'Q': refuse_pattern(field, "uses \\Q...\\E, which Oniguruma does not have; escape each character instead");
      default:  // \\, \p{L}, \r, \x{...}: the same in both
        out += '\\';
        out += escaped;
    }
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(code, message, sizeof message);
  return reinterpret_cast<const char*>(message);
}

// ---- splitting ------------------------------------------------------------------------

// One stretch of a piece and whether the pattern matched it; the stretches cover the piece.
struct Stretch {
  std::size_t start, end;
  bool matched;
};

std::vector<Stretch> stretches_of(const PreTokenizeStep& step, std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  if (step.regex) {
    step.regex->find(text, matches);
  } else if (!step.literal.empty()) {
    for (std::size_t at = text.find(step.literal); at != std::string_view::npos;
         at = text.find(step.literal, at + step.literal.size()))
      matches.emplace_back(at, at + step.literal.size());
  }
  std::vector<Stretch> out;
  std::size_t previous = 0;
  for (const auto& [start, end] : matches) {
    if (start != previous) out.push_back({previous, start, false});
    out.push_back({start, end, true});
    previous = end;
  }
  if (previous != text.size() || out.empty()) out.push_back({previous, text.size(), false});
  if (step.invert)
    for (Stretch& s : out)
      s.matched = !s.matched;
  return out;
}

// The stretches joined as `behavior` says (Hugging Face's NormalizedString::split): each cut
// is a piece to keep, or (keep false) one that "removed" drops.
struct Cut {
  std::size_t start, end;
  bool keep;
};
std::vector<Cut> cuts_of(const std::vector<Stretch>& stretches, SplitBehavior behavior) {
  std::vector<Cut> cuts;
  bool previous_matched = false;
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const Stretch& s : stretches)
        cuts.push_back({s.start, s.end, true});
      break;
    case SplitBehavior::removed:
      for (const Stretch& s : stretches)
        cuts.push_back({s.start, s.end, !s.matched});
      break;
    case SplitBehavior::contiguous:  // neighbours that both matched (or both did not) join
      for (const Stretch& s : stretches) {
        if (s.matched == previous_matched && !cuts.empty())
          cuts.back().end = s.end;
        else
          cuts.push_back({s.start, s.end, true});
        previous_matched = s.matched;
      }
      break;
    case SplitBehavior::merged_with_previous:  // a match joins the stretch before it
      for (const Stretch& s : stretches) {
        if (s.matched && !previous_matched && !cuts.empty())
          cuts.back().end = s.end;
        else
          cuts.push_back({s.start, s.end, true});
        previous_matched = s.matched;
      }
      break;
    case SplitBehavior::merged_with_next:  // a match joins the stretch after it
      for (auto s = stretches.rbegin(); s != stretches.rend(); ++s) {
        if (s->matched && !previous_matched && !cuts.empty())
          cuts.back().start = s->start;
        else
          cuts.push_back({s->start, s->end, true});
        previous_matched = s->matched;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
  }
  return cuts;
}

struct Piece {
  std::string text;
  bool at_start;  // begins the whole text
};

// One step over one piece, its results appended to `out`.
void run_step(const PreTokenizeStep& step, Piece piece, std::vector<Piece>& out) {
  switch (step.kind) {
    case PreTokenizeStep::Kind::prefix_space:
      if (!piece.text.starts_with(' ')) piece.text.insert(0, 1, ' ');
      out.push_back(std::move(piece));
      return;
    case PreTokenizeStep::Kind::metaspace: {
      std::string text = replace_all(piece.text, " ", step.replacement);
      const bool prepend = step.prepend == PreTokenizeStep::Prepend::always ||
                           (step.prepend == PreTokenizeStep::Prepend::first && piece.at_start);
      if (prepend && !text.starts_with(step.replacement)) text.insert(0, step.replacement);
      if (!step.split) {
        out.push_back({std::move(text), piece.at_start});
        return;
      }
      PreTokenizeStep by_replacement;
      by_replacement.literal = step.replacement;
      by_replacement.behavior = SplitBehavior::merged_with_next;
      run_step(by_replacement, {std::move(text), piece.at_start}, out);
      return;
    }
    case PreTokenizeStep::Kind::split:
      for (const Cut& cut : cuts_of(stretches_of(step, piece.text), step.behavior))
        if (cut.keep && cut.end > cut.start)
          out.push_back({piece.text.substr(cut.start, cut.end - cut.start), piece.at_start && cut.start == 0});
      return;
  }
}

}  // namespace

// ---- normalizing ------------------------------------------------------------------------

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t start = 0;;) {
    const std::size_t found = text.find(from, start);
    if (found == std::string_view::npos) {
      out += text.substr(start);
      return out;
    }
    out += text.substr(start, found - start);
    out += to;
    start = found + from.size();
  }
}

std::string normalize(std::span<const NormalizeStep> steps, std::string_view text) {
  std::string out(text);
  for (const NormalizeStep& step : steps) {
    switch (step.kind) {
      case NormalizeStep::Kind::nfc: out = unicode_form(out, UTF8PROC_STABLE | UTF8PROC_COMPOSE); break;
      case NormalizeStep::Kind::nfd: out = unicode_form(out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE); break;
      case NormalizeStep::Kind::nfkc:
        out = unicode_form(out, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizeStep::Kind::nfkd:
        out = unicode_form(out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizeStep::Kind::prepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case NormalizeStep::Kind::replace: out = replace_all(out, step.text, step.replacement); break;
    }
  }
  return out;
}

// ---- the regular expression -------------------------------------------------------------

struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(std::unique_ptr<Code> code, std::string field)
    : code_(std::move(code)), field_(std::move(field)) {}
SplitRegex::~SplitRegex() = default;

std::shared_ptr<const SplitRegex> SplitRegex::compile(std::string_view pattern, std::string field) {
  if (pattern.size() > kMaxPatternBytes)
    refuse_pattern(field, fmt::format("is {} bytes; a pattern may have at most {}", pattern.size(), kMaxPatternBytes));
  const std::string translated = oniguruma_to_pcre2(pattern, field);
  std::unique_ptr<pcre2_compile_context, decltype(&pcre2_compile_context_free)> context(
      pcre2_compile_context_create(nullptr), &pcre2_compile_context_free);
  if (!context) throw std::bad_alloc();
  pcre2_set_newline(context.get(), PCRE2_NEWLINE_LF);  // Oniguruma's line ends: "\n" only
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF: the subject is UTF-8 code points; UCP: \p{L}, \d and case-folding are Unicode's;
  // MULTILINE: ^ and $ at line ends, as Oniguruma's Ruby syntax has them; NEVER_BACKSLASH_C:
  // \C (one byte) would cut a character in two.
  auto code = std::make_unique<Code>();
  code->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C, &error, &offset, context.get());
  if (!code->code)
    refuse_pattern(field, fmt::format("does not compile as a regular expression (PCRE2, {} of the pattern as "
                                      "rewritten for it): {}",
                                      offset == translated.size() ? "at the end" : fmt::format("at byte {}", offset),
                                      pcre2_message(error)));
  return std::shared_ptr<const SplitRegex>(new SplitRegex(std::move(code), std::move(field)));
}

std::shared_ptr<const SplitRegex> SplitRegex::gpt2() {
  static const std::shared_ptr<const SplitRegex> pattern = [] {
    // As GPT-2's encoder and Hugging Face's ByteLevel write it; \s is rewritten as above.
    constexpr std::string_view kPattern =
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    try {
      return compile(kPattern, "GPT-2's pattern");
    } catch (const InputError& e) {
      // Not the user's input: this PCRE2 lacks Unicode support or \p{White_Space} (10.40+).
      throw std::runtime_error(
          fmt::format("PCRE2 cannot compile GPT-2's pattern (PCRE2 10.40 or later, with "
                      "Unicode support, is needed): {}",
                      e.what()));
    }
  }();
  return pattern;
}

void SplitRegex::find(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& matches) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  std::optional<std::size_t> last_match_end;
  while (start <= text.size()) {
    // PCRE2_NO_UTF_CHECK: the text was checked once as a whole; checking it again at each
    // match would make the loop quadratic in the length of the text.
    const int found = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (found == PCRE2_ERROR_NOMATCH) return;
    if (found < 0)
      fail("text", fmt::format("the pre-tokenizer's pattern ({}) stopped at byte {} of a piece: {}; PCRE2 bounds "
                               "the work of one match, so split the text or simplify the pattern",
                               field_ == "GPT-2's pattern" ? field_ : "tokenizer.json's " + field_, start,
                               pcre2_message(found)));
    const PCRE2_SIZE* bounds = pcre2_get_ovector_pointer(match.get());
    const std::size_t begin = bounds[0], end = bounds[1];
    if (begin == end) {
      // An empty match: the next search starts one character on, and an empty match just
      // where the last match ended is not a match of its own.
      start = end < text.size() ? end + char_length(text, end) : text.size() + 1;
      if (last_match_end == end) continue;
    } else {
      start = end;
    }
    matches.emplace_back(begin, end);
    last_match_end = end;
  }
}

// ---- pre-tokenizing ---------------------------------------------------------------------

std::vector<std::string> pre_tokenize(std::span<const PreTokenizeStep> steps, std::string text, bool at_start) {
  std::vector<Piece> pieces;
  if (!text.empty()) pieces.push_back({std::move(text), at_start});
  std::vector<Piece> next;
  for (const PreTokenizeStep& step : steps) {
    next.clear();
    for (Piece& piece : pieces)
      run_step(step, std::move(piece), next);
    std::swap(pieces, next);
  }
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (Piece& piece : pieces)
    if (!piece.text.empty()) out.push_back(std::move(piece.text));
  return out;
}

// ---- added tokens -----------------------------------------------------------------------

void AddedTokenMatcher::add(std::string_view content, TokenId id, bool lstrip, bool rstrip) {
  std::uint32_t node = 0;
  for (const char c : content) {
    const std::uint64_t key = (std::uint64_t{node} << 8) | static_cast<unsigned char>(c);
    const auto [at, added] = edges_.try_emplace(key, static_cast<std::uint32_t>(terminal_.size()));
    if (added) terminal_.emplace_back();
    node = at->second;
  }
  terminal_[node] = {id, lstrip, rstrip};
  starts_[static_cast<unsigned char>(content.front())] = true;
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> out;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t plain = 0;  // where the ordinary text not yet written out starts
  for (std::size_t i = 0; i < text.size();) {
    if (!starts_[byte(i)]) {
      ++i;
      continue;
    }
    // The longest content that starts at i: walk the trie as far as the text follows it.
    std::uint32_t node = 0, best = 0;
    std::size_t best_end = 0;
    for (std::size_t j = i; j < text.size(); ++j) {
      const auto next = edges_.find((std::uint64_t{node} << 8) | byte(j));
      if (next == edges_.end()) break;
      node = next->second;
      if (terminal_[node].id >= 0) best = node, best_end = j + 1;
    }
    if (best_end == 0) {
      ++i;
      continue;
    }
    // Contents are whole UTF-8 characters, so a match starts and ends at character bounds.
    std::size_t start = i, end = best_end;
    if (terminal_[best].lstrip)
      while (start > plain && is_white_space(read_utf8(text, previous_char(text, start)).value))
        start = previous_char(text, start);
    if (terminal_[best].rstrip)
      while (end < text.size() && is_white_space(read_utf8(text, end).value))
        end += char_length(text, end);
    if (start > plain) out.push_back({text.substr(plain, start - plain), -1, plain});
    out.push_back({text.substr(start, end - start), terminal_[best].id, start});
    plain = i = end;
  }
  if (plain < text.size()) out.push_back({text.substr(plain), -1, plain});
  return out;
}

}  // namespace attnlab::bpe_detail
