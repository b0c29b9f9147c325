// Scenario edits (attnlab/scenario/edits.hpp): the sentence, heads removed and added, the
// overrides, applied in that order and validated.
#include "attnlab/scenario/edits.hpp"

#include <fmt/format.h>
#include <algorithm>

#include "attnlab/core/error.hpp"
#include "attnlab/scenario/price.hpp"

namespace attnlab {

bool ScenarioEdits::empty() const {
  return !sentence && remove_heads.empty() && add_random_heads.empty() && !overrides.causal && !overrides.temperature &&
         !overrides.window && overrides.mask_tokens.empty() && !overrides.query;
}

namespace {

void remove_heads(Scenario& s, std::vector<std::size_t> drop) {
  std::sort(drop.begin(), drop.end());
  drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
  for (std::size_t h : drop)
    if (h >= s.heads.size())
      fail("remove_heads", fmt::format("head {} does not exist; heads run from 0 to {}", h, s.heads.size() - 1));
  for (auto it = drop.rbegin(); it != drop.rend(); ++it)
    s.heads.erase(s.heads.begin() + static_cast<std::ptrdiff_t>(*it));
}

// The heads are checked and priced, all of them, before any is drawn.
void add_random_heads(Scenario& s, const std::vector<RandomHeadRequest>& requests, std::uint64_t max_work_bytes) {
  std::vector<std::pair<std::size_t, std::size_t>> widths;  // d_k, d_v per request
  std::uint64_t weight_numbers = count_numbers(s).weights;
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const std::string field = fmt::format("add_random_heads[{}]", k);
    const auto width = [&](const std::optional<std::size_t>& w, const char* key) {
      if (!w) return s.d_in();
      if (*w < 1 || *w > kMaxWidth) fail(field + "." + key, fmt::format("{} is outside 1..{}", *w, kMaxWidth));
      return *w;
    };
    if (s.heads.size() + k >= kMaxHeads) fail(field, fmt::format("a scenario has at most {} heads", kMaxHeads));
    const std::size_t d_k = width(requests[k].d_k, "d_k"), d_v = width(requests[k].d_v, "d_v");
    check_weights_to_draw(weight_numbers, head_weight_numbers(s.d_in(), d_k, d_v), max_work_bytes, field);
    weight_numbers += head_weight_numbers(s.d_in(), d_k, d_v);
    widths.emplace_back(d_k, d_v);
  }
  for (std::size_t k = 0; k < requests.size(); ++k)
    s.heads.push_back(random_head(requests[k].seed, s.d_in(), widths[k].first, widths[k].second));
}

}  // namespace

Scenario apply_edits(Scenario s, const ScenarioEdits& edits) {
  if (edits.sentence) s = with_sentence(s, *edits.sentence);
  remove_heads(s, edits.remove_heads);
  add_random_heads(s, edits.add_random_heads, edits.max_work_bytes);
  if (s.heads.empty()) fail("remove_heads", "every head would be removed; keep at least one");
  if (s.w_o && (!edits.remove_heads.empty() || !edits.add_random_heads.empty()))
    s.w_o.reset();  // W_O's rows belong to the original heads' outputs
  if (s.readout && s.readout->matrix.rows != s.d_out()) s.readout.reset();  // so do the readout's
  apply_overrides(s, edits.overrides);
  // Only a sentence (more tokens) or heads added make the scenario dearer than it was.
  if (edits.sentence || !edits.add_random_heads.empty())
    check_work(s, edits.max_work_bytes, edits.sentence ? "sentence" : "add_random_heads");
  return s;
}

}  // namespace attnlab
