// The models the server can run: the --model directory, runs under --runs, and their
// checkpoints (attnlab/server/model_sources.hpp).
#include "attnlab/server/model_sources.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <list>
#include <mutex>

#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/model_dir.hpp"

namespace attnlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kNoModel =
    "no model is loaded; start the server with --model DIR (docs/models.md), or name a run with \"run\"";

// "0, 20, 40" (the first and last few when there are many).
std::string step_list(const std::vector<std::size_t>& steps) {
  if (steps.empty()) return "none yet";
  if (steps.size() <= 12) return fmt::format("{}", fmt::join(steps, ", "));
  return fmt::format("{}, …, {} ({} checkpoints)", fmt::join(steps.begin(), steps.begin() + 5, ", "),
                     fmt::join(steps.end() - 5, steps.end(), ", "), steps.size());
}

}  // namespace

bool is_run_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

struct ModelSources::Impl {
  std::shared_ptr<const ModelDir> base;
  fs::path runs_dir;
  mutable std::mutex mutex;
  // Loaded models by directory, most recently used first.
  mutable std::list<std::pair<std::string, std::shared_ptr<const ModelDir>>> loaded;
};

ModelSources::ModelSources() : impl_(std::make_unique<Impl>()) { impl_->runs_dir = "attnlab-runs"; }

ModelSources::ModelSources(const ModelDir* model) : ModelSources() {
  // Not owned: an aliasing pointer with no control block.
  if (model) impl_->base = std::shared_ptr<const ModelDir>(std::shared_ptr<const ModelDir>(), model);
}

ModelSources::ModelSources(std::shared_ptr<const ModelDir> model, fs::path runs_dir) : ModelSources() {
  impl_->base = std::move(model);
  impl_->runs_dir = std::move(runs_dir);
}

ModelSources::~ModelSources() = default;

const ModelDir* ModelSources::base() const { return impl_->base.get(); }

const fs::path& ModelSources::runs_dir() const { return impl_->runs_dir; }

ModelChoice ModelSources::choice(const json& spec, const std::string& prefix) {
  ModelChoice c;
  if (!spec.is_object()) return c;
  if (spec.contains("run") && !spec["run"].is_null()) {
    const json& run = spec["run"];
    if (!run.is_string() || !is_run_name(run.get<std::string>()))
      fail(prefix + "run",
           fmt::format("{} is not a run's name (1 to 64 letters, digits, '.', '_' or '-', e.g. \"run-1\"); "
                       "GET /api/training/job names the runs started here",
                       describe_json(run)));
    c.run = run.get<std::string>();
  }
  if (spec.contains("step") && !spec["step"].is_null()) {
    c.step = read_count(spec["step"], prefix + "step", {.hint = "(a checkpoint's step)"});
  }
  return c;
}

fs::path ModelSources::run_dir(const ModelChoice& choice, const std::string& prefix) const {
  if (!choice.run) {
    if (!impl_->base) fail("model", kNoModel);
    return impl_->base->dir;
  }
  const fs::path dir = impl_->runs_dir / *choice.run;
  if (!is_training_run(dir))
    fail(prefix + "run", fmt::format("there is no training run \"{}\" under {} (the server's --runs directory)",
                                     *choice.run, impl_->runs_dir.string()));
  return dir;
}

std::shared_ptr<const ModelDir> ModelSources::model(const ModelChoice& choice, const std::string& prefix) const {
  const fs::path dir = run_dir(choice, prefix);
  fs::path load;
  if (choice.step) {
    const std::vector<std::size_t> steps = checkpoint_steps(dir);
    if (!std::binary_search(steps.begin(), steps.end(), *choice.step))
      fail(prefix + "step",
           steps.empty() ? fmt::format("step {}: {} has no checkpoints (it is not a training run, or none is written "
                                       "yet); leave \"step\" out for its model",
                                       *choice.step, dir.filename().string())
                         : fmt::format("step {} is not a checkpoint of {}; its checkpoints are at steps {}",
                                       *choice.step, dir.filename().string(), step_list(steps)));
    load = checkpoint_dir(dir, *choice.step);
  } else {
    if (!choice.run) return impl_->base;  // loaded at start
    if (!has_final_model(dir))
      fail(prefix + "step", fmt::format("{} has no final model yet (it is still training, or it stopped before "
                                        "writing one); give \"step\": one of its checkpoints ({})",
                                        *choice.run, step_list(checkpoint_steps(dir))));
    load = dir;
  }
  const std::string key = load.lexically_normal().string();
  {
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    auto& loaded = impl_->loaded;
    const auto hit = std::find_if(loaded.begin(), loaded.end(), [&](const auto& e) { return e.first == key; });
    if (hit != loaded.end()) {
      loaded.splice(loaded.begin(), loaded, hit);
      return loaded.front().second;
    }
  }
  // A checkpoint holds no tokenizer: it is the run's (the --model directory's, if it has one).
  ModelDir m{load.string(), load_model(load.string()), std::nullopt};
  m.tokenizer = open_tokenizer(dir, m.model.config.vocab_size);
  auto model = std::make_shared<const ModelDir>(std::move(m));
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->loaded.emplace_front(key, model);
  while (impl_->loaded.size() > kKeptCheckpoints)
    impl_->loaded.pop_back();
  return model;
}

}  // namespace attnlab
