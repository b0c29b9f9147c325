// Attribution in the lab: the quick read-outs at once, the verdict and patching as a job
// (attnlab/server/analysis_jobs.hpp).
#include "attnlab/server/analysis_jobs.hpp"

#include <fmt/format.h>

#include <mutex>
#include <optional>
#include <thread>

#include "admission.hpp"
#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/attribution_json.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/server/limits.hpp"
#include "attnlab/server/model_sources.hpp"
#include "model_api.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// One prediction a request names: the model, the tokens, where and which logit.
struct Prediction {
  std::shared_ptr<const ModelDir> model;
  std::vector<int> ids;
  LogitTarget target;
};

int token_id(const json& request, const char* key, const ModelConfig& c) {
  if (!request.contains(key) || request[key].is_null()) return -1;
  return static_cast<int>(read_count(request[key], key, {.low = 0, .high = c.vocab_size - 1}));
}

Prediction prediction(const ModelSources& models, const json& request) {
  Prediction p;
  p.model = models.model(ModelSources::choice(request, ""), "");
  const ModelConfig& c = p.model->model.config;
  p.ids = requested_ids(*p.model, request, "");
  if (request.contains("position") && !request["position"].is_null())
    p.target.position = read_count(request["position"], "position", {.low = 0, .high = p.ids.size() - 1});
  p.target.target = token_id(request, "target", c);
  p.target.contrast = token_id(request, "contrast", c);
  return p;
}

TokenText texts_of(const ModelDir& m) {
  return [&m](int id) { return token_texts(m, {id})[0]; };
}

}  // namespace

json api_model_attribute(const ModelSources& models, const json& request) {
  if (!request.is_object()) fail("body", "expected a JSON object {\"text\": \"...\"} or {\"ids\": [...]}");
  refuse_unknown_fields(request, {"text", "ids", "position", "target", "contrast", "run", "step"});
  const Prediction p = prediction(models, request);
  const ModelConfig& c = p.model->model.config;
  const double n = double(p.ids.size());
  const std::string field = tokens_field(request, "");
  if (double(c.n_layer) * double(c.n_head) * n * n > double(kMaxApiModelWeights) ||
      double(c.n_layer) * double(c.n_head) * n > kMaxApiSourceNumbers)
    fail(field, fmt::format("{} tokens is more than the server attributes for this model ({} layers × {} heads); use "
                            "a shorter text, or `attnlab model attribute`",
                            p.ids.size(), c.n_layer, c.n_head));
  const double lens = double(c.n_layer + 1) * n * double(c.vocab_size) * double(c.n_embd);
  if (lens > kMaxApiLensWork)
    fail(field, fmt::format("the lens over {} tokens is {:.3g} multiply-adds, more than the server's {:.3g}; use a "
                            "shorter text, or `attnlab model lens`",
                            p.ids.size(), lens, kMaxApiLensWork));
  admit_work(3 * forward_work_bytes(c, p.ids.size()));
  const LogitAttribution a = attribute_logit(p.model->model, p.ids, p.target);
  ForwardOptions keep;
  keep.keep_stream = true;
  keep.logits = LogitRows::none;  // the mixing reads the stream alone
  const ContextMixing mixing = context_mixing(p.model->model, model_forward(p.model->model, p.ids, keep), a.position);
  const TokenText token = texts_of(*p.model);
  return {{"ids", p.ids},
          {"tokens", token_texts(*p.model, p.ids)},
          {"attribution", attribution_json(a, c.n_head, token)},
          {"lens", lens_json(logit_lens(p.model->model, p.ids, a.target), token)},
          {"mixing", mixing_json(mixing)}};
}

// ---- the job ----------------------------------------------------------------------------

struct AnalysisJobs::State {
  const ModelSources& models;
  mutable std::mutex mutex;
  std::thread worker;
  std::shared_ptr<CancelToken> cancel;  // the running job's
  bool stopped = false;
  // What view() says.
  std::string state = "idle", kind, stage, error;
  std::size_t id = 0, done = 0, total = 0;
  json result;

  explicit State(const ModelSources& m) : models(m) {}

  // Cancels the running job and waits for it (the lock not held while waiting).
  void stop_worker(std::unique_lock<std::mutex>& lock) {
    if (cancel) cancel->cancel();
    std::thread finishing = std::move(worker);
    lock.unlock();
    if (finishing.joinable()) finishing.join();
    lock.lock();
  }
};

AnalysisJobs::AnalysisJobs(const ModelSources& models) : state_(std::make_shared<State>(models)) {}

AnalysisJobs::~AnalysisJobs() { shut_down(); }

json AnalysisJobs::start(const json& request) {
  if (!request.is_object()) fail("body", "expected a JSON object {\"kind\": \"verdict\" | \"patch\", \"text\": ...}");
  refuse_unknown_fields(request,
                        {"kind", "text", "ids", "position", "target", "contrast", "run", "step", "steps", "corrupt"});
  if (!request.contains("kind") || !request["kind"].is_string() ||
      (request["kind"] != "verdict" && request["kind"] != "patch"))
    fail("kind", "expected \"verdict\" or \"patch\"");
  const std::string kind = request["kind"];
  const Prediction p = prediction(state_->models, request);
  const ModelConfig& c = p.model->model.config;
  const std::size_t n = p.ids.size();
  std::function<json(const Progress&)> work;
  const TokenText token = texts_of(*p.model);
  if (kind == "verdict") {
    if (request.contains("corrupt")) fail("corrupt", "is for \"kind\": \"patch\"");
    VerdictOptions options;
    options.target = p.target;
    if (request.contains("steps")) options.steps = read_count(request["steps"], "steps", {.low = 1, .high = 256});
    const std::size_t cut = p.target.position.value_or(n - 1) + 1;
    const double flops = verdict_flops(c, cut, options.steps);
    if (flops > kMaxApiAnalysisFlops)
      fail(tokens_field(request, ""), fmt::format("the verdict over {} tokens is {:.3g} FLOPs, more than the server's "
                                                  "{:.3g}; use a shorter text, or `attnlab model verdict`",
                                                  cut, flops, kMaxApiAnalysisFlops));
    work = [model = p.model, ids = p.ids, options, token](const Progress& progress) {
      VerdictOptions o = options;
      o.progress = progress;
      const Verdict v = verdict(model->model, ids, o);
      json out = verdict_json(v, token);
      const std::vector<int> cut_ids(ids.begin(), ids.begin() + std::ptrdiff_t(v.n));
      out["ids"] = cut_ids, out["tokens"] = token_texts(*model, cut_ids);
      return out;
    };
  } else {
    if (!request.contains("corrupt") || !request["corrupt"].is_object())
      fail("corrupt", "missing; give the corrupted run as {\"text\": \"...\"} or {\"ids\": [...]}");
    if (request.contains("steps")) fail("steps", "is for \"kind\": \"verdict\"");
    if (p.target.position) fail("position", "patching explains the last position; leave \"position\" out");
    const json& spec = request["corrupt"];
    refuse_unknown_fields(spec, {"text", "ids"}, "corrupt");
    const std::vector<int> corrupt = requested_ids(*p.model, spec, "corrupt.");
    if (corrupt.size() != n)
      fail(tokens_field(spec, "corrupt."), fmt::format("is {} tokens and the clean run {}; patching compares the "
                                                       "same positions, so give runs of the same length in tokens",
                                                       corrupt.size(), n));
    const double flops = patching_flops(c, n);
    if (flops > kMaxApiAnalysisFlops)
      fail(tokens_field(request, ""), fmt::format("patching {} tokens is {:.3g} FLOPs, more than the server's {:.3g}; "
                                                  "use a shorter text, or `attnlab model patch`",
                                                  n, flops, kMaxApiAnalysisFlops));
    work = [model = p.model, clean = p.ids, corrupt, target = p.target, token](const Progress& progress) {
      const ResidualPatching r = patch_residual(model->model, clean, corrupt, target.target, target.contrast, progress);
      json out = patching_json(r, token);
      out["clean"] = {{"ids", clean}, {"tokens", token_texts(*model, clean)}};
      out["corrupt"] = {{"ids", corrupt}, {"tokens", token_texts(*model, corrupt)}};
      return out;
    };
  }
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (state_->stopped) throw WorkCancelled("the server is shutting down");
  // One job at a time: the new one replaces it (and one another start made while this one
  // waited for the old job to stop).
  while (state_->worker.joinable())
    state_->stop_worker(lock);
  std::shared_ptr<SlotClaim> slot = claim_slot_for_background();  // and its share of the cores
  auto cancel = std::make_shared<CancelToken>();
  const std::size_t id = ++state_->id;
  State& s = *state_;
  s.cancel = cancel, s.state = "running", s.kind = kind, s.stage = "", s.error = "", s.done = s.total = 0;
  s.result = nullptr;
  s.worker = std::thread([state = state_, cancel, id, work = std::move(work), slot = std::move(slot)]() mutable {
    std::optional<ThreadBudget> budget;
    if (slot) budget.emplace(slot->threads());
    const auto finish = [&](const char* how, json result, std::string error) {
      budget.reset(), slot.reset();  // the slot is free before the job says it has ended
      const std::lock_guard<std::mutex> done(state->mutex);
      if (state->id != id) return;
      state->state = how, state->result = std::move(result), state->error = std::move(error);
    };
    try {
      CancelScope scope(*cancel);
      const Progress progress = [&](std::string_view stage, std::size_t done, std::size_t total) {
        const std::lock_guard<std::mutex> step(state->mutex);
        if (state->id == id) state->stage = stage, state->done = done, state->total = total;
      };
      finish("done", work(progress), "");
    } catch (const WorkCancelled&) {
      finish("cancelled", nullptr, "");
    } catch (const std::exception& e) {
      finish("failed", nullptr, e.what());
    }
  });
  lock.unlock();
  return view();
}

json AnalysisJobs::view() const {
  const std::lock_guard<std::mutex> lock(state_->mutex);
  const State& s = *state_;
  return {{"state", s.state},   {"kind", s.kind.empty() ? json() : json(s.kind)},
          {"id", s.id},         {"stage", s.stage},
          {"done", s.done},     {"total", s.total},
          {"result", s.result}, {"error", s.error.empty() ? json() : json(s.error)}};
}

json AnalysisJobs::cancel() {
  {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->cancel) state_->cancel->cancel();
  }
  return view();
}

void AnalysisJobs::shut_down() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopped = true;
  state_->stop_worker(lock);
}

}  // namespace attnlab
