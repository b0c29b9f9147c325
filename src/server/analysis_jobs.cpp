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

#include "attnlab/operations/evict.hpp"
#include "attnlab/operations/model.hpp"
#include "attnlab/operations/survey.hpp"

namespace attnlab {

using nlohmann::json;

// The server's limits on the quick read-outs: the per-source numbers and the lens's work.
constexpr AttributionLimits kApiAttribution{.max_numbers = kMaxApiSourceNumbers,
                                            .max_lens_work = kMaxApiLensWork,
                                            .elsewhere = "use a shorter text, or `attnlab model attribute`"};

json api_model_qk(const ModelSources& models, const json& body) {
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  const AttributionLimits limits{.max_weights = double(kMaxApiModelWeights),
                                 .elsewhere = "use a shorter text, or `attnlab model qk`"};
  QkResult result = price_qk(*model, read_request<QkRequest>(operation_fields(body), kHttpApi), limits);
  admit_work(2 * forward_work_bytes(model->model.config, result.ids.size()));
  run_qk(*model, result);
  return qk_json(*model, result);
}

json api_model_kv(const ModelSources& models, const json& body) {
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  ModelKvResult result = price_model_kv(*model, read_request<ModelKvRequest>(operation_fields(body), kHttpApi));
  // Each context's prompt runs twice (once to warm what is not the cache, once measured).
  double flops = 0;
  for (std::uint64_t tokens : result.contexts)
    flops += 2 * forward_flops(model->model.config, std::min<std::size_t>(tokens, model->model.config.n_positions));
  if (flops > kMaxApiAnalysisFlops)
    fail("context", fmt::format("the measure's prompts are {:.3g} FLOPs, more than the server's {:.3g}; use shorter "
                                "contexts, or `attnlab model kv --report`",
                                flops, kMaxApiAnalysisFlops));
  admit_work(kHeavyWork);
  run_model_kv(*model, result);
  return model_kv_json(result);
}

json api_model_circuits(const ModelSources& models, const json& body) {
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  const AttributionLimits limits{.max_circuit_work = kMaxApiAnalysisFlops, .elsewhere = "use `attnlab model circuits`"};
  CircuitsResult result =
      price_circuits(*model, read_request<CircuitsRequest>(operation_fields(body), kHttpApi), limits);
  admit_work(kHeavyWork);
  run_circuits(*model, result);
  return circuits_json(*model, result);
}

json api_model_attribute(const ModelSources& models, const json& body) {
  const json fields = operation_fields(body);
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  const ModelDir& m = *model;
  const ModelConfig& c = m.model.config;
  const AttributeRequest request = read_request<AttributeRequest>(fields, kHttpApi);
  AttributeResult a = price_attribute(m, request, kApiAttribution);
  (void)price_lens(m, {request.text, request.target}, kApiAttribution);  // the lens read-out, priced alike
  const double n = double(a.ids.size());
  if (double(c.n_layer) * double(c.n_head) * n * n > double(kMaxApiModelWeights))  // the mixing's weights
    fail(request.text.ids ? "ids" : "text",
         fmt::format("{} tokens is more than the server attributes for this model ({} layers × {} heads); use a "
                     "shorter text, or `attnlab model attribute`",
                     a.ids.size(), c.n_layer, c.n_head));
  admit_work(3 * forward_work_bytes(c, a.ids.size()));
  run_attribute(m, a);
  ForwardOptions keep;
  keep.keep_stream = true;
  keep.logits = LogitRows::none;  // the mixing reads the stream alone
  const ContextMixing mixing = context_mixing(m.model, model_forward(m.model, a.ids, keep), a.attribution.position);
  const TokenText token = texts_of(m);
  return {{"ids", a.ids},
          {"tokens", token_texts(m, a.ids)},
          {"attribution", attribution_json(a.attribution, c.n_head, token)},
          {"lens", lens_json(logit_lens(m.model, a.ids, a.attribution.target), token)},
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

json AnalysisJobs::start(const json& body) {
  json fields = operation_fields(body);  // the operation's fields, and which one: "kind"
  if (!fields.contains("kind") || !fields["kind"].is_string() ||
      (fields["kind"] != "verdict" && fields["kind"] != "patch" && fields["kind"] != "evict" &&
       fields["kind"] != "survey"))
    fail("kind", "expected \"verdict\", \"patch\", \"evict\" or \"survey\"");
  const std::string kind = fields["kind"];
  fields.erase("kind");
  const std::shared_ptr<const ModelDir> model = state_->models.model(ModelSources::choice(body, ""), "");
  const ModelConfig& c = model->model.config;
  std::function<json(const Progress&)> work;
  double flops = 0;
  std::string tokens_field;  // the field a request too large for the server is about
  if (kind == "verdict") {
    const VerdictRequest request = read_request<VerdictRequest>(fields, kHttpApi);
    VerdictResult verdict = price_verdict(*model, request);
    for (const std::vector<int>& ids : verdict.runs)
      flops += verdict_flops(c, verdict.options.target.position.value_or(ids.size() - 1) + 1, verdict.options.steps);
    tokens_field = request.text.ids ? "ids" : "text";
    work = [model, verdict](const Progress& progress) mutable {
      run_verdict(*model, verdict, progress);
      return verdict_result_json(*model, verdict);
    };
  } else if (kind == "evict") {
    const EvictRequest request = read_request<EvictRequest>(fields, kHttpApi);
    EvictResult evict = price_evict(*model, request, {kMaxApiAnalysisFlops, "use `attnlab model evict`"});
    flops = evict.flops;
    tokens_field = request.text.ids ? "ids" : "text";
    work = [model, evict](const Progress& progress) mutable {
      run_evict(*model, evict, [&](double done, double total) {
        progress("single-token forwards", std::size_t(done), std::size_t(total));
      });
      return evict_json(evict);
    };
  } else if (kind == "survey") {
    const SurveyRequest request = read_request<SurveyRequest>(fields, kHttpApi);
    SurveyPlan plan = price_survey(*model, request);
    flops = plan.flops;
    tokens_field = "documents";
    work = [model, plan](const Progress& progress) {
      std::size_t tokens = 0;
      const SurveyTotals totals = run_survey(*model, plan, std::nullopt, [&](std::size_t, std::size_t t) {
        progress("tokens", tokens += t, plan.tokens);
      });
      return survey_json(*model, plan, totals);
    };
  } else {
    const PatchRequest request = read_request<PatchRequest>(fields, kHttpApi);
    PatchResult patch = price_patch(*model, request);
    flops = patching_flops(c, patch.clean.size());
    tokens_field = request.clean.ids ? "clean_ids" : "clean";
    work = [model, patch](const Progress& progress) mutable {
      run_patch(*model, patch, progress);
      return patch_json(*model, patch);
    };
  }
  if (flops > kMaxApiAnalysisFlops)
    fail(tokens_field, fmt::format("the {} is {:.3g} FLOPs, more than the server's {:.3g}; use a shorter text, or "
                                   "`attnlab model {}`",
                                   kind == "patch" ? "patching" : kind, flops, kMaxApiAnalysisFlops, kind));
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
