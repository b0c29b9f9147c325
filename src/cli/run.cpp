// attnlab run [SCENARIO] [flags] [--json]: the full trace (JSON) or a short summary.
#include <fmt/format.h>

#include <cmath>

#include "attnlab/analysis/experiment.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/report/explain.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/report/trace_json.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "common.hpp"

namespace attnlab::cli {

namespace {

// One line per token: its index, its name and the row of `m`, at 3 decimals.
void print_rows(const std::vector<std::string>& tokens, const Matrix& m) {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    fmt::print("  {:>3} {:<12} {}\n", i, tokens[i], format_vector(m.row(i), 3));
}

// The tiled kernel's outputs, and how far they are from the reference's on the same input.
void print_tiled_outputs(const ExperimentResult& result) {
  const Trace reference = attend(attention_input(result.scenario));
  double largest = 0;
  for (std::size_t k = 0; k < result.trace.output.data.size(); ++k)
    largest = std::max(largest, std::abs(result.trace.output.data[k] - reference.output.data[k]));
  fmt::print("output (tiled kernel, {}; no score grid is built)\n", to_string(best_isa()));
  print_rows(result.trace.tokens, result.trace.output);
  fmt::print("largest |tiled - reference| = {:.2g}\n", largest);
}

}  // namespace

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
  app->add_option(
         "--kernel", state->kernel,
         "reference (every intermediate) or tiled (the fast kernel: outputs only, compared with the reference)")
      ->capture_default_str();
  return {app, [state]() {
            Experiment experiment = load_experiment(state->flags);
            experiment.kernel = kernel_named(state->kernel, "--kernel");
            ExperimentResult result;
            try {
              result = run_experiment(experiment);
            } catch (const InputError& e) {  // the request's "kernel" is the flag here
              if (e.field() == "kernel") throw e.renamed("--kernel " + state->kernel);
              throw;
            }
            const Trace& trace = result.trace;
            if (state->json) {
              nlohmann::json reply = trace_to_json(result.scenario, trace);
              reply["kernel"] = std::string(to_string(result.kernel));
              if (result.kernel == KernelKind::reference)
                reply["intervention"] =
                    result.intervention ? intervention_to_json(*result.intervention) : nlohmann::json(nullptr);
              fmt::print("{}\n", reply.dump());
              return 0;
            }
            if (result.kernel == KernelKind::tiled) {
              print_tiled_outputs(result);
              return 0;
            }
            for (std::size_t h = 0; h < trace.heads.size(); ++h) {
              fmt::print("head {} \"{}\" weights (rows: queries, columns: keys)\n", h, trace.heads[h].name);
              print_rows(trace.tokens, trace.heads[h].weights);
            }
            fmt::print("output\n");
            print_rows(trace.tokens, trace.output);
            if (result.intervention) fmt::print("\n{}", format_intervention(*result.intervention, 3));
            return 0;
          }};
}

}  // namespace attnlab::cli
