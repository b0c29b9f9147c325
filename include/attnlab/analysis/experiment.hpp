// One experiment path for every face: `attnlab run`, `attnlab explain` and
// POST /api/attention all describe what they want as an Experiment and call
// run_experiment(), so kernel choice, scenario edits, interventions and token names are
// decided in one place and the faces cannot drift apart.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "attnlab/analysis/intervene.hpp"
#include "attnlab/core/trace.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/scenario/edits.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

struct Experiment {
  Scenario scenario;            // as loaded (bundled, a file, or a request's object)
  ScenarioEdits edits;          // applied first
  Interventions interventions;  // then these, on the edited scenario (indices refer to it)
  KernelKind kernel = KernelKind::reference;
  std::string edits_origin;  // where the edits came from ("options" in the API): their errors name fields under it
};

struct ExperimentResult {
  KernelKind kernel = KernelKind::reference;
  Scenario baseline;  // the scenario with its edits applied
  Scenario scenario;  // the scenario the trace is of: baseline, or baseline with the interventions
  Trace trace;        // tokens and source tokens named, whichever kernel computed it
  std::optional<InterventionResult> intervention;  // before and after, when interventions were asked for
};

// Applies the edits, calls `before_running` with the edited scenario (a face checks its
// limits there, before any work, and may settle what its request names in that scenario,
// such as the probe's query token), then computes the trace with the kernel asked for. The
// tiled kernel gives outputs only and takes no interventions: asking for both is an
// InputError naming "kernel".
ExperimentResult run_experiment(const Experiment& experiment,
                                const std::function<void(Scenario&)>& before_running = {});

}  // namespace attnlab
