// The scenario flags shared by explain and run.
#include "common.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "attnlab/core/error.hpp"

namespace attnlab::cli {

const CLI::Validator kModelPath(
    [](std::string& value) -> std::string {
      std::error_code error;
      if (value.starts_with("ollama:") || std::filesystem::is_directory(value, error) ||
          std::filesystem::is_regular_file(value, error))
        return "";
      return fmt::format("{} is not a model folder, a .gguf file or ollama:NAME", value);
    },
    "MODEL");

void add_scenario_flags(CLI::App& app, ScenarioFlags& flags) {
  app.add_option("scenario", flags.scenario,
                 "A bundled scenario name (see `attnlab scenarios`) or a path to a scenario .json file")
      ->capture_default_str();
  app.add_flag("--causal", flags.causal, "Causal mask: query i sees only keys j <= i");
  app.add_flag("--no-causal", flags.no_causal, "No causal mask, whatever the scenario says");
  flags.temperature_flag =
      app.add_option("--temperature,-T", flags.temperature, "Attention temperature T > 0: logits = scaled scores / T");
  flags.window_flag = app.add_option("--window", flags.window,
                                     "Sliding window w: query i sees keys with |i - j| < w (0 removes a window)");
  app.add_option("--mask-token", flags.mask_tokens, "Hide key token J from every query (repeatable)")
      ->allow_extra_args(false);
  flags.query_flag = app.add_option("--query,-q", flags.query, "The query token (0-based) to work in full");
  app.add_option("--permute", flags.permute, "Reorder the tokens: the new order as old 0-based indices, e.g. 2,0,1");
  app.add_option("--ablate-head", flags.ablate_heads,
                 "Ablate head H: zero its output (H or H:zero), replace it by its mean output over the tokens "
                 "(H:mean), or give it uniform weights (H:uniform) (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--scale-head", flags.scale_heads, "Multiply head H's output by F, written H:F (repeatable)")
      ->allow_extra_args(false);
  app.add_option(
         "--replace-token", flags.replace_tokens,
         "Replace token J by WORD, written J:WORD (a known token's embedding, else the word table's) (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--replace-embedding", flags.replace_embeddings,
                 "Give token J a new embedding, written J:x1,x2,... (d_model numbers) (repeatable)")
      ->allow_extra_args(false);
}

Experiment load_experiment(const ScenarioFlags& flags) {
  ScenarioFlags settings = flags;
  settings.mask_tokens.clear();  // knock-outs are interventions, reported before and after
  Experiment e{load_with_flags(settings), {}, {}, KernelKind::reference, ""};
  Interventions& iv = e.interventions;
  for (std::size_t j : flags.mask_tokens)
    iv.knock_out.push_back({j, fmt::format("--mask-token {}", j)});
  for (const std::string& text : flags.ablate_heads)
    iv.ablate.push_back(parse_ablate_head(text, "--ablate-head " + text));
  for (const std::string& text : flags.scale_heads)
    iv.scale.push_back(parse_scale_head(text, "--scale-head " + text));
  for (const std::string& text : flags.replace_tokens)
    iv.replace.push_back(parse_replace_token(text, "--replace-token " + text));
  for (const std::string& text : flags.replace_embeddings)
    iv.replace.push_back(parse_replace_embedding(text, "--replace-embedding " + text));
  if (!flags.permute.empty()) iv.permute = parse_permutation(flags.permute, e.scenario.n());
  return e;
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
    throw InputError(e.field(),
                     fmt::format("{} (after applying the command-line flags to {})", e.message(), flags.scenario));
  }
  return scenario;
}

std::function<void(double, double)> progress_line(std::string label, std::string unit,
                                                  std::function<std::string()> also) {
  if (!isatty(fileno(stderr))) return {};
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto last = std::make_shared<Clock::time_point>();
  return [=](double done, double total) {
    const Clock::time_point now = Clock::now();
    const bool finished = done >= total;
    if (!finished && now - *last < std::chrono::milliseconds(200)) return;
    *last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    const std::string left =
        done > 0 && !finished ? fmt::format(", {:.0f} s left", seconds * (total - done) / done) : "";
    fmt::print(stderr, "\r{}: {:.0f}% ({:.0f} of {:.0f} {}{}){}\x1b[K{}", label, 100 * done / std::max(total, 1.0),
               done, total, unit, also ? ", " + also() : "", left, finished ? "\n" : "");
  };
}

}  // namespace attnlab::cli
