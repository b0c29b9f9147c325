// Training runs started from the lab, on a background thread, one at a time
// (attnlab/server/training_jobs.hpp). The directory is written by run_training, the same
// function `attnlab train` calls; the log is also kept here, so that following a run does
// not read its train.json again at every poll.
#include "attnlab/server/training_jobs.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "admission.hpp"
#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/training.hpp"
#include "attnlab/operations/train.hpp"
#include "attnlab/server/model_sources.hpp"

namespace attnlab {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr const TrainLimits& L = kLabTrainLimits;

namespace {

// "run-N", N one more than the largest there, created (and so taken) here.
std::pair<std::string, fs::path> new_run_dir(const fs::path& runs) {
  fs::create_directories(runs);
  std::size_t largest = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(runs)) {
    const std::string name = entry.path().filename().string();
    std::size_t n = 0;
    if (name.starts_with("run-") &&
        std::from_chars(name.data() + 4, name.data() + name.size(), n).ptr == name.data() + name.size())
      largest = std::max(largest, n);
  }
  for (std::size_t n = largest + 1;; ++n) {
    const std::string name = fmt::format("run-{}", n);
    if (fs::create_directory(runs / name)) return {name, runs / name};
  }
}

// The state of a run directory nobody here is training: "done" when its log reached its
// steps, "stopped" when it ended earlier with its final model written, "incomplete" when
// it has no final model (still training in another process, or killed).
std::string state_of(const fs::path& dir, const json& doc) {
  const json& log = doc["log"];
  const json& steps = doc["settings"].contains("steps") ? doc["settings"]["steps"] : json(nullptr);
  const bool finished = has_final_model(dir);
  if (finished && !log.empty() && steps.is_number_unsigned() && log.back()["step"] == steps) return "done";
  return finished ? "stopped" : "incomplete";
}

// The reply's log: entries since..end, refusing a cursor past the end.
json log_since(const std::vector<json>& log, std::size_t since) {
  if (since > log.size())
    fail("since", fmt::format("{} is past the log's {} entries; ask from 0 to {}", since, log.size(), log.size()));
  return json(std::vector<json>(log.begin() + static_cast<std::ptrdiff_t>(since), log.end()));
}

}  // namespace

TrainSettings requested_train_settings(const json& request) {
  // The train operation's request (operations/train.hpp), held to the lab's limits.
  const TrainSettings s = read_request<TrainRequest>(request, kHttpApi).train_settings();
  check_train_settings(s, &L);  // each setting within the lab's limits, the shape, the work, the memory
  return s;
}

json training_limits_json() {
  return {{"layers", {1, L.max_layers}},
          {"heads", {1, L.max_heads}},
          {"kv_heads", {1, L.max_heads}},
          {"d_model", {L.min_d_model, L.max_d_model}},
          {"context", {L.min_context, L.max_context}},
          {"vocab", {L.min_vocab, L.max_vocab}},
          {"steps", {1, L.max_steps}},
          {"prev_token_steps", {0, L.max_steps}},
          {"batch", {1, L.max_batch}},
          {"warmup", {0, L.max_warmup}},
          {"seed", {0, L.max_seed}},
          {"lr", {0, 1}},
          {"log_entries", L.max_logs + 1},
          {"checkpoints", L.max_checkpoints + 1},
          {"flops", L.max_flops},
          {"checkpoint_bytes", L.max_checkpoint_bytes}};
}

// One run started here.
struct Job {
  std::string run;
  fs::path dir;
  TrainSettings settings;
  std::string state = "running";  // running, done, cancelled, failed
  std::string error;
  std::vector<json> log;
  std::atomic<bool> cancel{false};
};

struct TrainingJobs::Impl {
  const ModelSources& models;
  mutable std::mutex mutex;
  mutable std::condition_variable ended;
  std::shared_ptr<Job> job;  // the last run started, null before the first
  std::thread thread;
  bool shut = false;  // shut_down() was called: no run starts any more
};

TrainingJobs::TrainingJobs(const ModelSources& models) : impl_(new Impl{models, {}, {}, nullptr, {}}) {}

TrainingJobs::~TrainingJobs() { shut_down(); }

void TrainingJobs::shut_down() {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->shut = true;
  if (impl_->job) impl_->job->cancel = true;
  std::thread thread = std::move(impl_->thread);
  lock.unlock();
  if (thread.joinable()) thread.join();
}

json TrainingJobs::start(const json& request) {
  const TrainSettings settings = requested_train_settings(request);
  std::unique_lock<std::mutex> lock(impl_->mutex);
  if (impl_->shut) throw WorkCancelled("the server is shutting down");
  if (impl_->job && impl_->job->state == "running")
    throw ConflictError("", fmt::format("{} is training (step {} of {}); one run trains at a time: cancel it (POST "
                                        "/api/training/cancel) or wait for it",
                                        impl_->job->run,
                                        impl_->job->log.empty() ? 0 : impl_->job->log.back()["step"].get<std::size_t>(),
                                        impl_->job->settings.steps));
  if (impl_->thread.joinable()) impl_->thread.join();             // the last run's thread, finished
  std::shared_ptr<SlotClaim> slot = claim_slot_for_background();  // the run's share of the cores
  auto job = std::make_shared<Job>();
  std::tie(job->run, job->dir) = new_run_dir(impl_->models.runs_dir());
  job->settings = settings;
  impl_->job = job;
  impl_->thread = std::thread([this, job, slot = std::move(slot)]() mutable {
    std::string state = "done", error;
    std::optional<ThreadBudget> budget;
    if (slot) budget.emplace(slot->threads());
    try {
      const TrainingOutcome outcome = run_training(
          job->settings, job->dir,
          [&](const TrainLog& log) {
            json entry = train_log_json(log);
            const std::lock_guard<std::mutex> lock(impl_->mutex);
            job->log.push_back(std::move(entry));
          },
          [&] { return job->cancel.load(); });
      if (outcome.stopped) state = "cancelled";
    } catch (const std::exception& e) {
      state = "failed";
      error = e.what();
    }
    budget.reset(), slot.reset();  // the slot is free before the job says it has ended
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    job->state = state;
    job->error = error;
    impl_->ended.notify_all();
  });
  return {{"run", job->run},
          {"dir", fs::absolute(job->dir).lexically_normal().string()},
          {"state", "running"},
          {"settings", train_settings_json(settings)}};
}

json TrainingJobs::cancel(const json& request) {
  if (!request.is_null() && !request.is_object()) fail("body", "expected nothing, {} or {\"run\": NAME}");
  if (request.is_object()) refuse_unknown_fields(request, {"run"});
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  const std::shared_ptr<Job>& job = impl_->job;
  if (!job || job->state != "running")
    throw ConflictError("", "no training run is running here to cancel; GET /api/training/job says what ran last");
  if (request.is_object() && request.contains("run") && request["run"] != job->run)
    throw ConflictError("run", fmt::format("{} is not the run training here ({} is); cancel that one, or wait",
                                           describe_json(request["run"]), job->run));
  job->cancel = true;
  return {{"run", job->run}, {"state", job->state}, {"cancelling", true}};
}

json TrainingJobs::job() const {
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  json j = nullptr;
  if (const std::shared_ptr<Job>& job = impl_->job)
    j = {{"run", job->run},
         {"dir", fs::absolute(job->dir).lexically_normal().string()},
         {"state", job->state},
         {"step", job->log.empty() ? json(nullptr) : job->log.back()["step"]},
         {"steps", job->settings.steps},
         {"log_count", job->log.size()},
         {"cancelling", job->state == "running" && job->cancel.load()},
         {"error", job->error.empty() ? json(nullptr) : json(job->error)}};
  return {{"job", j},
          {"busy", impl_->job && impl_->job->state == "running"},
          {"runs_dir", fs::absolute(impl_->models.runs_dir()).lexically_normal().string()},
          {"limits", training_limits_json()},
          {"defaults", train_settings_json(TrainSettings{})}};
}

json TrainingJobs::view(const json& query) const {
  refuse_unknown_fields(query, {"run", "since"});
  std::size_t since = 0;
  if (query.contains("since")) {
    const std::string text = query["since"].get<std::string>();
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), since);
    if (text.empty() || error != std::errc() || end != text.data() + text.size())
      fail("since", fmt::format("\"{}\" is not a log index; give a whole number, e.g. since=0", text.substr(0, 20)));
  }
  ModelChoice choice;
  if (query.contains("run")) choice = ModelSources::choice({{"run", query["run"]}}, "");
  if (!choice.run && !impl_->models.base()) return {{"training", false}, {"run", nullptr}};
  // The run training here: its log as kept, its state as known.
  if (choice.run) {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    if (const std::shared_ptr<Job> job = impl_->job; job && job->run == *choice.run) {
      json reply = {{"training", true},
                    {"run", job->run},
                    {"name", job->run},
                    {"state", job->state},
                    {"cancelling", job->state == "running" && job->cancel.load()},
                    {"settings", train_settings_json(job->settings)},
                    {"log", log_since(job->log, since)},
                    {"since", since},
                    {"log_count", job->log.size()},
                    {"error", job->error.empty() ? json(nullptr) : json(job->error)}};
      lock.unlock();
      reply["checkpoints"] = checkpoint_steps(job->dir);
      reply["final"] = has_final_model(job->dir);
      return reply;
    }
  }
  const fs::path dir = impl_->models.run_dir(choice, "");
  const fs::path normal = dir.lexically_normal();
  const std::string name =
      choice.run ? *choice.run : (normal.has_filename() ? normal : normal.parent_path()).filename().string();
  if (!is_training_run(dir)) return {{"training", false}, {"run", nullptr}, {"name", name}};
  const json doc = read_train_json(dir);
  const std::vector<json> log = doc["log"];
  return {{"training", true},
          {"run", choice.run ? json(*choice.run) : json(nullptr)},
          {"name", name},
          {"state", state_of(dir, doc)},
          {"cancelling", false},
          {"settings", doc["settings"]},
          {"log", log_since(log, since)},
          {"since", since},
          {"log_count", log.size()},
          {"error", nullptr},
          {"checkpoints", checkpoint_steps(dir)},
          {"final", has_final_model(dir)}};
}

void TrainingJobs::wait() const {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->ended.wait(lock, [&] { return !impl_->job || impl_->job->state != "running"; });
}

}  // namespace attnlab
