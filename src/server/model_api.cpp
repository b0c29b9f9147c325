// The lab with a real model (`attnlab serve --model DIR`, docs/api.md): GET /api/model,
// POST /api/model/run, and a head of the model as the scenario of POST /api/attention.
//
// Every request is priced before the forward pass runs: at most the model's positions,
// at most kMaxApiModelWeights attention weights (L × H × n²) for a run, at most
// kMaxApiTraceCells score cells for one head's trace. The last forward pass is kept, so
// that clicking through the heads of one text runs the model once.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>

#include "admission.hpp"
#include "attnlab/analysis/model_head.hpp"
#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/model_sources.hpp"
#include "model_api.hpp"

#include "attnlab/operations/generate.hpp"
#include "attnlab/operations/model.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// The directory's base name ("models/gpt2/" -> "gpt2").
std::string model_name(const ModelDir& m) {
  const std::filesystem::path p = std::filesystem::path(m.dir).lexically_normal();
  const std::string name = p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
  return name.empty() ? m.dir : name;
}

}  // namespace

std::vector<int> requested_ids(const ModelDir& m, const json& spec, const std::string& prefix) {
  try {  // a token field as every face reads one (operations/generate.hpp)
    TokenInput tokens;
    read_tokens(spec, {.name = "text"}, tokens);
    if (!tokens.given()) fail("text", "missing; give \"text\": \"...\" or \"ids\": [token ids]");
    return token_ids(m, tokens, "text");
  } catch (const InputError& e) {
    throw prefix.empty() ? e : e.under(std::string_view(prefix).substr(0, prefix.size() - 1));
  }
}

std::string tokens_field(const json& spec, const std::string& prefix) {
  return prefix + (spec.contains("text") ? "text" : "ids");
}

std::uint64_t forward_work_bytes(const ModelConfig& c, std::size_t n) {
  return 4 * (std::uint64_t{c.parameters()} + std::uint64_t{c.n_layer} * c.n_head * n * n);
}

namespace {

// The last forward pass with its weights kept: the page asks for /api/model/run and then
// for heads of the same text, one by one.
struct ForwardCache {
  std::mutex mutex;
  std::shared_ptr<const ModelDir> model;  // kept alive, so that its address names it
  std::vector<int> ids;
  std::shared_ptr<const ForwardResult> result;
};
ForwardCache forward_cache;

std::shared_ptr<const ForwardResult> forward_with_weights(const std::shared_ptr<const ModelDir>& m,
                                                          const std::vector<int>& ids) {
  {
    const std::lock_guard<std::mutex> lock(forward_cache.mutex);
    if (forward_cache.model == m && forward_cache.ids == ids) return forward_cache.result;
  }
  admit_work(forward_work_bytes(m->model.config, ids.size()));
  auto result = std::make_shared<const ForwardResult>(
      model_forward(m->model, ids, {.logits = LogitRows::last, .keep_attention = true}));
  const std::lock_guard<std::mutex> lock(forward_cache.mutex);
  forward_cache.model = m;
  forward_cache.ids = ids;
  forward_cache.result = result;
  return result;
}

}  // namespace

Scenario model_head_request(const ModelSources& models, const json& spec, const std::string& field) {
  if (!spec.is_object())
    fail(field,
         "expected {\"text\": \"...\" (or \"ids\": [...]), \"layer\": L, \"head\": H} (optionally \"run\", \"step\")");
  const std::string prefix = field + ".";
  refuse_unknown_fields(spec, {"text", "ids", "layer", "head", "run", "step"}, field);
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(spec, prefix), prefix);
  const ModelDir& m = *model;
  const ModelConfig& c = m.model.config;
  for (const char* key : {"layer", "head"})
    if (!spec.contains(key)) fail(prefix + key, "missing; name the head as \"layer\": L, \"head\": H (0-based)");
  const HeadRef head{read_count(spec["layer"], prefix + "layer"), read_count(spec["head"], prefix + "head")};
  check_head(c, head, prefix + (head.layer >= c.n_layer ? "layer" : "head"));
  const std::vector<int> ids = requested_ids(m, spec, prefix);
  const std::size_t n = ids.size();
  if (n * n > kMaxApiTraceCells)
    fail(tokens_field(spec, prefix),
         fmt::format("{} tokens is {} score cells; a head's trace has at most {} (512 tokens); use `attnlab model "
                     "run --layer --head` for longer texts",
                     n, n * n, kMaxApiTraceCells));
  const std::shared_ptr<const ForwardResult> r = forward_with_weights(model, ids);
  std::vector<std::string> tokens;
  for (const TokenShown& t : show_tokens(m, ids))
    tokens.push_back(t.text);
  return model_head_scenario(m.model, *r, tokens, head);
}

json api_model(const ModelDir* model) {
  const ModelSources models(model);
  return api_model(models, {});
}

json api_model(const ModelSources& models, const ModelChoice& choice) {
  if (!choice.run && !models.base()) return {{"loaded", false}};
  const std::shared_ptr<const ModelDir> model = models.model(choice, "");
  const ModelConfig& c = model->model.config;
  const std::filesystem::path dir = models.run_dir(choice, "");
  json out = config_json(c);
  out.update({{"loaded", true},
              {"name", choice.run ? *choice.run : model_name(*models.base())},
              {"run", choice.run ? json(*choice.run) : json(nullptr)},
              {"step", choice.step ? json(*choice.step) : json(nullptr)},
              {"training", is_training_run(dir)},
              {"description", describe(c)},
              {"tokenizer", model->tokenizer.has_value()},
              // the most attention weights a run's reply holds: past it the page asks for sparse rows
              {"max_run_weights", kMaxApiModelWeights}});
  return out;
}

std::string api_model_run(const ModelDir* model, const json& request) {
  const ModelSources models(model);
  return api_model_run(models, request);
}

json operation_fields(const json& body) {
  if (!body.is_object()) fail("body", fmt::format("expected a JSON object but got {}", json_kind(body)));
  json fields = body;
  fields.erase("run");
  fields.erase("step");
  return fields;
}

std::string api_model_run(const ModelSources& models, const json& body) {
  const json fields = operation_fields(body);
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  const ModelDir& m = *model;
  const ModelConfig& c = m.model.config;
  const RunRequest request = read_request<RunRequest>(fields, kHttpApi);
  const RunPlan plan = price_run(m, request, double(kMaxApiModelWeights));
  const std::vector<int>& ids = plan.ids;
  const std::size_t n = ids.size(), weights = c.n_layer * c.n_head * n * n;
  // Sparse rows: asked for alone (weights false), or the weights when they fit the server's
  // limit and the rows in brief when they do not (what the lab asks for: any length it may run).
  if (request.sparse && (!request.weights || weights > kMaxApiModelWeights)) {        // no n × n weights
    const std::size_t numbers = c.n_layer * c.n_head * n * (2 * request.sparse + 2);  // priced by price_run
    admit_work(std::uint64_t{c.parameters()} * sizeof(float) + numbers * sizeof(float));
    const ForwardResult r = model_forward(m.model, ids, {.logits = LogitRows::last, .sparse_top = request.sparse});
    std::optional<ForwardResult> ablated;
    if (!plan.options.ablate.empty())
      ablated = model_forward(m.model, ids, {.logits = LogitRows::last, .ablate = plan.options.ablate});
    return run_json(m, plan, r, ablated ? &*ablated : nullptr, false, WeightDigits::four);
  }
  if (weights > kMaxApiModelWeights)
    fail(request.text.ids ? "ids" : "text",
         fmt::format("{} layers × {} heads × {}² tokens is {} attention weights; the server runs at most {} "
                     "(use a shorter text, or `attnlab model run` for more)",
                     c.n_layer, c.n_head, n, weights, kMaxApiModelWeights));

  const std::shared_ptr<const ForwardResult> r = forward_with_weights(model, ids);
  std::optional<ForwardResult> ablated;
  if (!plan.options.ablate.empty()) {
    admit_work(forward_work_bytes(c, ids.size()));
    ablated = model_forward(m.model, ids, {.logits = LogitRows::last, .ablate = plan.options.ablate});
  }
  return run_json(m, plan, *r, ablated ? &*ablated : nullptr, request.weights, WeightDigits::four);
}

json api_model_map(const ModelSources& models, const json& body) {
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  MapResult result = price_map(*model, read_request<MapRequest>(operation_fields(body), kHttpApi));
  const ModelConfig& c = model->model.config;
  // the weights, and one block's buffers over the tokens (nothing of n × n)
  const std::uint64_t row = c.qkv_width() + c.fc_width() + c.attention_width() + 4 * c.n_embd;
  admit_work(sizeof(float) * (std::uint64_t{c.parameters()} + result.ids.size() * row));
  run_map(*model, result);
  return map_json(*model, result);
}

json api_model_generate(const ModelSources& models, const json& body) {
  const json request = operation_fields(body);  // which model is the server's to say; the rest is the operation's
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  GenerateResult result = price_generate(*model, read_request<GenerateRequest>(request, kHttpApi),
                                         {double(kMaxApiTraceWeights),
                                          "generate fewer tokens, or use `attnlab model "
                                          "generate --trace`"});
  admit_work(kHeavyWork);
  generate_tokens(*model, result);
  return generate_json(*model, result);
}

}  // namespace attnlab
