// Intervening: run a scenario as given and with interventions applied, and say what moved.
// The interventions themselves are data (attnlab/scenario/interventions.hpp);
// docs/interventions.md says what each one does and does not establish.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "attnlab/core/matrix.hpp"
#include "attnlab/core/trace.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// What an intervention did: both traces, and per token (in the original order, so a
// permuted token is compared with itself) the output before and after and the change.
struct InterventionResult {
  Scenario before_scenario, after_scenario;
  Trace before, after;
  std::vector<std::string> applied;    // describe(interventions)
  std::vector<std::size_t> after_row;  // token i of `before` is row after_row[i] of `after`
  Matrix output_before;                // [n × d_out] before.output
  Matrix output_after;                 // [n × d_out] after.output, rows in the original order
  Matrix delta;                        // [n × d_out] output_after - output_before
  std::vector<double> delta_norm;      // [n] ‖delta_i‖ (Euclidean)
};

// Runs the scenario as given and with the interventions applied.
InterventionResult intervene(const Scenario& scenario, const Interventions& interventions);

}  // namespace attnlab
