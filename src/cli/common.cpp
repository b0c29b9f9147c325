// The scenario flags shared by explain and run.
#include "common.hpp"

#include <fmt/format.h>

#include "attnlab/error.hpp"

namespace attnlab::cli {

void add_scenario_flags(CLI::App& app, ScenarioFlags& flags) {
  app.add_option("scenario", flags.scenario,
                 "A bundled scenario name (see `attnlab scenarios`) or a path to a scenario .json file")
      ->capture_default_str();
  app.add_flag("--causal", flags.causal, "Causal mask: query i sees only keys j <= i");
  app.add_flag("--no-causal", flags.no_causal, "No causal mask, whatever the scenario says");
  flags.temperature_flag = app.add_option("--temperature,-T", flags.temperature,
                                          "Attention temperature T > 0: logits = scaled scores / T");
  flags.window_flag = app.add_option("--window", flags.window,
                                     "Sliding window w: query i sees keys with |i - j| < w (0 removes a window)");
  app.add_option("--mask-token", flags.mask_tokens, "Hide key token J from every query (repeatable)")
      ->allow_extra_args(false);
  flags.query_flag = app.add_option("--query,-q", flags.query, "The query token (0-based) to work in full");
  app.add_option("--permute", flags.permute,
                 "Reorder the tokens: the new order as old 0-based indices, e.g. 2,0,1");
}

Scenario load_with_flags(const ScenarioFlags& flags) {
  if (flags.causal && flags.no_causal)
    throw InputError("--causal and --no-causal contradict each other; give one of them");
  Scenario scenario = load_scenario(flags.scenario);
  Overrides o;
  if (flags.causal) o.causal = true;
  if (flags.no_causal) o.causal = false;
  if (*flags.temperature_flag) o.temperature = flags.temperature;
  if (*flags.window_flag) o.window = flags.window;
  o.mask_tokens = flags.mask_tokens;
  if (*flags.query_flag) o.query = flags.query;
  try {
    apply_overrides(scenario, o);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} (after applying the command-line flags to {})", e.what(), flags.scenario));
  }
  return scenario;
}

}  // namespace attnlab::cli
