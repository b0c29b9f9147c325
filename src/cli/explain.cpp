// attnlab explain [SCENARIO] [flags]: every intermediate, one query worked in full.
#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "attnlab/report/explain.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "common.hpp"

namespace attnlab::cli {

Command explain_command(CLI::App& parent) {
  struct State {
    ScenarioFlags flags;
    std::size_t head = 0;
    int precision = 2;
    CLI::Option* precision_flag = nullptr;
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand(
      "explain",
      "Compute attention for a scenario and write out every step, the way docs/worked-example.md does by hand");
  add_scenario_flags(*app, state->flags);
  app->add_option("--head", state->head, "Which head's steps to show (0-based)")->capture_default_str();
  state->precision_flag =
      app->add_option("--precision", state->precision, "Decimals to show (default 2, or the scenario's own)");
  return {app, [state]() {
            const Experiment experiment = load_experiment(state->flags);
            const Scenario& scenario = experiment.scenario;
            const Interventions& interventions = experiment.interventions;
            if (state->head >= scenario.heads.size())
              fail("--head", fmt::format("head {} does not exist; {} has heads 0 to {}", state->head, scenario.name,
                                         scenario.heads.size() - 1));
            const int precision = *state->precision_flag ? state->precision : scenario.precision;
            if (precision < 0 || precision > 12)
              fail("--precision", fmt::format("must be 0 to 12 but is {}", precision));
            const bool only_permute = interventions.permute && interventions.knock_out.empty() &&
                                      interventions.ablate.empty() && interventions.scale.empty() &&
                                      interventions.replace.empty();
            if (only_permute) {
              fmt::print("{}", explain_permutation(scenario, *interventions.permute, precision));
              return 0;
            }
            // The computation in full; with interventions, the intervened one, then what moved.
            const ExperimentResult result = run_experiment(experiment);
            fmt::print("{}", explain(result.scenario, result.trace, {state->head, std::nullopt, precision}));
            if (result.intervention) fmt::print("\n{}", format_intervention(*result.intervention, precision));
            return 0;
          }};
}

}  // namespace attnlab::cli
