// Pieces every attnlab subcommand shares: the scenario flags and how a subcommand is
// registered. Subcommands parse flags, call one library function, and print.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnlab/analysis/experiment.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab::cli {

// A model as every command takes it: a folder (config.json, model.safetensors or its shards,
// and the tokenizer's files), a GGUF file, or ollama:NAME[:TAG]. Refuses what is none of them.
extern const CLI::Validator kModelPath;
// The help line that says so.
inline constexpr const char* kModelPathHelp =
    "The model: a folder (config.json, model.safetensors or its shards, and tokenizer.json or vocab.json + "
    "merges.txt), a .gguf file (llama.cpp, LM Studio), or ollama:NAME[:TAG] (a model in Ollama's local store)";

// A registered subcommand: its CLI11 app and what to run when it was chosen. run()
// returns the exit code; it may throw InputError (exit 2).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Flags that choose a scenario and override it (explain, run, and later probe, serve).
struct ScenarioFlags {
  std::string scenario{kDefaultScenario};
  bool causal = false, no_causal = false;
  double temperature = 1.0;
  std::size_t window = 0;
  std::vector<std::size_t> mask_tokens;
  std::size_t query = 0;
  std::string permute;
  std::vector<std::string> ablate_heads;        // "H[:zero|mean|uniform]"
  std::vector<std::string> scale_heads;         // "H:F"
  std::vector<std::string> replace_tokens;      // "J:WORD"
  std::vector<std::string> replace_embeddings;  // "J:x1,x2,..."
  CLI::Option* temperature_flag = nullptr;
  CLI::Option* window_flag = nullptr;
  CLI::Option* query_flag = nullptr;
};

void add_scenario_flags(CLI::App& app, ScenarioFlags& flags);

// Loads the chosen scenario and applies the flags (permutation excluded).
Scenario load_with_flags(const ScenarioFlags& flags);

// The experiment the flags describe (attnlab/analysis/experiment.hpp): the scenario as the
// flags set it up (causal, temperature, window, query) and the interventions they ask for
// (--mask-token, --ablate-head, --scale-head, --replace-token, --replace-embedding,
// --permute), run through run_experiment() like the API's requests.
Experiment load_experiment(const ScenarioFlags& flags);

// A long run's progress on stderr, when it is a terminal: "label: 40% (1,234 of 3,085 steps),
// 12 s left", redrawn at most 5 times a second and ended with a newline at the last step;
// `also` (where given) adds a count of its own after the steps: ", 2 of 9 documents".
std::function<void(double done, double total)> progress_line(std::string label, std::string unit,
                                                             std::function<std::string()> also = {});

Command explain_command(CLI::App& parent);
Command run_command(CLI::App& parent);
Command scenarios_command(CLI::App& parent);
Command serve_command(CLI::App& parent);
Command bench_command(CLI::App& parent);
Command probe_command(CLI::App& parent);
Command cost_command(CLI::App& parent);
Command kv_command(CLI::App& parent);
Command model_command(CLI::App& parent);
Command train_command(CLI::App& parent);
Command operations_command(CLI::App& parent);

}  // namespace attnlab::cli
