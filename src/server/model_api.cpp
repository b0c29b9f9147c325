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

// The next-token distribution at the last position, as the reply writes it.
json top_k_json(const ModelDir& m, const ForwardResult& r, std::size_t k) {
  json out = json::array();
  for (const TokenProbability& t : top_k(r.logits_at(r.n - 1), k))
    out.push_back(candidate_json(m, t.id, t.probability));
  return out;
}

// Appends a weight in [0, 1] rounded to 4 decimals, written as JSON writes the double
// nearest to it ("0.1234", "0.05", "0", "1"): millions of them, so without a formatter.
void append_weight(std::string& out, float w) {
  const long k = std::lround(std::clamp(static_cast<double>(w), 0.0, 1.0) * 1e4);
  if (k == 0) {
    out += '0';
    return;
  }
  if (k >= 10000) {
    out += '1';
    return;
  }
  char digits[4] = {static_cast<char>('0' + k / 1000), static_cast<char>('0' + k / 100 % 10),
                    static_cast<char>('0' + k / 10 % 10), static_cast<char>('0' + k % 10)};
  int last = 3;
  while (digits[last] == '0')
    --last;
  out += "0.";
  out.append(digits, static_cast<std::size_t>(last + 1));
}

// [layer][head][n][n], each weight to 4 decimals.
void append_weights(std::string& out, const ForwardResult& r, std::size_t heads) {
  const std::size_t n = r.n;
  out.reserve(out.size() + r.attention.size() * heads * n * n * 7);
  out += '[';
  for (std::size_t l = 0; l < r.attention.size(); ++l) {
    out += l ? ",[" : "[";
    for (std::size_t h = 0; h < heads; ++h) {
      out += h ? ",[" : "[";
      for (std::size_t i = 0; i < n; ++i) {
        out += i ? ",[" : "[";
        const float* row = r.attention[l].data() + (h * n + i) * n;
        for (std::size_t j = 0; j < n; ++j) {
          if (j) out += ',';
          append_weight(out, row[j]);
        }
        out += ']';
      }
      out += ']';
    }
    out += ']';
  }
  out += ']';
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
              {"tokenizer", model->tokenizer.has_value()}});
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
  const RunPlan plan = price_run(m, request);
  const std::vector<int>& ids = plan.ids;
  const std::vector<HeadRef>& ablate = plan.options.ablate;
  const std::size_t k = plan.top_k;
  const bool with_weights = request.weights;
  const std::size_t n = ids.size(), weights = c.n_layer * c.n_head * n * n;
  if (weights > kMaxApiModelWeights)
    fail(request.text.ids ? "ids" : "text",
         fmt::format("{} layers × {} heads × {}² tokens is {} attention weights; the server runs at most {} "
                     "(use a shorter text, or `attnlab model run` for more)",
                     c.n_layer, c.n_head, n, weights, kMaxApiModelWeights));

  const std::shared_ptr<const ForwardResult> r = forward_with_weights(model, ids);
  json reply = {{"ids", ids}, {"top_k", top_k_json(m, *r, k)}, {"top_k_ablated", nullptr}};
  add_tokens_json(reply, m, ids);
  if (!ablate.empty()) {
    admit_work(forward_work_bytes(c, ids.size()));
    const ForwardResult ablated = model_forward(m.model, ids, {.logits = LogitRows::last, .ablate = ablate});
    reply["top_k_ablated"] = top_k_json(m, ablated, k);
    json heads = json::array();
    for (const HeadRef& h : ablate)
      heads.push_back(to_string(h));
    reply["ablated"] = heads;
  } else {
    reply["ablated"] = json::array();
  }

  // The detectors on this text: the weights the pass above kept, scored as detect_heads
  // scores each of its sequences.
  reply["heads"] = head_scores_json(score_heads(*r, ids))["heads"];

  // The weights go in as text: nlohmann::json would hold each of millions of numbers as
  // a node (GPT-2 small at 256 tokens has 9.4 million).
  std::string text = reply.dump();
  text.pop_back();  // the closing brace
  text += ",\"weights\":";
  if (with_weights)
    append_weights(text, *r, c.n_head);
  else
    text += "null";
  text += '}';
  return text;
}

json api_model_generate(const ModelSources& models, const json& body) {
  const json request = operation_fields(body);  // which model is the server's to say; the rest is the operation's
  const std::shared_ptr<const ModelDir> model = models.model(ModelSources::choice(body, ""), "");
  GenerateResult result = price_generate(*model, read_request<GenerateRequest>(request, kHttpApi));
  admit_work(kHeavyWork);
  generate_tokens(*model, result);
  return generate_json(*model, result);
}

}  // namespace attnlab
