// attnlab explain [SCENARIO] [flags]: every intermediate, one query worked in full.
#include <fmt/format.h>

#include "attnlab/error.hpp"
#include "attnlab/explain.hpp"
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
      "explain", "Compute attention for a scenario and write out every step, the way seed 000 does by hand");
  add_scenario_flags(*app, state->flags);
  app->add_option("--head", state->head, "Which head's steps to show (0-based)")->capture_default_str();
  state->precision_flag = app->add_option("--precision", state->precision,
                                          "Decimals to show (default 2, or the scenario's own)");
  return {app, [state]() {
            const Scenario scenario = load_with_flags(state->flags);
            if (state->head >= scenario.heads.size())
              throw InputError(fmt::format("--head: head {} does not exist; {} has heads 0 to {}", state->head,
                                           scenario.name, scenario.heads.size() - 1));
            const int precision = *state->precision_flag ? state->precision : scenario.precision;
            if (precision < 0 || precision > 12)
              throw InputError(fmt::format("--precision: must be 0 to 12 but is {}", precision));
            if (!state->flags.permute.empty()) {
              const auto order = parse_permutation(state->flags.permute, scenario.n());
              fmt::print("{}", explain_permutation(scenario, order, precision));
              return 0;
            }
            const Trace trace = run_scenario(scenario);
            fmt::print("{}", explain(scenario, trace, {state->head, std::nullopt, precision}));
            return 0;
          }};
}

}  // namespace attnlab::cli
