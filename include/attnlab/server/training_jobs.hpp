// Training runs in the lab (docs/api.md, "Training"; docs/training.md): a run started from
// the page trains on a background thread of the server, one at a time, into a new
// directory under --runs (written by run_training, exactly as `attnlab train --out` writes),
// while the page follows its log, cancels it, and opens the result as a model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/model/train_run.hpp"

namespace attnlab {

class ModelSources;  // attnlab/server/model_sources.hpp

// A request the server cannot take now (a run is already training, or none is to cancel):
// the server answers 409 with {"error", "field"}.
class ConflictError : public InputError {
 public:
  using InputError::InputError;
};

// The written limits on a run started from the lab (the command's are kTrainLimits,
// model/train_run.hpp). A run is also priced before it starts: about 6 × parameters × steps ×
// batch × context FLOPs, and the bytes of its checkpoints.
inline constexpr TrainLimits kLabTrainLimits{.max_layers = 4,
                                             .max_heads = 8,
                                             .min_d_model = 4,
                                             .max_d_model = 128,
                                             .min_context = 12,
                                             .max_context = 128,
                                             .min_vocab = 8,
                                             .max_vocab = 1024,
                                             .max_steps = 20000,
                                             .max_batch = 64,
                                             .max_warmup = 20000,
                                             .min_lr = 1e-6,
                                             .max_lr = 1.0,
                                             .max_seed = std::uint64_t{1} << 53,  // exact in JavaScript
                                             .max_logs = 1000,
                                             .max_checkpoints = 100,  // entries of train.json, checkpoints/step-N
                                             .max_flops = 2e12,       // a few minutes on this project's machine
                                             .max_checkpoint_bytes = std::uint64_t{256} << 20,
                                             .hint = "(the lab's limit; `attnlab train` has wider ones)"};

// The settings a POST /api/training/start body asks for ({"layers", "heads", "d_model",
// "context", "vocab", "steps", "batch", "lr", "warmup", "seed", "attn_only", "log_every",
// "checkpoint_every"}, each optional, TrainSettings' defaults otherwise), checked against
// kLabTrainLimits; InputError naming the field.
TrainSettings requested_train_settings(const nlohmann::json& request);

// kLabTrainLimits as JSON, for GET /api/training/job.
nlohmann::json training_limits_json();

class TrainingJobs {
 public:
  // Runs go under models.runs_dir() (created when the first run starts); `models` must
  // outlive this.
  explicit TrainingJobs(const ModelSources& models);
  // Cancels a run still training and waits for it to write its last checkpoint.
  ~TrainingJobs();
  TrainingJobs(const TrainingJobs&) = delete;
  TrainingJobs& operator=(const TrainingJobs&) = delete;

  // POST /api/training/start: {"run", "dir", "state": "running", "settings"}. InputError for
  // bad settings, ConflictError while another run trains, WorkCancelled after shut_down().
  nlohmann::json start(const nlohmann::json& request);
  // POST /api/training/cancel: the running run stops at its next step, keeping a checkpoint
  // of that step and its final model. {"run", "state": "running", "cancelling": true};
  // ConflictError when no run is training.
  nlohmann::json cancel(const nlohmann::json& request);
  // GET /api/training/job: {"job": null | {"run", "dir", "state", "step", "steps",
  // "log_count", "error"}, "busy", "runs_dir", "limits", "defaults"}.
  nlohmann::json job() const;
  // GET /api/training?run=NAME&since=K: a training run's settings, its log from entry K on,
  // its checkpoints' steps and its state (docs/api.md). Without "run": the --model
  // directory ({"training": false} when it is not a training run). `query` holds the query
  // string's parameters as strings.
  nlohmann::json view(const nlohmann::json& query) const;

  // Cancels a run still training, waits for it to write the checkpoint of the step it
  // stopped at and its final model, and refuses every later start (WorkCancelled): the
  // server is stopping. Calling it again does nothing more.
  void shut_down();

  // Waits until no run is training (tests).
  void wait() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab
