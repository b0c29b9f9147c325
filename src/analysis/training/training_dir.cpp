// A training run's directory, written and read back (attnlab/analysis/training_dir.hpp).
#include "attnlab/analysis/training_dir.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>

#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/core/json.hpp"

namespace attnlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Writes `text` to `path` whole (write_file_whole).
void write_whole(const fs::path& path, const std::string& text) {
  write_file_whole(path.string(),
                   [&](std::FILE* f) { return std::fwrite(text.data(), 1, text.size(), f) == text.size(); });
}

// Saves `model` as dir/checkpoints/step-N whole: written to .step-N.partial, then renamed.
// A text run's tokenizer (vocab.json, merges.txt) beside a model, so the directory reads as text.
void save_tokenizer(const fs::path& dir, const TextCorpus* text) {
  if (!text) return;
  write_whole(dir / "vocab.json", text->vocab_json);
  write_whole(dir / "merges.txt", text->merges_txt);
}

void save_checkpoint(const fs::path& dir, std::size_t step, const Model& model, const TextCorpus* text) {
  const fs::path final_dir = checkpoint_dir(dir, step);
  const fs::path partial = dir / "checkpoints" / fmt::format(".step-{}.partial", step);
  fs::remove_all(partial);
  save_model(partial.string(), model);
  save_tokenizer(partial, text);
  fs::remove_all(final_dir);
  fs::rename(partial, final_dir);
}

// Saves the final model as dir/config.json and dir/model.safetensors, each renamed into
// place (the weights first: whoever sees config.json sees the weights that go with it).
void save_final(const fs::path& dir, const Model& model, const TextCorpus* text) {
  const fs::path partial = dir / ".final.partial";
  fs::remove_all(partial);
  save_model(partial.string(), model);
  save_tokenizer(dir, text);
  fs::rename(partial / "model.safetensors", dir / "model.safetensors");
  fs::rename(partial / "config.json", dir / "config.json");
  fs::remove_all(partial);
}

// "step-120" -> 120; nothing for any other name.
std::optional<std::size_t> step_of(const std::string& name) {
  if (!name.starts_with("step-") || name.size() == 5 || name.size() > 5 + 12) return std::nullopt;
  std::size_t step = 0;
  const char* first = name.data() + 5;
  const char* last = name.data() + name.size();
  const auto [end, error] = std::from_chars(first, last, step);
  if (error != std::errc() || end != last || (name[5] == '0' && name.size() > 6)) return std::nullopt;
  return step;
}

}  // namespace

json train_settings_json(const TrainSettings& s) {
  json settings = {{"task", s.text ? "text" : "induction"},
                   {"arch", train_architecture_name(s.architecture)},
                   {"layers", s.layers},
                   {"heads", s.heads},
                   {"kv_heads", training_config(s).kv_heads()},
                   {"d_model", s.d_model},
                   {"context", s.context},
                   {"vocab", s.text ? s.text->vocab : s.vocab},
                   {"steps", s.steps},
                   {"batch", s.batch},
                   {"lr", s.learning_rate},
                   {"warmup", s.warmup},
                   {"seed", s.seed},
                   {"attn_only", s.attention_only},
                   {"bf16", s.bf16},
                   {"attention_init", s.attention_init},
                   {"prev_token_steps", has_prev_token_phase(s) ? s.prev_token_steps : 0},
                   {"log_every", s.log_every},
                   {"checkpoint_every", s.checkpoint_every}};
  if (s.text) {
    settings["text_file"] = s.text->file;
    settings["tokenizer"] = s.text->tokenizer;
    settings["text_tokens"] = s.text->ids.size();
  }
  return settings;
}

json train_log_json(const TrainLog& log) {
  json heads = json::array();
  for (const HeadScores& h : log.heads)
    heads.push_back({{"layer", h.head.layer},
                     {"head", h.head.head},
                     {"previous_token", number_or_null(h.previous_token)},
                     {"duplicate_token", number_or_null(h.duplicate_token)},
                     {"induction", number_or_null(h.induction)}});
  return {{"step", log.step},
          {"seconds", log.seconds},
          {"loss", number_or_null(log.loss)},
          {"loss_held_out", number_or_null(log.loss_held_out)},
          {"loss_first_half", number_or_null(log.loss_first_half)},
          {"loss_second_half", number_or_null(log.loss_second_half)},
          {"heads", heads}};
}

TrainingOutcome run_training(const TrainSettings& s, const fs::path& out,
                             const std::function<void(const TrainLog&)>& on_log, const std::function<bool()>& stop) {
  fs::create_directories(out / "checkpoints");
  for (const std::size_t step : checkpoint_steps(out))  // an earlier run's: not this run's steps
    fs::remove_all(checkpoint_dir(out, step));
  const json settings = train_settings_json(s);
  json logs = json::array();
  TrainingOutcome outcome;
  std::size_t last_logged = 0;
  const auto log_written = [&](const TrainLog& log, const Model& model) {
    logs.push_back(train_log_json(log));
    write_whole(out / "train.json", json{{"settings", settings}, {"log", logs}}.dump(1));
    last_logged = log.step;
    if (log.step % s.checkpoint_every == 0 || log.step == s.steps) {
      save_checkpoint(out, log.step, model, s.text.get());
      outcome.checkpoints.push_back(log.step);
    }
    if (on_log) on_log(log);
  };
  outcome.model = train_model(s, log_written, stop);
  outcome.last_step = last_logged;
  outcome.stopped = last_logged < s.steps;
  // Stopped between checkpoints: the last step is kept as one too.
  if (outcome.checkpoints.empty() || outcome.checkpoints.back() != last_logged) {
    save_checkpoint(out, last_logged, outcome.model, s.text.get());
    outcome.checkpoints.push_back(last_logged);
  }
  save_final(out, outcome.model, s.text.get());
  return outcome;
}

bool is_training_run(const fs::path& dir) {
  std::error_code error;
  return fs::is_regular_file(dir / "train.json", error);
}

std::vector<std::size_t> checkpoint_steps(const fs::path& dir) {
  std::vector<std::size_t> steps;
  std::error_code error;
  const fs::path root = dir / "checkpoints";
  if (!fs::is_directory(root, error)) return steps;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, error)) {
    const std::optional<std::size_t> step = step_of(entry.path().filename().string());
    if (step && has_final_model(entry.path())) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

fs::path checkpoint_dir(const fs::path& dir, std::size_t step) {
  return dir / "checkpoints" / fmt::format("step-{}", step);
}

bool has_final_model(const fs::path& dir) {
  std::error_code error;
  return fs::is_regular_file(dir / "config.json", error) && fs::is_regular_file(dir / "model.safetensors", error);
}

json read_train_json(const fs::path& dir) {
  const fs::path file = dir / "train.json";
  const std::string name = file.string();
  const std::string body = read_file_within(file, kMaxTrainJsonBytes, name,
                                            "a training run's directory holds train.json (attnlab train --out DIR)");
  const json doc = parse_json_document(body, name);
  if (!doc.is_object() || !doc.contains("settings") || !doc["settings"].is_object() || !doc.contains("log") ||
      !doc["log"].is_array())
    fail(name, "is not a train.json: expected {\"settings\": {...}, \"log\": [...]}");
  for (std::size_t k = 0; k < doc["log"].size(); ++k) {
    const json& entry = doc["log"][k];
    if (!entry.is_object() || !entry.contains("step") || !entry["step"].is_number_unsigned())
      fail(name, fmt::format("log[{}] has no whole \"step\"", k));
  }
  return doc;
}

}  // namespace attnlab
