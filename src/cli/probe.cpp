// attnlab probe [SCENARIO] [flags] [--json]: for one query, the attention weights beside
// the measures that test what its output depends on (erasure, gradient × input), their
// rank agreement, Serrano & Smith's flip test and Jain & Wallace's counterfactual.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnlab/analysis/probe.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/report/trace_json.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "common.hpp"

namespace attnlab::cli {

Command probe_command(CLI::App& parent) {
  struct State {
    ScenarioFlags flags;
    std::string readout;
    std::size_t head = 0;
    double epsilon = 0.01;
    int precision = 2;
    bool json = false;
    CLI::Option* precision_flag = nullptr;
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand(
      "probe",
      "What drove this output? Weights beside erasure, gradient × input, and a counterfactual (docs/interventions.md)");
  add_scenario_flags(*app, state->flags);
  app->add_option("--readout", state->readout,
                  "What to read off the query's output: norm, coordinate:C, direction:u1,u2,..., class or class:LABEL "
                  "(default: class when the scenario has a readout, else norm)");
  app->add_option("--head", state->head, "The head whose weights the counterfactual replaces (0-based)")
      ->capture_default_str();
  app->add_option("--epsilon", state->epsilon, "How far the counterfactual's readout may move: |Δ readout| <= epsilon")
      ->capture_default_str();
  state->precision_flag =
      app->add_option("--precision", state->precision, "Decimals to show (default 2, or the scenario's own)");
  app->add_flag("--json", state->json, "Print the probe as JSON (full precision; the same as POST /api/probe)");
  return {app, [state]() {
            const ExperimentResult experiment = run_experiment(load_experiment(state->flags));
            const std::optional<InterventionResult>& intervention = experiment.intervention;
            const Scenario& scenario = experiment.scenario;
            const int precision = *state->precision_flag ? state->precision : scenario.precision;
            if (precision < 0 || precision > 12)
              fail("--precision", fmt::format("must be 0 to 12 but is {}", precision));
            ProbeOptions options;
            options.readout = state->readout;
            options.head = state->head;
            options.epsilon = state->epsilon;
            ProbeResult result;
            try {
              result = probe(scenario, options);
            } catch (const InputError& e) {  // the field "readout" is the flag --readout here
              for (const char* field : {"readout", "head", "epsilon", "query"})
                if (e.field() == field) throw e.renamed(fmt::format("--{}", field));
              throw;
            }
            if (state->json) {
              nlohmann::json reply = probe_to_json(result);
              reply["intervention"] = intervention ? intervention_to_json(*intervention) : nlohmann::json(nullptr);
              fmt::print("{}\n", reply.dump());
              return 0;
            }
            if (intervention) fmt::print("{}\n", format_intervention(*intervention, precision));
            fmt::print("{}", format_probe(result, precision));
            return 0;
          }};
}

}  // namespace attnlab::cli
