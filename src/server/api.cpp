// The API's handlers: validate the request, build the scenario the options describe, run
// the reference computation, and return the trace.
#include "attnlab/server/api.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>

#include "admission.hpp"
#include "attnlab/analysis/capacity_json.hpp"
#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/experiment.hpp"
#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/measure.hpp"
#include "attnlab/analysis/models.hpp"
#include "attnlab/analysis/probe.hpp"
#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/core/embedded.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/operations/capacity.hpp"
#include "attnlab/operations/operations.hpp"
#include "attnlab/report/input_document.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/report/packed_reply.hpp"
#include "attnlab/report/trace_json.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/price.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "attnlab/server/model_sources.hpp"
#include "model_api.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

std::vector<std::size_t> as_index_list(const json& j, std::string_view field) {
  if (!j.is_array()) fail(field, fmt::format("expected a list of indices but got {}", describe_json(j)));
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < j.size(); ++k)
    out.push_back(read_count(j[k], fmt::format("{}[{}]", field, k)));
  return out;
}

Scenario requested_scenario(const json& request, const ModelSources& models) {
  if (!request.contains("scenario"))
    fail("scenario", "missing; give a bundled name (e.g. \"three-tokens\") or a scenario object");
  const json& s = request["scenario"];
  if (s.is_string()) {
    const std::string name = s.get<std::string>();
    if (const auto text = api_scenario_file(name)) return parse_scenario(*text, name + ".json");
    fail("scenario", fmt::format("unknown scenario \"{}\"; the bundled ones are: {}", name,
                                 fmt::join(bundled_scenario_names(), ", ")));
  }
  if (!s.is_object()) fail("scenario", "expected a bundled scenario name or a scenario object");
  // {"model": {...}}: a head of the loaded model (model_api.cpp)
  if (s.contains("model")) {
    if (s.size() != 1) fail("scenario", "a model's head is {\"model\": {...}} alone, without scenario fields");
    return model_head_request(models, s["model"], "scenario.model");
  }
  try {
    return scenario_from_json(s, kMaxApiWorkBytes);
  } catch (const InputError& e) {
    throw e.under("scenario");
  }
}

// A finite number, or InputError naming `field`.
double as_finite_number(const json& j, std::string_view field) {
  if (!j.is_number() || !std::isfinite(j.get<double>())) fail(field, "expected a finite number");
  return j.get<double>();
}

// A list option.
const json& as_list(const json& options, const char* key) {
  const json& list = options[key];
  if (!list.is_array()) fail(fmt::format("options.{}", key), "expected a list");
  return list;
}

// The options that set the scenario up (docs/api.md): sentence, remove_heads,
// add_random_heads, causal, temperature, window. Field names in errors are "options.X".
ScenarioEdits requested_edits(const json& options) {
  ScenarioEdits edits;
  if (options.contains("sentence")) {
    if (!options["sentence"].is_string()) fail("options.sentence", "expected a string of words");
    edits.sentence = options["sentence"].get<std::string>();
  }
  if (options.contains("remove_heads"))
    edits.remove_heads = as_index_list(options["remove_heads"], "options.remove_heads");
  if (options.contains("add_random_heads")) {
    const json& add = options["add_random_heads"];
    if (!add.is_array()) fail("options.add_random_heads", "expected a list like [{\"seed\": 7}]");
    for (std::size_t k = 0; k < add.size(); ++k) {
      const std::string field = fmt::format("options.add_random_heads[{}]", k);
      if (!add[k].is_object() || !add[k].contains("seed"))
        fail(field, "expected {\"seed\": N} (optionally \"d_k\", \"d_v\")");
      refuse_unknown_fields(add[k], {"seed", "d_k", "d_v"}, field);
      RandomHeadRequest r{read_count(add[k]["seed"], field + ".seed"), std::nullopt, std::nullopt};
      if (add[k].contains("d_k")) r.d_k = read_count(add[k]["d_k"], field + ".d_k");
      if (add[k].contains("d_v")) r.d_v = read_count(add[k]["d_v"], field + ".d_v");
      edits.add_random_heads.push_back(r);
    }
  }
  if (options.contains("causal")) {
    if (!options["causal"].is_boolean()) fail("options.causal", "expected true or false");
    edits.overrides.causal = options["causal"].get<bool>();
  }
  if (options.contains("temperature")) {
    if (!options["temperature"].is_number()) fail("options.temperature", "expected a number > 0, e.g. 0.1 to 3");
    edits.overrides.temperature = options["temperature"].get<double>();
  }
  if (options.contains("window") && !options["window"].is_null())
    edits.overrides.window = read_count(options["window"], "options.window");
  return edits;
}

HeadAblationRequest requested_ablation(const json& item, const std::string& field) {
  if (item.is_string()) return parse_ablate_head(item.get<std::string>(), field);  // the text form "H:KIND"
  if (item.is_number()) return {read_count(item, field), HeadAblation::zero, field};
  if (!item.is_object() || !item.contains("head"))
    fail(field, "expected {\"head\": H, \"kind\": \"zero\" | \"mean\" | \"uniform\"} (or \"H:KIND\")");
  refuse_unknown_fields(item, {"head", "kind"}, field);
  HeadAblationRequest r{read_count(item["head"], field + ".head"), HeadAblation::zero, field};
  if (item.contains("kind")) {
    if (!item["kind"].is_string()) fail(field + ".kind", "expected \"zero\", \"mean\" or \"uniform\"");
    r.ablation = ablation_kind(item["kind"].get<std::string>(), field + ".kind");
  }
  return r;
}

HeadScaling requested_scaling(const json& item, const std::string& field) {
  if (item.is_string()) return parse_scale_head(item.get<std::string>(), field);  // the text form "H:F"
  if (!item.is_object() || !item.contains("head") || !item.contains("factor"))
    fail(field, "expected {\"head\": H, \"factor\": F} (or \"H:F\")");
  refuse_unknown_fields(item, {"head", "factor"}, field);
  return {read_count(item["head"], field + ".head"), as_finite_number(item["factor"], field + ".factor"), field};
}

TokenReplacement requested_replacement(const json& item, const std::string& field) {
  if (item.is_string()) return parse_replace_token(item.get<std::string>(), field);  // the text form "J:WORD"
  if (!item.is_object() || !item.contains("index") || (!item.contains("word") && !item.contains("embedding")))
    fail(field, "expected {\"index\": J, \"word\": \"dog\"} or {\"index\": J, \"embedding\": [...]} (or \"J:WORD\")");
  refuse_unknown_fields(item, {"index", "word", "embedding"}, field);
  TokenReplacement r{read_count(item["index"], field + ".index"), std::nullopt, std::nullopt, field};
  if (item.contains("word")) {
    if (!item["word"].is_string()) fail(field + ".word", "expected one word as a string");
    r.word = checked_word(item["word"].get<std::string>(), field + ".word");
  }
  if (item.contains("embedding")) {
    const json& e = item["embedding"];
    if (!e.is_array()) fail(field + ".embedding", "expected a list of d_model numbers");
    std::vector<double> row;
    for (std::size_t c = 0; c < e.size(); ++c)
      row.push_back(as_finite_number(e[c], fmt::format("{}.embedding[{}]", field, c)));
    r.embedding = std::move(row);
  }
  return r;
}

// The interventions the options ask for (docs/api.md); indices refer to the scenario
// after its edits, before the permutation.
Interventions requested_interventions(const json& options) {
  Interventions iv;
  if (options.contains("mask_tokens"))
    for (const json& item : as_list(options, "mask_tokens")) {
      const std::string field = fmt::format("options.mask_tokens[{}]", iv.knock_out.size());
      iv.knock_out.push_back({read_count(item, field), field});
    }
  const auto each = [&](const char* key, auto&& read) {
    if (!options.contains(key)) return;
    const json& list = as_list(options, key);
    for (std::size_t k = 0; k < list.size(); ++k)
      read(list[k], fmt::format("options.{}[{}]", key, k));
  };
  each("ablate_heads",
       [&](const json& item, const std::string& field) { iv.ablate.push_back(requested_ablation(item, field)); });
  each("scale_heads",
       [&](const json& item, const std::string& field) { iv.scale.push_back(requested_scaling(item, field)); });
  each("replace_tokens",
       [&](const json& item, const std::string& field) { iv.replace.push_back(requested_replacement(item, field)); });
  if (options.contains("permute")) iv.permute = as_index_list(options["permute"], "options.permute");
  return iv;
}

// The experiment a request describes: its scenario, edits, interventions and kernel.
Experiment requested_experiment(const json& request, const ModelSources& models) {
  Experiment e{requested_scenario(request, models), {}, {}, KernelKind::reference, "options"};
  e.edits.max_work_bytes = kMaxApiWorkBytes;
  if (request.contains("kernel")) {
    if (!request["kernel"].is_string()) fail("kernel", "expected \"reference\" or \"tiled\"");
    e.kernel = kernel_named(request["kernel"].get<std::string>(), "kernel");
  }
  if (!request.contains("options")) return e;
  const json& options = request["options"];
  if (!options.is_object()) fail("options", "expected an object");
  refuse_unknown_fields(options,
                        {"causal", "temperature", "window", "mask_tokens", "permute", "sentence", "add_random_heads",
                         "remove_heads", "ablate_heads", "scale_heads", "replace_tokens"},
                        "options", "option");
  // A model's head has the model's tokens and one head: a sentence through the word table,
  // or heads added and removed, would no longer be that head on that text.
  if (request["scenario"].is_object() && request["scenario"].contains("model"))
    for (const char* key : {"sentence", "add_random_heads", "remove_heads"})
      if (options.contains(key))
        fail(fmt::format("options.{}", key),
             "means nothing for a model's head (its tokens are the model's, its one head the model's); change "
             "scenario.model.text, .layer or .head instead");
  e.edits = requested_edits(options);
  e.edits.max_work_bytes = kMaxApiWorkBytes;
  e.interventions = requested_interventions(options);
  return e;
}

}  // namespace

json api_health() {
  return {{"ok", true}, {"version", ATTNLAB_VERSION}, {"page_engine", !page_engine_files().empty()}};
}

json api_scenarios() {
  json list = json::array();
  for (const auto& b : bundled_scenarios())
    list.push_back({{"name", b.name}, {"description", b.description}, {"default", b.name == kDefaultScenario}});
  return {{"scenarios", list}};
}

std::optional<std::string_view> api_scenario_file(std::string_view name) {
  for (const auto& b : bundled_scenarios())
    if (b.name == name) return b.text;
  return std::nullopt;
}

namespace {

// "detail": "full" (default) or "weights"; with "weights", only the heads listed in
// "detail_heads" keep every intermediate, the others keep what a heatmap needs.
std::optional<std::vector<std::size_t>> requested_detail_heads(const json& request) {
  if (!request.contains("detail") || request["detail"] == "full") {
    if (request.contains("detail_heads")) fail("detail_heads", "only with \"detail\": \"weights\"");
    return std::nullopt;
  }
  if (request["detail"] != "weights")
    fail("detail",
         fmt::format("{} is not a detail level; use \"full\" or \"weights\"", describe_json(request["detail"])));
  if (!request.contains("detail_heads")) return std::vector<std::size_t>{};
  return as_index_list(request["detail_heads"], "detail_heads");
}

// detail_heads name heads of the reply: a typo would otherwise give no head in full.
void check_detail_heads(const std::optional<std::vector<std::size_t>>& keep, std::size_t heads) {
  if (keep)
    for (std::size_t h : *keep)
      if (h >= heads) fail("detail_heads", fmt::format("head {} does not exist; heads run from 0 to {}", h, heads - 1));
}

// The reply's price: the trace, the effective scenario (its embeddings and weights; the
// page engine's input again with "attention_input") and the intervention's before, after
// and delta, every number at its longest: 25 bytes of JSON ("-1.2345678901234567e-100,"),
// or 8 packed.
void check_reply_bytes(const Scenario& s, bool packed, bool with_input, bool intervened) {
  const ScenarioNumbers c = count_numbers(s);
  const std::uint64_t numbers =
      c.trace + (c.inputs + c.weights) * (with_input ? 2 : 1) + (intervened ? 4 * std::uint64_t{s.n()} * s.d_out() : 0);
  const std::uint64_t bytes = numbers * (packed ? 8 : 25);
  if (bytes > kMaxApiReplyBytes)
    fail("scenario", fmt::format("the reply would be up to {} bytes ({} numbers{}), more than the limit of {}; use "
                                 "fewer tokens or heads, narrower heads, or `attnlab run --json`",
                                 bytes, numbers, packed ? ", packed" : " as JSON", kMaxApiReplyBytes));
}

// The reply of POST /api/attention, its matrices written by write_matrix.
json attention_reply(const json& request, const ModelSources& models,
                     const std::function<json(const Matrix&)>& write_matrix) {
  if (!request.is_object()) fail("body", "expected a JSON object {\"scenario\": ..., \"options\": {...}}");
  refuse_unknown_fields(request,
                        {"scenario", "options", "kernel", "detail", "detail_heads", "encoding", "attention_input"});
  bool with_input = false;
  if (request.contains("attention_input")) {
    if (!request["attention_input"].is_boolean()) fail("attention_input", "expected true or false");
    with_input = request["attention_input"];
  }
  const TraceJsonOptions written{.detail_heads = requested_detail_heads(request), .write_matrix = write_matrix};
  const Experiment experiment = requested_experiment(request, models);
  if (with_input && experiment.kernel == KernelKind::tiled)
    fail("attention_input", "is given with the reference kernel only; drop \"kernel\"");
  // Priced before anything runs (interventions keep the shape).
  const bool packed = wants_packed_reply(request), intervened = !experiment.interventions.empty();
  const auto price = [&](Scenario& s) {
    check_detail_heads(written.detail_heads, s.heads.size());
    const std::size_t cells = s.heads.size() * s.n() * s.m();
    if (cells > kMaxApiTraceCells)
      fail("scenario",
           fmt::format("{} heads × {} × {} tokens is {} score cells; the API returns at most {} (e.g. 8 heads "
                       "of 180 tokens); use `attnlab run --json` for larger traces",
                       s.heads.size(), s.n(), s.m(), cells, kMaxApiTraceCells));
    check_work(s, kMaxApiWorkBytes, "scenario", intervened ? 2 : 1);  // interventions run before and after
    check_reply_bytes(s, packed, with_input, intervened);
    admit_work(count_numbers(s).bytes() * (intervened ? 2 : 1));  // heavy work waits for no one: a slot or 503
  };
  const ExperimentResult result = run_experiment(experiment, price);
  const Scenario& s = result.scenario;
  json reply = trace_to_json(s, result.trace, written);
  reply["kernel"] = std::string(to_string(result.kernel));
  if (result.kernel == KernelKind::tiled) return reply;  // outputs only: the tiled kernel keeps no grid
  for (std::size_t h = 0; h < s.heads.size(); ++h)
    reply["heads"][h]["random_seed"] = s.heads[h].random_seed ? json(*s.heads[h].random_seed) : json(nullptr);
  reply["scenario_json"] = scenario_to_json(s);
  // A model's head: its scenario is the request that makes it, with the settings the page
  // reads; the full one would carry n × d_model embeddings and d_model-wide projections as
  // text (7 MB for GPT-2 small at 256 tokens) that nothing reads.
  if (request["scenario"].is_object() && request["scenario"].contains("model")) {
    json& sj = reply["scenario_json"];
    sj.erase("embeddings");
    sj.erase("heads");
    sj["model"] = request["scenario"]["model"];
  }
  reply["intervention"] = result.intervention ? intervention_to_json(*result.intervention) : json(nullptr);
  if (with_input) reply["attention_input"] = input_document(s, attention_input(s), write_matrix);
  return reply;
}

}  // namespace

bool wants_packed_reply(const json& request) {
  if (!request.is_object() || !request.contains("encoding") || request["encoding"] == "json") return false;
  if (request["encoding"] == "packed") return true;
  fail("encoding", fmt::format("{} is not an encoding; use \"json\" (the default) or \"packed\" (docs/api.md)",
                               describe_json(request["encoding"])));
}

json api_attention(const json& request, const ModelDir* model) {
  const ModelSources models(model);
  return api_attention(request, models);
}

json api_attention(const json& request, const ModelSources& models) {
  wants_packed_reply(request);  // an unknown encoding is refused here too
  return attention_reply(request, models, matrix_to_json);
}

std::string api_attention_packed(const json& request, const ModelDir* model) {
  const ModelSources models(model);
  return api_attention_packed(request, models);
}

std::string api_attention_packed(const json& request, const ModelSources& models) {
  PackedArrays arrays;
  const json header = attention_reply(request, models, [&arrays](const Matrix& m) { return arrays.add(m); });
  return pack_reply(header, arrays);
}

json api_probe(const json& request, const ModelDir* model) {
  const ModelSources models(model);
  return api_probe(request, models);
}

json api_probe(const json& request, const ModelSources& models) {
  if (!request.is_object())
    fail("body", "expected a JSON object {\"scenario\": ..., \"options\": {...}, \"query\": I, \"readout\": \"...\"}");
  refuse_unknown_fields(request, {"scenario", "options", "query", "readout", "head", "epsilon"});
  std::optional<std::size_t> query;
  if (request.contains("query") && !request["query"].is_null()) query = read_count(request["query"], "query");
  // The query names a token of the scenario before any permutation; the permutation carries it.
  const Experiment asked = requested_experiment(request, models);
  const ExperimentResult experiment = run_experiment(asked, [&](Scenario& baseline) {
    // One run per key token, and the interventions' run before them.
    check_work(baseline, kMaxApiWorkBytes, "scenario", asked.interventions.empty() ? 1 : 2);
    check_work(baseline, kMaxApiProbeWorkBytes, "scenario", baseline.m() + 1);
    admit_work(count_numbers(baseline).bytes() * (baseline.m() + 1));
    if (!query) return;
    if (*query >= baseline.n())
      fail("query", fmt::format("token {} does not exist; query indices run from 0 to {}", *query, baseline.n() - 1));
    baseline.query = query;
  });
  const std::optional<InterventionResult>& intervention = experiment.intervention;
  const Scenario& s = experiment.scenario;

  ProbeOptions options;
  if (request.contains("readout") && !request["readout"].is_null()) {
    if (!request["readout"].is_string())
      fail("readout", "expected a string: norm, coordinate:C, direction:u1,u2,..., class or class:LABEL");
    options.readout = request["readout"].get<std::string>();
  }
  if (request.contains("head")) options.head = read_count(request["head"], "head");
  if (request.contains("epsilon")) {
    if (!request["epsilon"].is_number()) fail("epsilon", "expected a number >= 0, e.g. 0.01");
    options.epsilon = request["epsilon"].get<double>();
  }
  json reply = probe_to_json(probe(s, options));
  reply["intervention"] = intervention ? intervention_to_json(*intervention) : json(nullptr);
  return reply;
}

}  // namespace attnlab

// ---- POST /api/cost and POST /api/kv ------------------------------------------------
// The bodies are CostRequest and KvRequest (operations/capacity.hpp), read, checked and
// answered as the command and Python do; the server adds its measurement limits.
namespace attnlab {

namespace {

// One measure at a time: they time the machine and read the process's memory.
std::mutex measure_mutex;

}  // namespace

// The server's measurements: within kMaxApiMeasureTokens and kMaxApiMeasureBytes, as heavy
// work (admission.hpp), one at a time.
MeasureLimits server_measure_limits(std::string_view command) {
  return {
      .max_tokens = kMaxApiMeasureTokens, .max_bytes = kMaxApiMeasureBytes, .who = "the server", .elsewhere = command};
}

json api_cost(const json& body) {
  const CostRequest request = read_request<CostRequest>(body, kHttpApi);
  CostResult result = price_cost(request, server_measure_limits("run `attnlab cost --measure` for more"));
  if (request.measure) {
    admit_work(kHeavyWork);
    const std::lock_guard<std::mutex> one_at_a_time(measure_mutex);
    measure_cost(request, result);
  }
  return cost_json(result);
}

json api_defaults() {
  json defaults = {{"probe", {{"epsilon", ProbeOptions{}.epsilon}}},
                   {"training", train_settings_json(TrainSettings{})}};
  // Each operation's defaults, by field, from its one description ("cost": {"d_model": 4096, ...}).
  for (const OperationDescription& d : operation_descriptions()) {
    json& fields = defaults[std::string(d.name)];
    for (const FieldDescription& f : d.fields)
      if (f.info.faces & kHttpApi) fields[std::string(f.info.name)] = f.default_value;
  }
  return defaults;
}

json api_operations() { return operations_json(); }

json api_models() {
  json models = json::array();
  for (const ModelShape& m : model_presets())
    models.push_back(model_shape_json(m));
  return {{"models", models}};
}

json api_kv(const json& body) {
  const KvRequest request = read_request<KvRequest>(body, kHttpApi);
  KvResult result = price_kv(request, server_measure_limits("run `attnlab kv --measure` for more"));
  if (request.measure) {
    admit_work(kHeavyWork);
    const std::lock_guard<std::mutex> one_at_a_time(measure_mutex);
    measure_kv(result);
  }
  return kv_json(result);
}

}  // namespace attnlab
