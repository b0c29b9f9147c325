// The models the lab's server can run (docs/api.md, "The model" and "Training"): the
// directory `attnlab serve --model DIR` loaded, the training runs under `--runs DIR`, and
// any checkpoint of either (DIR/checkpoints/step-N). A request names one with two optional
// fields beside its text: "run" (a run's name under --runs; without it, the --model
// directory) and "step" (a checkpoint step of that run; without it, its final model).
// Checkpoints are loaded when first asked for and a few are kept.
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace attnlab {

struct ModelDir;  // attnlab/model/model_dir.hpp

// Which model a request names.
struct ModelChoice {
  std::optional<std::string> run;   // a run under --runs; none: the --model directory
  std::optional<std::size_t> step;  // a checkpoint step; none: the final model
};

class ModelSources {
 public:
  // No model: every request for one is refused naming "model".
  ModelSources();
  // One model, not owned (it must outlive this): the API functions' ModelDir* callers.
  explicit ModelSources(const ModelDir* model);
  // `attnlab serve`: the --model directory (or none) and the --runs directory.
  ModelSources(std::shared_ptr<const ModelDir> model, std::filesystem::path runs_dir);
  ~ModelSources();
  ModelSources(const ModelSources&) = delete;
  ModelSources& operator=(const ModelSources&) = delete;

  // The --model directory's model, or null.
  const ModelDir* base() const;
  // Where runs started from the lab are written (docs/api.md): --runs.
  const std::filesystem::path& runs_dir() const;

  // spec["run"] and spec["step"], checked as they are written (errors name prefix + "run" or
  // prefix + "step"); the run's existence and the step's are checked by `model`.
  static ModelChoice choice(const nlohmann::json& spec, const std::string& prefix);

  // The directory a choice's run is: the --model directory, or runs_dir/NAME, which must be
  // a training run there (InputError naming prefix + "run" otherwise; "model" when no
  // --model directory was given and no run is named).
  std::filesystem::path run_dir(const ModelChoice& choice, const std::string& prefix) const;

  // The model a choice names, loaded (or kept from before). InputError naming prefix +
  // "step" for a step that is not one of the run's checkpoints (the message lists them),
  // or when a run has no final model yet and no step is given.
  std::shared_ptr<const ModelDir> model(const ModelChoice& choice, const std::string& prefix) const;

  // The checkpoints kept loaded at most (the least recently used goes first).
  static constexpr std::size_t kKeptCheckpoints = 8;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A run's name under --runs: 1 to 64 of [A-Za-z0-9._-], not starting with a dot.
bool is_run_name(const std::string& name);

}  // namespace attnlab
