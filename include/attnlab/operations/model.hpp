// The operations on a loaded model, described once (operations/request.hpp): model kv,
// model eval, model heads, and the attribution family (model attribute, model lens, model
// patch, model verdict). Each has its request, a price_* that checks it against the model
// and its limits before any work, a run_* that computes, and a *_json reply that the
// command's --json prints, Python returns and the API answers. run_model_operation() runs
// any of them by name (Python's Model methods, and the faces that take an operation's name).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/attribution_json.hpp"
#include "attnlab/analysis/circuits.hpp"
#include "attnlab/analysis/model_kv.hpp"
#include "attnlab/analysis/qk.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

// ---- tokens ------------------------------------------------------------------------------

// The ids a token field asks for: its text through the model's tokenizer, or its ids, each
// checked to be in the vocabulary, and no more than the model's positions; InputError names
// the field ("text", "ids[3]").
std::vector<int> token_ids(const ModelDir& model, const TokenInput& tokens, std::string_view field);

// A token id's text for a reply: the model's tokenizer's, or "#id" without one (the
// attribution replies' TokenText, analysis/attribution_json.hpp).
TokenText texts_of(const ModelDir& model);

// The id of a token field: its id (in the vocabulary), or its text when the tokenizer makes
// one token of it; -1 when the field was not given.
int token_id(const ModelDir& model, const TokenRef& token, std::string_view field);

// ---- model info, model tokenize, model export ----------------------------------------------

struct InfoRequest {
  static constexpr std::string_view kName = "model info";
  static constexpr std::string_view kHelp = "The checkpoint's config, parameters, bytes, dtypes and tensors";

  template <class Field>
  void for_each(Field&&) {}  // the model alone
};

// Each kind of tensor (its name without the layer: "blk.3.attn_q.weight" -> "attn_q.weight"):
// how many, in which types, and the bytes they take, in file order.
struct TensorKind {
  std::string kind;
  std::map<std::string, std::size_t> types;  // type name -> tensors
  std::size_t count = 0, bytes = 0;
};
struct InfoResult {
  CheckpointSummary file;
  std::vector<TensorKind> kinds;
  std::size_t weight_bytes = 0, f32_bytes = 0;  // the weights as held (quantized blocks where they lie), widened
};
InfoResult run_info(const ModelDir& model);
// config_json with "format", "architecture", "file_bytes", "files", "dtype", "stored_type",
// "weight_bytes", "f32_bytes", "tokenizer", "tensor_kinds", "tensors".
nlohmann::json info_json(const ModelDir& model, const InfoResult& result);

struct TokenizeRequest {
  static constexpr std::string_view kName = "model tokenize";
  static constexpr std::string_view kHelp = "Text as the model's tokens";

  std::string text;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text", .help = "The text", .required = true, .positional = true});
  }
};
// The text through the model's tokenizer (as every operation that takes text reads it).
std::vector<int> run_tokenize(const ModelDir& model, const TokenizeRequest& request);
// {"ids", "tokens", "token_bytes"}.
nlohmann::json tokenize_json(const ModelDir& model, const std::vector<int>& ids);

struct ExportRequest {
  static constexpr std::string_view kName = "model export";
  static constexpr std::string_view kHelp =
      "Write the model as a GGUF file that llama.cpp and Ollama run (GPT-2, Llama, Qwen2, Qwen3)";
  static constexpr std::string_view kTypes[] = {"f32", "f16", "q8_0"};

  std::string gguf;
  std::string type = "f16";

  template <class Field>
  void for_each(Field&& field) {
    field(gguf, {.name = "gguf",
                 .help = "The GGUF file to write",
                 .required = true,
                 .faces = kCommandLine | kPython,
                 .example = "model.gguf"});
    field(type, {.name = "type", .help = "How the matrices are stored (norms and biases: f32)", .choices = kTypes});
  }
};
struct ExportResult {
  std::string file;
  GgmlType type = GgmlType::f16;
  GgufExport written;
};
// The file is not the model read, and the memory the writer holds (every tensor widened to
// f32) is there.
ExportResult price_export(const ModelDir& model, const ExportRequest& request);
void run_export(const ModelDir& model, ExportResult& result);
// {"file", "bytes", "tensors", "type", "kept_f16", "tokenizer"}.
nlohmann::json export_json(const ExportResult& result);

// ---- model run ---------------------------------------------------------------------------

struct RunRequest {
  static constexpr std::string_view kName = "model run";
  static constexpr std::string_view kHelp =
      "Run the model: next-token top-k, every head in brief, or one head explained";
  static constexpr std::string_view kCaptures[] = {"attention", "stream"};
  static constexpr std::string_view kLogitRows[] = {"every", "last", "none"};

  TokenInput text;
  std::uint64_t top_k = 5;
  HeadList ablate;
  std::optional<std::uint64_t> layer, head, query;
  std::vector<std::string> capture = {"attention"};
  std::string logits = "every";
  bool weights = true;
  std::uint64_t sparse = 0;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text", .help = "The text to run (ids: token ids instead)", .required = true});
    field(top_k, {.name = "top_k", .help = "How many next-token candidates to give", .range = {1, 100}});
    field(ablate, {.name = "ablate", .help = "Heads L.H whose output is zeroed before the layer's W_O"});
    field(layer, {.name = "layer",
                  .help = "With head: this head explained, every step of its attention (0-based)",
                  .faces = kCommandLine | kPython});
    field(head, {.name = "head", .help = "With layer: the head (0-based)", .faces = kCommandLine | kPython});
    field(query, {.name = "query",
                  .help = "With layer and head: the position worked in full (default: the last)",
                  .faces = kCommandLine});
    field(capture, {.name = "capture",
                    .help = "What the run keeps: attention (every head's weights), stream (the residual stream at "
                            "every layer)",
                    .choices = kCaptures,
                    .faces = kPython});
    field(logits, {.name = "logits",
                   .help = "Which positions' logits: every one's [n × vocabulary], the last one's, or none",
                   .choices = kLogitRows,
                   .faces = kPython});
    field(weights, {.name = "weights", .help = "Every head's weights in the reply", .faces = kHttpApi});
    field(sparse, {.name = "sparse",
                   .help = "Every head's rows in brief instead of n × n weights, for long contexts: the N keys each "
                           "query weighs most, its weight on the first token (the sink) and its entropy (0: none; "
                           "the API with weights true: only where the weights are over its limit)",
                   .range = {0, 64},
                   .faces = kCommandLine | kHttpApi});
  }
};

struct RunPlan {
  std::vector<int> ids;
  ForwardOptions options;
  std::optional<HeadRef> head;  // layer.head, to explain
  std::optional<std::size_t> query;
  std::size_t top_k = 5;
};
// The ids, the heads (ablated, explained) and the positions checked against the model; the
// forward's options as the request asks (a head explained keeps the attention; sparse rows
// keep no n × n weights unless asked).
// Sparse rows are priced at L × H × n × (2 · sparse + 2) numbers, at most `max_sparse_numbers`
// (the server passes its smaller limit).
RunPlan price_run(const ModelDir& model, const RunRequest& request, double max_sparse_numbers = double(1u << 28));

// The reply of `model run`, the command's --json and POST /api/model/run's: {"ids", "tokens",
// "top_k": the next token's candidates [{"id", "token", "probability"}], "ablated": ["L.H",
// ...], "top_k_ablated": the candidates with those heads ablated (null: none were), "heads":
// the detectors' scores on this text, "last_logits": the last position's logits [vocabulary]
// (the ablated run's when heads were ablated), "weights": every head's weights
// [layer][head][n][n] (null without with_weights), and with the request's sparse "sparse":
// {"top", "sink" [L][H][n], "entropy" [L][H][n] (bits), "keys" and "weights" [L][H][n][≤ top]}
// ("heads" is null when the run kept no weights)}. `run` kept its attention; `ablated` is
// the run with the plan's heads ablated, or null. The server rounds each weight to 4
// decimals (the page draws them; the reply is about half as long); the command writes each
// float as it is.
enum class WeightDigits { four, every };
std::string run_json(const ModelDir& model, const RunPlan& plan, const ForwardResult& run, const ForwardResult* ablated,
                     bool with_weights, WeightDigits digits);

// ---- model map: one head's weights at any length ------------------------------------------

struct MapRequest {
  static constexpr std::string_view kName = "model map";
  static constexpr std::string_view kHelp =
      "One head's weights at any length, pooled: each cell the largest weight of a block of queries and keys (and "
      "where it is), or from a query and a key on, one weight a cell";

  TokenInput text;
  HeadList head;
  std::uint64_t cells = 64;
  std::optional<std::uint64_t> query, key;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text", .help = "The text (ids: token ids instead)", .required = true});
    field(head, {.name = "head", .help = "The head, L.H", .max_items = 1, .required = true, .example = "1.0"});
    field(cells, {.name = "cells",
                  .help = "Cells a side: the whole head in blocks of ⌈n / cells⌉ tokens, or with query or key a "
                          "window of this many tokens a side",
                  .range = {1, 512}});
    field(query, {.name = "query", .help = "A window's first query (default 0; with key or alone: one weight a cell)"});
    field(key, {.name = "key", .help = "A window's first key (default 0)"});
  }
};

struct MapResult {
  std::vector<int> ids;
  ForwardOptions options;  // the head's map, the forward stopping at its layer
  HeadMap map;
};
// The ids and the window checked against the model: the whole head pooled, or with query or
// key a window of cells × cells tokens (cut at the text's end).
MapResult price_map(const ModelDir& model, const MapRequest& request);
void run_map(const ModelDir& model, MapResult& result);
// {"ids", "tokens", "head": "L.H", "kv_head", "tile", "row0", "col0", "rows", "cols" (the window
//  in tokens), "weights" [cells down][cells across] (null: a cell whose queries see none of its
//  keys), "query", "key" [down][across] (where each cell's weight is; null likewise)}.
nlohmann::json map_json(const ModelDir& model, const MapResult& result);

// ---- model kv ----------------------------------------------------------------------------

struct ModelKvRequest {
  static constexpr std::string_view kName = "model kv";
  static constexpr std::string_view kHelp =
      "The model's KV cache at each context: the formula beside the bytes a real cache holds, allocates and adds "
      "to resident memory";

  std::vector<std::uint64_t> context;  // none: 16, 64, 256, ... up to the model's positions (at most 4096)
  CacheType dtype = CacheType::f32;
  std::optional<std::string> report;

  template <class Field>
  void for_each(Field&& field) {
    field(context, {.name = "context",
                    .help = "Context lengths (default: 16, 64, 256, ... up to the model's positions, at most 4096)",
                    .unit = "tokens"});
    field(dtype, {.name = "dtype", .help = "The cache's storage (q8_0: llama.cpp's blocks of 32 int8 and a scale)"});
    field(report, {.name = "report",
                   .help = "Also write the measure as a Markdown report to share (the machine, the model, each "
                           "context, the longest context that fits): its path",
                   .faces = kCommandLine,
                   .example = "kv-report.md"});
  }
};

struct ModelKvResult {
  std::string model;  // the path it was read from
  ModelConfig config;
  CacheType dtype = CacheType::f32;
  std::vector<std::uint64_t> contexts;
  std::vector<ModelKvPoint> points;
  std::uint64_t weight_bytes = 0;  // the weights in memory as stored (an f16 file's in f16)
  std::string weight_type;         // how they are stored: "F32", "F16", "Q4_K", ...
};
// The measure as Markdown, ready to paste: the machine, attnlab's version, the model and its
// shape, the cache's type, each context's formula and measured bytes, and the longest context
// this machine's available memory holds. Also the reply's "report".
std::string model_kv_report(const ModelKvResult& result);
ModelKvResult price_model_kv(const ModelDir& model, const ModelKvRequest& request);
void run_model_kv(const ModelDir& model, ModelKvResult& result);
// {"layers", "kv_heads", "heads", "head_dim", "dtype", "weights_bytes", "contexts": [{"tokens",
// "formula_bytes", "used_bytes", "reserved_bytes", "resident_bytes"}], "longest_context", "report"}.
nlohmann::json model_kv_json(const ModelKvResult& result);

// ---- model eval --------------------------------------------------------------------------

struct EvalRequest {
  static constexpr std::string_view kName = "model eval";
  static constexpr std::string_view kHelp = "Next-token loss on seeded repeated random sequences, heads ablated or not";
  static constexpr std::string_view kTasks[] = {"induction"};

  std::string task = "induction";
  HeadList ablate;
  std::uint64_t seed = 0;

  template <class Field>
  void for_each(Field&& field) {
    field(task, {.name = "task", .help = "The task", .choices = kTasks});
    field(ablate, {.name = "ablate", .help = "Heads L.H whose output is zeroed"});
    field(seed, {.name = "seed", .help = "Seed of the sequences"});
  }
};

struct EvalResult {
  HeadList ablate;
  std::uint64_t seed = 0;
  std::size_t sequences = 8, longest = 0, shortest = 0;  // [BOS, r_1..r_k, r_1..r_k], k from longest to shortest
  double loss_first_half = 0, loss_second_half = 0;
};
EvalResult price_eval(const ModelDir& model, const EvalRequest& request);
void run_eval(const ModelDir& model, EvalResult& result);
// {"loss_first_half", "loss_second_half", "ablated": ["L.H", ...]}.
nlohmann::json eval_json(const EvalResult& result);

// ---- model heads -------------------------------------------------------------------------

struct HeadsRequest {
  static constexpr std::string_view kName = "model heads";
  static constexpr std::string_view kHelp = "Score every head: previous-token, duplicate-token, induction, sink";

  TokenInput text;  // none (and no sequences): seeded repeated random sequences
  IdSequences sequences;
  std::uint64_t seed = 0;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text",
                 .help = "Score on this text (ids: on these token ids; neither: seeded repeated random sequences)"});
    field(sequences,
          {.name = "sequences", .help = "Score on these token-id sequences, averaged", .faces = kHttpApi | kPython});
    field(seed, {.name = "seed", .help = "Seed of the repeated random sequences"});
  }
};

struct HeadsResult {
  std::vector<std::vector<int>> sequences;
  bool given = false;  // the sequence is the request's text or ids
  std::vector<HeadScores> scores;
};
HeadsResult price_heads(const ModelDir& model, const HeadsRequest& request);
void run_heads(const ModelDir& model, HeadsResult& result);
// head_scores_json: {"heads": [{"layer", "head", "previous_token", "duplicate_token", "induction"}]}.
nlohmann::json heads_json(const HeadsResult& result);

// ---- the attribution family --------------------------------------------------------------

// How much attribution a face lets one request work out (the server's limits are smaller
// than the command's and Python's).
struct AttributionLimits {
  double max_numbers = double(1 << 22);  // a head's part per source token (L × H × n), the lens's cells ((L + 1) × n)
  double max_lens_work = double(1ull << 40);      // (L + 1) × n × vocabulary × d_model multiply-adds
  double max_weights = double(1ull << 28);        // a run's attention weights kept (L × H × n²)
  double max_circuit_work = 1e14;                 // model circuits' multiply-adds (circuits_work)
  double max_circuit_bytes = double(8ull << 30);  // and the bytes it holds (circuits_bytes)
  std::string_view elsewhere = "use fewer tokens";
};

// One prediction to explain, as attribute and verdict take it: the text, where, which token.
struct Prediction {
  TokenInput text;
  std::optional<std::uint64_t> position;
  TokenRef target, contrast;

  template <class Field>
  void for_each(Field&& field, bool text_required) {
    field(text, {.name = "text", .help = "The text (ids: token ids instead)", .required = text_required});
    field(position, {.name = "position", .help = "Where the prediction is made (default: the last token)"});
    field(target, {.name = "target", .help = "The token explained: its text or its id (default: the top prediction)"});
    field(contrast, {.name = "contrast", .help = "Explain target − this token's logit instead"});
  }
};

struct AttributeRequest : Prediction {
  static constexpr std::string_view kName = "model attribute";
  static constexpr std::string_view kHelp =
      "Direct logit attribution: each head's, MLP's and bias's part in the prediction, and each source token's";

  template <class Field>
  void for_each(Field&& field) {
    Prediction::for_each(field, true);
  }
};

struct AttributeResult {
  std::vector<int> ids;
  LogitTarget target;
  LogitAttribution attribution;
};
AttributeResult price_attribute(const ModelDir& model, const AttributeRequest& request,
                                const AttributionLimits& limits = {});
void run_attribute(const ModelDir& model, AttributeResult& result);
// attribution_json with "ids" and "tokens".
nlohmann::json attribute_json(const ModelDir& model, const AttributeResult& result);

struct LensRequest {
  static constexpr std::string_view kName = "model lens";
  static constexpr std::string_view kHelp =
      "The logit lens: the residual stream after each block read as if it were the last";

  TokenInput text;
  TokenRef target;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text", .help = "The text (ids: token ids instead)", .required = true});
    field(target, {.name = "target",
                   .help = "The token whose probability each cell shows: its text or its id (default: the model's "
                           "top prediction at the last position)"});
  }
};

struct LensResult {
  std::vector<int> ids;
  int target = -1;
  LogitLens lens;
};
LensResult price_lens(const ModelDir& model, const LensRequest& request, const AttributionLimits& limits = {});
void run_lens(const ModelDir& model, LensResult& result);
// lens_json with "ids" and "tokens".
nlohmann::json lens_result_json(const ModelDir& model, const LensResult& result);

// ---- model qk: why a head attends where it does ------------------------------------------

struct QkRequest {
  static constexpr std::string_view kName = "model qk";
  static constexpr std::string_view kHelp =
      "Why a head attends where it does: its score of a query on a key taken apart into pairs of stream parts "
      "(embedding, positions, earlier heads and MLPs, biases)";

  TokenInput text;
  HeadList head;
  std::optional<std::uint64_t> query, key;
  std::uint64_t top = 20;

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text", .help = "The text (ids: token ids instead)", .required = true});
    field(head, {.name = "head", .help = "The head, L.H", .max_items = 1, .required = true, .example = "1.0"});
    field(query, {.name = "query", .help = "The query's position (default: the last token)"});
    field(key, {.name = "key", .help = "The key's position (default: the key the head weighs most from the query)"});
    field(top, {.name = "top",
                .help = "How many pairs to list, the largest first (0: every pair); the rest are summed as one"});
  }
};

struct QkResult {
  std::vector<int> ids;
  HeadRef head;
  std::optional<std::size_t> query, key;  // as asked; the decomposition says which were used
  std::size_t top = 20;
  QkDecomposition decomposition;
};
QkResult price_qk(const ModelDir& model, const QkRequest& request, const AttributionLimits& limits = {});
void run_qk(const ModelDir& model, QkResult& result);
// {"ids", "tokens", "head": "L.H", "query", "key", "score", "weight", "rotary", "unrotated_score",
//  "parts": [{"query_side", "key_side", "score", "unrotated"}, ...] (the `top` largest, then
//  {"query_side": "rest", "key_side": "rest", ...} with the others' sum; they add up to score),
//  "query_sides": [{"name", "score"}], "key_sides": [...]}.
nlohmann::json qk_json(const ModelDir& model, const QkResult& result);

// ---- model circuits: every head's QK and OV circuits, and the composition between heads ----

struct CircuitsRequest {
  static constexpr std::string_view kName = "model circuits";
  static constexpr std::string_view kHelp =
      "Every head's QK and OV circuits (singular values, the OV copying score) and the Q-, K- and V-composition "
      "of every earlier head into every later one, beside random matrices of the same shapes";

  std::uint64_t singular_values = 8;
  std::uint64_t token_pairs = 0;
  std::uint64_t seed = 0;

  template <class Field>
  void for_each(Field&& field) {
    field(singular_values,
          {.name = "singular_values", .help = "How many of each circuit's singular values to give (0: all)"});
    field(token_pairs, {.name = "token_pairs",
                        .help = "How many of each head's largest QK-circuit entries on the token embeddings to list "
                                "(which query token matches which key token; 0: none, as it costs V² × d_k a head)",
                        .range = {0, 1000}});
    field(seed, {.name = "seed", .help = "Seed of the baseline's random matrices"});
  }
};

struct CircuitsResult {
  std::size_t singular_values = 8, token_pairs = 0;
  std::uint64_t seed = 0;
  Circuits circuits;
};
CircuitsResult price_circuits(const ModelDir& model, const CircuitsRequest& request,
                              const AttributionLimits& limits = {});
void run_circuits(const ModelDir& model, CircuitsResult& result,
                  const std::function<void(std::size_t, std::size_t)>& progress = {});
// {"heads": ["0.0", ...], "composition": {"q": M, "k": M, "v": M} (M[a][b]: heads[a] into heads[b],
//  null unless a's layer is below b's), "baseline": {"q", "k", "v"}, "ov_copying": [per head],
//  "qk_singular_values": [[...] per head], "ov_singular_values": [[...] per head], and with
//  token_pairs "qk_token_pairs": [[{"query", "key", "query_token", "key_token", "score"}] per head]}.
nlohmann::json circuits_json(const ModelDir& model, const CircuitsResult& result);

struct PatchRequest {
  static constexpr std::string_view kName = "model patch";
  static constexpr std::string_view kHelp =
      "Activation patching: which (layer, position), head and MLP restore the clean answer in the corrupted run";

  TokenInput clean, corrupt;
  TokenRef target, contrast;
  std::vector<std::string> path;

  template <class Field>
  void for_each(Field&& field) {
    field(clean, {.name = "clean", .help = "The clean run's text (clean_ids: its token ids)", .required = true});
    field(corrupt, {.name = "corrupt",
                    .help = "The corrupted run's text, as many tokens as the clean one (corrupt_ids: its token ids)",
                    .required = true});
    field(target, {.name = "target", .help = "The answer (default: the clean run's top prediction)"});
    field(contrast, {.name = "contrast", .help = "The other answer (default: the corrupted run's top prediction)"});
    field(path, {.name = "path",
                 .help = "Also a path: SENDER:RECEIVER:INPUT, the sender head's clean output fed only into the "
                         "receiver's q, k or v (e.g. 0.0:1.0:k)",
                 .max_items = 16,
                 .example = "0.0:1.0:k"});
  }
};

struct PatchResult {
  std::vector<int> clean, corrupt;
  int target = -1, contrast = -1;
  std::vector<PatchPath> paths;
  ResidualPatching patching;
};
PatchResult price_patch(const ModelDir& model, const PatchRequest& request);
void run_patch(const ModelDir& model, PatchResult& result, const Progress& progress = {});
// patching_json with "clean" and "corrupt": {"ids", "tokens"}.
nlohmann::json patch_json(const ModelDir& model, const PatchResult& result);

struct VerdictRequest : Prediction {
  static constexpr std::string_view kName = "model verdict";
  static constexpr std::string_view kHelp =
      "Every attribution measure (weights, rollout, ALTI, gradients) ranked against erasure and ablation";

  std::string texts;  // a file of texts, one per line
  std::uint64_t induction = 0;
  std::uint64_t seed = 0;
  std::uint64_t steps = VerdictOptions{}.steps;

  template <class Field>
  void for_each(Field&& field) {
    Prediction::for_each(field, false);  // the text, or texts or induction below
    field(texts, {.name = "texts",
                  .help = "A file of texts, one per line: the agreement's mean and spread over them (each explained "
                          "at its last token)",
                  .faces = kCommandLine | kPython});
    field(induction, {.name = "induction",
                      .help = "Instead of texts: this many of the induction task's seeded sequences [BOS, r, r], cut "
                              "before their last token",
                      .range = {0, 64}});
    field(seed, {.name = "seed", .help = "The induction sequences' seed"});
    field(steps, {.name = "steps", .help = "Integrated gradients' steps", .range = {1, 256}});
  }
};

struct VerdictResult {
  std::vector<std::vector<int>> runs;  // the one text, or each of the many
  bool many = false;                   // texts or induction: the agreement's spread over them
  VerdictOptions options;
  std::vector<Verdict> verdicts;
};
VerdictResult price_verdict(const ModelDir& model, const VerdictRequest& request);
void run_verdict(const ModelDir& model, VerdictResult& result, const Progress& progress = {});
// One text: verdict_json with "ids" and "tokens"; many: {"texts": [each], "agreements": [spread]}.
nlohmann::json verdict_result_json(const ModelDir& model, const VerdictResult& result);

// ---- any of them by name -----------------------------------------------------------------

// Reads `body` as `face` gives it for model operation `name` (model generate, model kv, model
// eval, model heads, model attribute, model lens, model patch, model verdict), prices it,
// runs it on `model` and returns its reply. InputError naming the field, or "operation".
nlohmann::json run_model_operation(std::string_view name, const ModelDir& model, const nlohmann::json& body, Face face);

}  // namespace attnlab
