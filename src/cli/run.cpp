// attnlab run [SCENARIO] [flags] [--json]: the full trace (JSON) or a short summary.
#include <fmt/format.h>

#include <cmath>

#include "attnlab/core/error.hpp"
#include "attnlab/report/explain.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/report/trace_json.hpp"
#include "common.hpp"

namespace attnlab::cli {

Command run_command(CLI::App& parent) {
  struct State {
    ScenarioFlags flags;
    bool json = false;
    std::string kernel = "reference";
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand("run", "Compute attention for a scenario and print the trace");
  add_scenario_flags(*app, state->flags);
  app->add_flag("--json", state->json, "Print the full trace as JSON (every intermediate, full precision)");
  app->add_option("--kernel", state->kernel,
                  "reference (every intermediate) or tiled (the fast kernel: outputs only, compared with the reference)")
      ->capture_default_str();
  return {app, [state]() {
            const Experiment experiment = load_experiment(state->flags);
            if (state->kernel == "tiled") {
              if (!experiment.interventions.empty())
                throw InputError("--kernel tiled: interventions run on the reference kernel, which keeps the weights they "
                                 "change; drop --kernel tiled");
              const Scenario& scenario = experiment.baseline;
              const AttentionInput input = attention_input(scenario);
              Trace trace = attend_tiled(input);
              trace.tokens = scenario.tokens;
              trace.source_tokens = scenario.source ? scenario.source->tokens : scenario.tokens;
              if (state->json) {
                nlohmann::json reply = trace_to_json(scenario, trace);
                reply["kernel"] = "tiled";
                fmt::print("{}\n", reply.dump());
                return 0;
              }
              const Trace reference = attend(input);
              double largest = 0;
              for (std::size_t k = 0; k < trace.output.data.size(); ++k)
                largest = std::max(largest, std::abs(trace.output.data[k] - reference.output.data[k]));
              fmt::print("output (tiled kernel, {}; no score grid is built)\n", to_string(best_isa()));
              for (std::size_t i = 0; i < trace.tokens.size(); ++i)
                fmt::print("  {:>3} {:<12} {}\n", i, trace.tokens[i], format_vector(trace.output.row(i), 3));
              fmt::print("largest |tiled - reference| = {:.2g}\n", largest);
              return 0;
            }
            if (state->kernel != "reference")
              throw InputError(fmt::format("--kernel: \"{}\" is not a kernel; use reference or tiled", state->kernel));
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
