// Scenario edits: how a request sets its scenario up before anything is run or intervened
// on. The lab's page sends them (a typed sentence, heads removed, random heads added, the
// causal/temperature/window controls); the CLI's flags set the overrides.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// An untrained head to add: drawn from its seed, d_k and d_v the scenario's d_in unless given.
struct RandomHeadRequest {
  std::uint64_t seed = 0;
  std::optional<std::size_t> d_k, d_v;
};

struct ScenarioEdits {
  std::optional<std::string> sentence;    // words become the tokens (with_sentence)
  std::vector<std::size_t> remove_heads;  // indices of the scenario as given
  std::vector<RandomHeadRequest> add_random_heads;
  Overrides overrides;  // causal, temperature, window
  // The edited scenario's work (attnlab/scenario/price.hpp) must fit this; random heads are
  // priced against it before they are drawn. The server sets kMaxApiWorkBytes.
  std::uint64_t max_work_bytes = kMaxWorkBytes;

  bool empty() const;
};

// The scenario with the edits applied in a fixed order: the sentence, heads removed, random
// heads added, then the overrides. W_O and the readout are dropped when heads change (their
// rows belong to the original heads). Throws InputError naming the field as the JSON API
// spells it: "sentence", "remove_heads", "add_random_heads[k].d_k", "temperature", ...;
// work over edits.max_work_bytes names the sentence or the heads added.
Scenario apply_edits(Scenario scenario, const ScenarioEdits& edits);

}  // namespace attnlab
