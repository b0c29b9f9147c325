// run_experiment (attnlab/analysis/experiment.hpp): edits, the price check, then the
// reference kernel (with interventions, before and after) or the tiled one.
#include "attnlab/analysis/experiment.hpp"

#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

Trace tiled_trace(const Scenario& scenario) {
  Trace trace = attend_tiled(attention_input(scenario));
  trace.tokens = scenario.tokens;
  trace.source_tokens = scenario.source ? scenario.source->tokens : scenario.tokens;
  check_finite(scenario, trace);  // as run_scenario does for the reference
  return trace;
}

}  // namespace

ExperimentResult run_experiment(const Experiment& experiment, const std::function<void(Scenario&)>& before_running) {
  ExperimentResult result;
  result.kernel = experiment.kernel;
  try {
    result.baseline = apply_edits(experiment.scenario, experiment.edits);
  } catch (const InputError& e) {
    if (experiment.edits_origin.empty()) throw;
    throw e.under(experiment.edits_origin);
  }
  if (before_running) before_running(result.baseline);
  if (experiment.kernel == KernelKind::tiled) {
    if (!experiment.interventions.empty())
      fail("kernel",
           "interventions run on the reference kernel, which keeps the weights they change; use the reference kernel");
    result.scenario = result.baseline;
    result.trace = tiled_trace(result.scenario);
    return result;
  }
  if (experiment.interventions.empty()) {
    result.scenario = result.baseline;
    result.trace = run_scenario(result.scenario);
    return result;
  }
  result.intervention = intervene(result.baseline, experiment.interventions);
  result.scenario = result.intervention->after_scenario;
  result.trace = result.intervention->after;
  return result;
}

}  // namespace attnlab
