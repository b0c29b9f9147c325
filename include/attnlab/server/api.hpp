// The lab's JSON API as plain functions (docs/api.md): the HTTP server only routes to
// these, and tests can call them without a socket.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnlab/server/limits.hpp"

namespace attnlab {

struct ModelDir;     // attnlab/model/model_dir.hpp: the model `attnlab serve --model DIR` loaded
class ModelSources;  // attnlab/server/model_sources.hpp: that model, the runs under --runs, their checkpoints
struct ModelChoice;  // attnlab/server/model_sources.hpp: which of them a request names ("run", "step")

// Every request is priced against the limits of attnlab/server/limits.hpp (kMaxRequestBytes,
// kMaxApiTraceCells, kMaxApiWorkBytes, kMaxApiReplyBytes, ...) before work starts.

// GET /api/health -> {"ok": true, "version": "...", "page_engine": bool (attnlab.wasm is served)}
nlohmann::json api_health();

// GET /api/scenarios -> {"scenarios": [{"name", "description", "default"}]}
nlohmann::json api_scenarios();

// GET /api/scenarios/{name} -> the bundled file's text, or nothing for an unknown name.
std::optional<std::string_view> api_scenario_file(std::string_view name);

// POST /api/attention: {"scenario": name or object, "options": {...}} -> the trace plus
// "scenario_json". Throws InputError naming the field for a bad request.
// "encoding": "packed" asks for the packed reply instead (attnlab/report/packed_reply.hpp): the
// same document with its matrices as raw doubles. api_attention always writes JSON and
// api_attention_packed the packed bytes; the server picks by wants_packed_reply.
// With a model loaded, "scenario" may also be {"model": {"text" | "ids", "layer", "head"}}:
// head L.H of the model on that text, as a scenario (model_api.cpp, docs/api.md).
// The ModelSources forms take "run" and "step" beside them (a checkpoint of a training run);
// the ModelDir* forms serve that one model.
nlohmann::json api_attention(const nlohmann::json& request, const ModelDir* model = nullptr);
nlohmann::json api_attention(const nlohmann::json& request, const ModelSources& models);
bool wants_packed_reply(const nlohmann::json& request);  // throws InputError for an unknown encoding
std::string api_attention_packed(const nlohmann::json& request, const ModelDir* model = nullptr);
std::string api_attention_packed(const nlohmann::json& request, const ModelSources& models);

// POST /api/probe: {"scenario", "options", "query", "readout", "head", "epsilon"} -> the
// probe of one query (weights, value-weighted weights, erasure, gradient × input, Kendall τ,
// Serrano & Smith's test, Jain & Wallace's counterfactual) plus "intervention".
nlohmann::json api_probe(const nlohmann::json& request, const ModelDir* model = nullptr);
nlohmann::json api_probe(const nlohmann::json& request, const ModelSources& models);

// What long context costs (docs/api.md, docs/cost-and-kv.md): the numbers `attnlab cost`
// and `attnlab kv` print, from the same library functions. "measure": true runs the
// measure on the server, within kMaxApiMeasureTokens and kMaxApiMeasureBytes (the CLI has
// no limit beyond the machine's memory).

// POST /api/cost: {"tokens": [3, 6, 100000], "d_model", "heads", "layers", "dtype",
// "window", "measure", "kernel", "causal"} -> {"shape": {...}, "rows": [...], "measured"}.
nlohmann::json api_cost(const nlohmann::json& request);

// GET /api/defaults -> {"cost": {"tokens", "d_model", "heads", ...}, "kv": {...}, "model
// generate": {...}, "probe": {"epsilon"}, "training": {...}}: what a request leaves out gets
// these (each operation's description, ProbeOptions and TrainSettings), so the page shows
// them instead of keeping copies.
nlohmann::json api_defaults();

// GET /api/operations -> {"operations": [{"name", "help", "fields": [{"name", "kind",
// "default", "help", "unit", "required", "min", "max", "choices", "faces", "flag"}]}]}:
// every operation's one description (operations/operations.hpp, docs/operations.md).
nlohmann::json api_operations();

// GET /api/models -> {"models": [{"name", "source", "layers", "d_model", "heads",
// "kv_heads", "head_dim", "parameters", "note"}]}: the presets /api/kv and `attnlab kv` know.
nlohmann::json api_models();

// POST /api/kv: {"model": "llama-3-8b", "context": [4096, 32768], "dtype", "budget",
// "layers", "kv_heads", "head_dim", "heads", "d_model", "params", "measure",
// "measure_layers"} -> {"model": {...}, "rows": [...], "budget", "measured"}.
nlohmann::json api_kv(const nlohmann::json& request);

// ---- the lab with a model (`attnlab serve --model DIR`, docs/api.md) ----------------------

// POST /api/model/run refuses texts whose attention weights (layers × heads × n²) exceed
// kMaxApiModelWeights: GPT-2 small (12 × 12) at 256 tokens is 9.4 million, 22 MB of JSON;
// at 342 it would be refused.

// GET /api/model[?run=NAME&step=N] -> {"loaded": false} or {"loaded": true, "name", "run",
// "step", "training" (the directory is a training run), "n_layer", "n_head", "n_embd",
// "n_positions", "vocab_size", "tokenizer"}.
nlohmann::json api_model(const ModelDir* model);
nlohmann::json api_model(const ModelSources& models, const ModelChoice& choice);

// POST /api/model/run: {"text" | "ids", "ablate": ["L.H"], "top_k": K, "weights": bool} ->
// the reply's JSON text: {"ids", "tokens", "top_k", "top_k_ablated", "ablated", "heads"
// (detector scores on this text), "weights" ([layer][head][n][n], 4 decimals)}. Written as
// text, not as a json value: the weights are millions of numbers. InputError naming
// "model" when no model is loaded.
// With ModelSources, the request may also name "run" and "step" (a training run's checkpoint).
std::string api_model_run(const ModelDir* model, const nlohmann::json& request);
std::string api_model_run(const ModelSources& models, const nlohmann::json& request);

// POST /api/model/generate: the `model generate` operation's request (docs/operations.md:
// {"text" | "ids", "tokens", "temperature", "top_k", "seed", "bf16"}, and "run", "step") ->
// what `attnlab model generate --json` prints for it. A heavy request, within the request's
// time budget (503 past it).
nlohmann::json api_model_generate(const ModelSources& models, const nlohmann::json& request);
// POST /api/model/map: one head's weights at any length, pooled (the `model map` operation):
// the forward runs to the head's layer and keeps no n × n weights.
nlohmann::json api_model_map(const ModelSources& models, const nlohmann::json& request);

}  // namespace attnlab
