// Interventions on a scenario: each one is a small, named change to the data the engine
// reads (a key hidden, a head's ablation or scale, a token's embedding, the order), so the
// engine computes the intervened trace the same way it computes any other.
#include "attnlab/scenario/interventions.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

// A whole number written with digits only ("12"), or nothing.
std::optional<std::size_t> whole_number(std::string_view text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return std::stoul(std::string(text));
}

// Splits "A:B" at the first colon.
std::pair<std::string_view, std::optional<std::string_view>> split_colon(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return {text, std::nullopt};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

std::string quoted(const std::string& token) { return fmt::format("\"{}\"", token); }

std::string head_label(const Scenario& s, std::size_t h) {
  return fmt::format("head {} {}", h, quoted(s.heads[h].name));
}

std::string ablation_meaning(HeadAblation a) {
  switch (a) {
    case HeadAblation::zero: return "its output set to zero";
    case HeadAblation::mean: return "its output replaced by its mean output over the tokens";
    case HeadAblation::uniform: return "its weights replaced by a uniform row over the visible keys";
    case HeadAblation::none: return "restored (no ablation)";
  }
  return "";
}

void check_head(const Scenario& s, std::size_t head, std::string_view origin) {
  if (head >= s.heads.size())
    fail(origin, fmt::format("head {} does not exist; {} has heads 0 to {}", head, s.name, s.heads.size() - 1));
}

}  // namespace

// A finite number written in full ("0.5", "-2", "1e-3"), or nothing.
std::optional<double> finite_number(std::string_view text) {
  const std::string s(text);
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

HeadAblationRequest parse_ablate_head(std::string_view text, std::string_view origin) {
  const auto [head, kind] = split_colon(text);
  const auto index = whole_number(head);
  if (!index)
    fail(origin, fmt::format("\"{}\" is not a head; write H or H:KIND with H a head index and KIND zero, mean or "
                             "uniform, e.g. 0:mean",
                             text));
  return {*index, kind ? ablation_kind(*kind, origin) : HeadAblation::zero, std::string(origin)};
}

HeadAblation ablation_kind(std::string_view kind, std::string_view origin) {
  const auto named = head_ablation_named(kind);
  if (!named || *named == HeadAblation::none)
    fail(origin, fmt::format("unknown ablation \"{}\"; use zero (the head's output is 0), mean (its mean output "
                             "over the tokens) or uniform (uniform weights)",
                             kind));
  return *named;
}

std::string checked_word(std::string_view word, std::string_view origin) {
  if (word.empty() || word.find_first_of(" \t\n\r") != std::string_view::npos)
    fail(origin, fmt::format("\"{}\" is not one word; write a single word without spaces, e.g. dog", word));
  return std::string(word);
}

HeadScaling parse_scale_head(std::string_view text, std::string_view origin) {
  const auto [head, factor] = split_colon(text);
  const auto index = whole_number(head);
  if (!index || !factor)
    fail(origin,
         fmt::format("\"{}\" is not H:F; write a head index and a factor, e.g. 1:0.5 (halve head 1) or 0:2", text));
  const auto f = finite_number(*factor);
  if (!f)
    fail(origin,
         fmt::format("\"{}\" is not a finite number; write the factor as a number, e.g. {}:0.5", *factor, *index));
  return {*index, *f, std::string(origin)};
}

TokenReplacement parse_replace_token(std::string_view text, std::string_view origin) {
  const auto [token, word] = split_colon(text);
  const auto index = whole_number(token);
  if (!index || !word)
    fail(origin, fmt::format("\"{}\" is not J:WORD; write a token index and the word to put there, e.g. 2:dog", text));
  return {*index, checked_word(*word, origin), std::nullopt, std::string(origin)};
}

TokenReplacement parse_replace_embedding(std::string_view text, std::string_view origin) {
  const auto [token, numbers] = split_colon(text);
  const auto index = whole_number(token);
  if (!index || !numbers || numbers->empty())
    fail(origin,
         fmt::format("\"{}\" is not J:x1,x2,...; write a token index and its new embedding, e.g. 1:0.5,-1", text));
  std::vector<double> embedding;
  std::string item;
  std::istringstream in{std::string(*numbers)};
  while (std::getline(in, item, ',')) {
    const auto x = finite_number(item);
    if (!x)
      fail(origin,
           fmt::format("\"{}\" is not a finite number; write the embedding as numbers separated by commas", item));
    embedding.push_back(*x);
  }
  return {*index, std::nullopt, std::move(embedding), std::string(origin)};
}

std::vector<std::string> describe(const Interventions& iv, const Scenario& s) {
  std::vector<std::string> out;
  const auto token = [&](std::size_t i) { return i < s.n() ? quoted(s.tokens[i]) : std::string("?"); };
  for (const TokenReplacement& r : iv.replace) {
    if (r.word)
      out.push_back(fmt::format("replace token {} {} by {}{}", r.index, token(r.index), quoted(*r.word),
                                r.embedding ? " with the given embedding" : ""));
    else
      out.push_back(fmt::format("give token {} {} a new embedding", r.index, token(r.index)));
  }
  const std::vector<std::string>& keys = s.source ? s.source->tokens : s.tokens;
  for (const KnockOut& k : iv.knock_out)
    out.push_back(fmt::format("knock out key {} {}", k.key, k.key < keys.size() ? quoted(keys[k.key]) : "?"));
  for (const HeadAblationRequest& a : iv.ablate)
    out.push_back(fmt::format("ablate {}: {}",
                              a.head < s.heads.size() ? head_label(s, a.head) : fmt::format("head {}", a.head),
                              ablation_meaning(a.ablation)));
  for (const HeadScaling& c : iv.scale)
    out.push_back(fmt::format(
        "scale {} by {}", c.head < s.heads.size() ? head_label(s, c.head) : fmt::format("head {}", c.head), c.factor));
  if (iv.permute) out.push_back(fmt::format("permute the tokens: new order {}", fmt::join(*iv.permute, ",")));
  return out;
}

Scenario apply_interventions(const Scenario& s, const Interventions& iv) {
  Scenario out = s;

  // Token replacements: a new name and/or embedding in the token's slot.
  for (const TokenReplacement& r : iv.replace) {
    if (r.index >= s.n())
      fail(r.origin, fmt::format("token {} does not exist; token indices run from 0 to {}", r.index, s.n() - 1));
    if (!r.word && !r.embedding) fail(r.origin, "give a word or an embedding for the token");
    std::vector<double> row;
    if (r.embedding) {
      if (r.embedding->size() != s.d_model())
        fail(r.origin, fmt::format("the embedding has {} numbers but d_model is {}; give one number per coordinate",
                                   r.embedding->size(), s.d_model()));
      row = *r.embedding;
    } else {
      const auto known = std::find(s.tokens.begin(), s.tokens.end(), *r.word);
      if (known != s.tokens.end()) {
        const auto e = s.embeddings.row(known - s.tokens.begin());
        row.assign(e.begin(), e.end());
      } else {
        row = word_embedding(s, *r.word);
      }
    }
    std::copy(row.begin(), row.end(), out.embeddings.row(r.index).begin());
    if (r.word) out.tokens[r.index] = *r.word;
  }

  // Knock-outs: hidden from every query, like the scenario's own mask_tokens.
  for (const KnockOut& k : iv.knock_out) {
    if (k.key >= s.m())
      fail(k.origin, fmt::format("token {} does not exist; key indices run from 0 to {}", k.key, s.m() - 1));
    if (std::find(out.mask.hidden_keys.begin(), out.mask.hidden_keys.end(), k.key) == out.mask.hidden_keys.end())
      out.mask.hidden_keys.push_back(k.key);
  }

  // Heads: the engine applies the ablation and the scale at the mix step.
  std::vector<bool> ablated(s.heads.size(), false), scaled(s.heads.size(), false);
  for (const HeadAblationRequest& a : iv.ablate) {
    check_head(s, a.head, a.origin);
    if (ablated[a.head]) fail(a.origin, fmt::format("head {} is ablated twice; ablate each head once", a.head));
    ablated[a.head] = true;
    out.heads[a.head].ablation = a.ablation;
  }
  for (const HeadScaling& c : iv.scale) {
    check_head(s, c.head, c.origin);
    if (scaled[c.head]) fail(c.origin, fmt::format("head {} is scaled twice; give one factor per head", c.head));
    scaled[c.head] = true;
    out.heads[c.head].scale *= c.factor;
  }

  if (iv.permute) {
    check_permutation(*iv.permute, out.n());
    out = permute_tokens(out, *iv.permute);
  }
  validate(out);
  return out;
}

}  // namespace attnlab
