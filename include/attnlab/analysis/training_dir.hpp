// A training run's directory: what `attnlab train --out DIR` and a run started from the
// lab (POST /api/training/start) write, through the one function below, and how it is read
// back (the lab's training views, a checkpoint of a run as a model).
//
//   DIR/train.json               {"settings": {...}, "log": [{step, seconds, loss, loss_first_half,
//                                 loss_second_half, heads: [{layer, head, previous_token,
//                                 duplicate_token, induction}]}]}, rewritten after every log
//   DIR/checkpoints/step-N/      config.json + model.safetensors (a GPT-2 checkpoint) at every
//                                logged step that is a multiple of checkpoint_every, and at the
//                                last step (the end, or where the run was stopped)
//   DIR/config.json, DIR/model.safetensors   the final model, written last
//   DIR/vocab.json, DIR/merges.txt            a text run's tokenizer (also in each checkpoint)
//
// Every file appears whole: each is written under a temporary name and renamed, so a reader
// (the server, while its own run trains) sees the old file or the new one, never half.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/model/model.hpp"
#include "attnlab/model/train_run.hpp"

namespace attnlab {

// The settings as train.json writes them: {"task" ("induction" or "text"), "layers",
// "heads", "d_model", "context", "vocab", "steps", "batch", "lr", "warmup", "seed",
// "attn_only", "log_every", "checkpoint_every"}, and for a text "text_file", "tokenizer"
// ("bytes" or "gpt2") and "text_tokens".
nlohmann::json train_settings_json(const TrainSettings& settings);

// One log entry as train.json writes it: {"step", "seconds", "loss", "loss_held_out", "loss_first_half",
// "loss_second_half", "heads": [{"layer", "head", "previous_token", "duplicate_token",
// "induction"}]}.
nlohmann::json train_log_json(const TrainLog& log);

struct TrainingOutcome {
  Model model;                           // the model at the last step (also DIR's final model)
  std::size_t last_step = 0;             // the step the run ended at
  bool stopped = false;                  // stop() ended it before settings.steps
  std::vector<std::size_t> checkpoints;  // the steps of DIR/checkpoints/step-N written, ascending
};

// Trains with train_model and writes `out` as above (creating it; checkpoints/step-N
// left in it by an earlier run are removed first, so that every checkpoint is this run's).
// on_log is called after each log entry is written to train.json; stop() as
// train_model's: the run then ends at the next step, with a checkpoint of that step and
// the final model written. Whether a non-empty `out` may be used is the caller's decision.
TrainingOutcome run_training(const TrainSettings& settings, const std::filesystem::path& out,
                             const std::function<void(const TrainLog&)>& on_log = {},
                             const std::function<bool()>& stop = {});

// ---- reading a run back ------------------------------------------------------------------

// True when `dir` holds a train.json (a training run, finished or not).
bool is_training_run(const std::filesystem::path& dir);

// The steps of the complete checkpoints in dir/checkpoints (step-N holding config.json and
// model.safetensors), ascending; empty when there are none.
std::vector<std::size_t> checkpoint_steps(const std::filesystem::path& dir);

// dir/checkpoints/step-N.
std::filesystem::path checkpoint_dir(const std::filesystem::path& dir, std::size_t step);

// True when dir holds the final model (config.json and model.safetensors).
bool has_final_model(const std::filesystem::path& dir);

// The largest train.json read_train_json reads (a run of the lab's limits writes a few MB).
inline constexpr std::uintmax_t kMaxTrainJsonBytes = std::uintmax_t{64} << 20;

// dir/train.json parsed and checked for its shape ({"settings": object, "log": list of
// objects with a whole "step"}); InputError naming the file when it is missing, too large,
// not JSON or not that shape.
nlohmann::json read_train_json(const std::filesystem::path& dir);

}  // namespace attnlab
