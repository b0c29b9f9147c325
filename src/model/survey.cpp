// The survey's sums and bounded example lists (attnlab/model/survey.hpp): fixed point, and
// merges that do not depend on order.
#include "attnlab/model/survey.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <tuple>

#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {
constexpr int kFixedBits = 32;
}  // namespace

Fixed to_fixed(double x) {
  return static_cast<Fixed>(std::nearbyintl(std::ldexp(static_cast<long double>(x), kFixedBits)));
}

double from_fixed(Fixed x) { return static_cast<double>(std::ldexp(static_cast<long double>(x), -kFixedBits)); }

std::size_t distance_bin(std::size_t d) {
  return std::min<std::size_t>(std::bit_width(d), kSurveyDistanceBins - 1);  // ⌊log₂ d⌋ + 1, and 0 for 0
}

bool example_before(const SurveyExample& a, const SurveyExample& b) {
  if (a.activation != b.activation) return a.activation > b.activation;
  return std::tie(a.document, a.window, a.position) < std::tie(b.document, b.window, b.position);
}

namespace {

bool sampled_before(const SurveyExample& a, const SurveyExample& b) {
  return std::tie(a.hash, a.document, a.window, a.position) < std::tie(b.hash, b.document, b.window, b.position);
}

// `example` into a list kept sorted by `before` and at most `limit` long.
template <class Before>
void keep_sorted(std::vector<SurveyExample>& list, std::size_t limit, SurveyExample example, Before before) {
  const auto at = std::upper_bound(list.begin(), list.end(), example, before);
  if (std::size_t(at - list.begin()) >= limit) return;
  list.insert(at, std::move(example));
  if (list.size() > limit) list.pop_back();
}

}  // namespace

void keep_example(HeadSurvey& head, const SurveyLimits& limits, SurveyExample example) {
  const std::size_t tenth = std::min<std::size_t>(9, std::size_t(example.activation * 10));
  keep_sorted(head.tenths[tenth], limits.tenth_examples, example, sampled_before);
  keep_sorted(head.top, limits.top_examples, std::move(example), example_before);
}

namespace {

// a += b, refused where 128 bits overflow (sums read from elsewhere are bounded, but merged
// without end they could reach it)
void add(Fixed& a, Fixed b) {
  if (__builtin_add_overflow(a, b, &a)) fail("sums", "merged sums overflow 128 bits; merge fewer shards at once");
}
void add(std::uint64_t& a, std::uint64_t b) {
  if (__builtin_add_overflow(a, b, &a)) fail("sums", "merged counts overflow 64 bits; merge fewer shards at once");
}

}  // namespace

void merge_survey(SurveyTotals& into, const SurveyTotals& from) {
  if (into.per_head.empty()) {
    into = from;
    return;
  }
  add(into.documents, from.documents), add(into.windows, from.windows), add(into.tokens, from.tokens);
  for (std::size_t k = 0; k < into.per_head.size() && k < from.per_head.size(); ++k) {
    HeadSurvey& a = into.per_head[k];
    const HeadSurvey& b = from.per_head[k];
    add(a.rows, b.rows), add(a.induction_rows, b.induction_rows), add(a.active_rows, b.active_rows);
    add(a.previous_token, b.previous_token), add(a.self, b.self), add(a.sink, b.sink), add(a.induction, b.induction);
    add(a.entropy, b.entropy), add(a.distance, b.distance), add(a.distance_squared, b.distance_squared);
    for (std::size_t bin = 0; bin < kSurveyDistanceBins; ++bin)
      add(a.histogram[bin], b.histogram[bin]);
    for (const SurveyExample& e : b.top)
      keep_sorted(a.top, into.limits.top_examples, e, example_before);
    for (std::size_t t = 0; t < a.tenths.size(); ++t)
      for (const SurveyExample& e : b.tenths[t])
        keep_sorted(a.tenths[t], into.limits.tenth_examples, e, sampled_before);
    for (const auto& [id, sums] : b.query_tokens) {
      TokenSums& s = a.query_tokens[id];
      add(s.sum, sums.sum), add(s.count, sums.count);
    }
    for (const auto& [id, sums] : b.key_tokens) {
      TokenSums& s = a.key_tokens[id];
      add(s.sum, sums.sum), add(s.count, sums.count);
    }
  }
}

}  // namespace attnlab
