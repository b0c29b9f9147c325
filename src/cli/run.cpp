// attnlab run [SCENARIO] [flags] [--json]: the full trace (JSON) or a short summary.
#include <fmt/format.h>

#include "attnlab/explain.hpp"
#include "attnlab/interventions.hpp"
#include "attnlab/trace_json.hpp"
#include "common.hpp"

namespace attnlab::cli {

Command run_command(CLI::App& parent) {
  struct State {
    ScenarioFlags flags;
    bool json = false;
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand("run", "Compute attention for a scenario and print the trace");
  add_scenario_flags(*app, state->flags);
  app->add_flag("--json", state->json, "Print the full trace as JSON (every intermediate, full precision)");
  return {app, [state]() {
            const Experiment experiment = load_experiment(state->flags);
            std::optional<InterventionResult> intervention;
            if (!experiment.interventions.empty()) intervention = intervene(experiment.baseline, experiment.interventions);
            const Scenario& scenario = intervention ? intervention->after_scenario : experiment.baseline;
            const Trace trace = intervention ? intervention->after : run_scenario(scenario);
            if (state->json) {
              nlohmann::json reply = trace_to_json(scenario, trace);
              reply["intervention"] = intervention ? intervention_to_json(*intervention) : nlohmann::json(nullptr);
              fmt::print("{}\n", reply.dump());
              return 0;
            }
            for (std::size_t h = 0; h < trace.heads.size(); ++h) {
              fmt::print("head {} \"{}\" weights (rows: queries, columns: keys)\n", h, trace.heads[h].name);
              for (std::size_t i = 0; i < trace.tokens.size(); ++i)
                fmt::print("  {:>3} {:<12} {}\n", i, trace.tokens[i], format_vector(trace.heads[h].weights.row(i), 3));
            }
            fmt::print("output\n");
            for (std::size_t i = 0; i < trace.tokens.size(); ++i)
              fmt::print("  {:>3} {:<12} {}\n", i, trace.tokens[i], format_vector(trace.output.row(i), 3));
            if (intervention) fmt::print("\n{}", format_intervention(*intervention, 3));
            return 0;
          }};
}

}  // namespace attnlab::cli
