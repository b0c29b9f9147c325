// Typing a sentence into the lab: words become tokens, and each word gets an embedding
// from a deterministic table, so the same sentence always gives the same numbers.
#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

namespace {

// FNV-1a, 64 bits: a tiny, fixed hash so a word's vector is the same on every machine.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// Whether every token of the scenario has the same value in column c.
bool constant_column(const Matrix& embeddings, std::size_t c) {
  for (std::size_t i = 1; i < embeddings.rows; ++i)
    if (embeddings(i, c) != embeddings(0, c)) return false;
  return embeddings.rows > 1;
}

}  // namespace

std::vector<double> word_embedding(const Scenario& scenario, std::string_view word) {
  SplitMix64 rng(fnv1a(word));
  std::vector<double> row(scenario.d_model());
  for (std::size_t c = 0; c < row.size(); ++c) {
    const double drawn = std::round((2.0 * rng.uniform() - 1.0) * 100.0) / 100.0;  // always drawn: stable per column
    row[c] = constant_column(scenario.embeddings, c) ? scenario.embeddings(0, c) : drawn;
  }
  return row;
}

Scenario with_sentence(const Scenario& scenario, std::string_view sentence) {
  std::vector<std::string> words;
  std::istringstream in{std::string(sentence)};
  for (std::string w; in >> w;)
    words.push_back(w);
  if (words.empty()) fail("sentence", "no words; type at least one word");
  if (words.size() > kMaxTokens)
    fail("sentence", fmt::format("{} words is more than the limit of {} tokens", words.size(), kMaxTokens));

  Scenario out = scenario;
  out.tokens = words;
  out.embeddings = Matrix(words.size(), scenario.d_model());
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto known = std::find(scenario.tokens.begin(), scenario.tokens.end(), words[i]);
    if (known != scenario.tokens.end()) {
      const auto row = scenario.embeddings.row(known - scenario.tokens.begin());
      std::copy(row.begin(), row.end(), out.embeddings.row(i).begin());
    } else {
      const std::vector<double> row = word_embedding(scenario, words[i]);
      std::copy(row.begin(), row.end(), out.embeddings.row(i).begin());
    }
  }
  if (!scenario.source) out.mask.hidden_keys.clear();  // they named the old tokens
  out.query.reset();
  return out;
}

}  // namespace attnlab
