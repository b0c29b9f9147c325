// Attribution in the lab (docs/api.md, "Attribution"): the quick read-outs of one prediction
// answered at once (POST /api/model/attribute), and the long work, the verdict, activation
// patching and KV-cache eviction, as a job on a background thread, one at a time, whose progress the
// page follows and which it can cancel (POST /api/model/analysis, GET /api/model/analysis,
// POST /api/model/analysis/cancel). Every result is the JSON `attnlab model ... --json`
// prints for the same request (attnlab/analysis/attribution_json.hpp).
#pragma once
#include <memory>

#include <nlohmann/json.hpp>

namespace attnlab {

class ModelSources;  // attnlab/server/model_sources.hpp

// The work a server does for one attribution request or job, at most (seconds on two cores):
// the job's FLOPs, the quick read-outs' lens multiply-adds and per-source numbers.
inline constexpr double kMaxApiAnalysisFlops = double(1ull << 40), kMaxApiLensWork = double(1ull << 37),
                        kMaxApiSourceNumbers = double(1 << 20);

// POST /api/model/attribute: {"text" | "ids", "position", "target", "contrast", "run", "step"}
// (target and contrast token ids; position default the last token) -> {"ids", "tokens",
// "attribution" (DLA), "lens", "mixing" (attention, value norms, rollout, ALTI at the position)}.
nlohmann::json api_model_attribute(const ModelSources& models, const nlohmann::json& request);

// POST /api/model/qk: a head's score taken apart (the `model qk` operation), at once, within
// the server's limits on the weights a run keeps.
nlohmann::json api_model_qk(const ModelSources& models, const nlohmann::json& request);

// POST /api/model/kv: the loaded model's KV cache measured at each context (the `model kv`
// operation) with its Markdown report, within the server's limit on an analysis's work.
nlohmann::json api_model_kv(const ModelSources& models, const nlohmann::json& request);

// POST /api/model/circuits: every head's circuits and their composition (the `model circuits`
// operation), within the server's limit on an analysis's work.
nlohmann::json api_model_circuits(const ModelSources& models, const nlohmann::json& request);

class AnalysisJobs {
 public:
  explicit AnalysisJobs(const ModelSources& models);  // `models` must outlive this
  ~AnalysisJobs();                                    // cancels and waits for a job still running
  AnalysisJobs(const AnalysisJobs&) = delete;
  AnalysisJobs& operator=(const AnalysisJobs&) = delete;

  // POST /api/model/analysis: {"kind": "verdict" | "patch" | "evict" | "survey", then that
  // operation's fields: the prediction as for attribute, "steps" (verdict), "corrupt": {"text" |
  // "ids"} (patch); the text, "budget", "policy", ... (evict: operations/evict.hpp);
  // "documents", "max_tokens" (survey: operations/survey.hpp). Priced first (InputError naming
  // the field); a job still running is cancelled for the new one. -> view().
  nlohmann::json start(const nlohmann::json& request);
  // GET /api/model/analysis: {"state": "idle" | "running" | "done" | "failed" | "cancelled",
  // "kind", "id" (one more per job started), "stage", "done", "total", "result", "error"}.
  nlohmann::json view() const;
  // POST /api/model/analysis/cancel: the job stops at its next check. -> view().
  nlohmann::json cancel();
  // Cancels a job still running, waits for it, and refuses later starts (the server is stopping).
  void shut_down();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace attnlab
