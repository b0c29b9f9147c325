// The operations on a loaded model: one check, one entry and one reply each, for every face
// (operations/model.hpp).
#include "attnlab/operations/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "attnlab/analysis/attribution_json.hpp"
#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/selective_decoder.hpp"
#include "attnlab/model/train_run.hpp"
#include "attnlab/operations/evict.hpp"
#include "attnlab/operations/generate.hpp"
#include "attnlab/operations/survey.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

json ids_and_tokens(const ModelDir& m, const std::vector<int>& ids) {
  return {{"ids", ids}, {"tokens", token_texts(m, ids)}};
}

}  // namespace

// ---- tokens ----------------------------------------------------------------------------------

TokenText texts_of(const ModelDir& m) {
  return [&m](int id) { return token_texts(m, {id})[0]; };
}

std::vector<int> token_ids(const ModelDir& m, const TokenInput& tokens, std::string_view field) {
  const ModelConfig& c = m.model.config;
  const auto within_positions = [&](std::vector<int> ids, std::string_view named) {
    if (ids.size() > c.n_positions)
      fail(named,
           fmt::format("{} tokens is more than the model's {} positions; give fewer", ids.size(), c.n_positions));
    return ids;
  };
  if (tokens.text) {
    if (!m.tokenizer)
      fail(field, fmt::format("this model has no tokenizer (tokenizer.json, or vocab.json and merges.txt); give {} "
                              "instead",
                              ids_key(field)));
    std::vector<int> ids;
    try {
      ids = encode_text(m, *tokens.text);
    } catch (const InputError& e) {
      throw e.renamed(field);
    }
    if (ids.empty()) fail(field, "no tokens; give some text");
    return within_positions(std::move(ids), field);
  }
  const std::string ids_field = ids_key(field);
  if (!tokens.ids) fail(field, fmt::format("missing; give {} or {}", field, ids_field));
  if (tokens.ids->empty()) fail(ids_field, "no tokens; give at least one id");
  for (std::size_t k = 0; k < tokens.ids->size(); ++k)
    check_token_id(c, (*tokens.ids)[k], fmt::format("{}[{}]", ids_field, k));
  return within_positions(*tokens.ids, ids_field);
}

int token_id(const ModelDir& m, const TokenRef& token, std::string_view field) {
  if (token.id) {
    if (*token.id >= m.model.config.vocab_size)
      fail(field,
           fmt::format("token id {} is outside the vocabulary (0 to {})", *token.id, m.model.config.vocab_size - 1));
    return static_cast<int>(*token.id);
  }
  if (!token.text) return -1;
  if (!m.tokenizer) fail(field, "the model has no tokenizer to read a token's text with; give its id");
  const std::vector<TokenId> ids = m.tokenizer->encode(*token.text);
  if (ids.size() != 1)
    fail(field, fmt::format("\"{}\" is {} tokens, not one; give one token's text (a leading space is part of it, "
                            "e.g. \" Paris\") or its id",
                            text_excerpt(*token.text, 40), ids.size()));
  return static_cast<int>(ids[0]);
}

// ---- model info, model tokenize, model export -------------------------------------------------

namespace {

// A tensor's kind: its name without the layer ("blk.3.attn_q.weight" -> "attn_q.weight",
// "model.layers.3.mlp.up_proj.weight" -> "mlp.up_proj.weight"), so that a model's 200 tensors
// read as a dozen kinds.
std::string tensor_kind(std::string_view name) {
  for (std::string_view layers : {"blk.", "model.layers.", "layers.", "transformer.h.", "h."})
    if (name.starts_with(layers)) {
      const std::size_t dot = name.find('.', layers.size());
      const std::string_view number = name.substr(layers.size(), dot - layers.size());
      if (dot != std::string_view::npos && !number.empty() &&
          number.find_first_not_of("0123456789") == std::string_view::npos)
        return std::string(name.substr(dot + 1));
    }
  return std::string(name);
}

}  // namespace

InfoResult run_info(const ModelDir& m) {
  InfoResult result{checkpoint_summary(m.dir), {}, m.model.weight_bytes(), m.model.config.parameters() * sizeof(float)};
  for (const CheckpointTensor& t : result.file.tensors) {
    const std::string kind = tensor_kind(t.name);
    auto it =
        std::find_if(result.kinds.begin(), result.kinds.end(), [&](const TensorKind& k) { return k.kind == kind; });
    if (it == result.kinds.end()) it = result.kinds.insert(result.kinds.end(), TensorKind{kind});
    ++it->types[std::string(ggml_type_name(t.type))];
    ++it->count;
    it->bytes += t.bytes;
  }
  return result;
}

json info_json(const ModelDir& m, const InfoResult& result) {
  const CheckpointSummary& file = result.file;
  json tensors = json::array(), kinds = json::array();
  for (const CheckpointTensor& t : file.tensors)
    tensors.push_back({{"name", t.name}, {"type", ggml_type_name(t.type)}, {"shape", t.shape}, {"bytes", t.bytes}});
  for (const TensorKind& k : result.kinds)
    kinds.push_back({{"kind", k.kind}, {"types", k.types}, {"tensors", k.count}, {"bytes", k.bytes}});
  json out = config_json(m.model.config);
  out["format"] = file.format;
  if (!file.architecture.empty()) out["architecture"] = file.architecture;
  out["file_bytes"] = file.bytes;
  out["files"] = file.files;
  out["dtype"] = dtype_name(m.model.stored_dtype);
  out["stored_type"] = ggml_type_name(m.model.stored_type);
  out["weight_bytes"] = result.weight_bytes;
  out["f32_bytes"] = result.f32_bytes;
  out["tokenizer"] = m.tokenizer.has_value();
  out["tensor_kinds"] = std::move(kinds);
  out["tensors"] = std::move(tensors);
  return out;
}

std::vector<int> run_tokenize(const ModelDir& m, const TokenizeRequest& r) { return encode_text(m, r.text); }

json tokenize_json(const ModelDir& m, const std::vector<int>& ids) {
  json out = {{"ids", ids}};
  add_tokens_json(out, m, ids);
  return out;
}

ExportResult price_export(const ModelDir& m, const ExportRequest& r) {
  std::error_code error;  // equivalent() is false, with an error, when the file does not exist yet
  if (std::filesystem::equivalent(resolve_model_path(m.dir), r.gguf, error))
    fail("gguf", "is the model being read; write to another file");
  // The writer holds every tensor widened to f32 until the file is written.
  require_available_memory(m.model.config.parameters() * sizeof(float), "gguf", "the weights widened to f32",
                           "export a smaller model, or free memory");
  return {r.gguf, r.type == "f32" ? GgmlType::f32 : r.type == "q8_0" ? GgmlType::q8_0 : GgmlType::f16, {}};
}

void run_export(const ModelDir& m, ExportResult& result) {
  result.written = save_gguf(result.file, m.model, result.type, resolve_model_path(m.dir));
}

json export_json(const ExportResult& result) {
  return {{"file", result.file},
          {"bytes", result.written.bytes},
          {"tensors", result.written.tensors},
          {"type", ggml_type_name(result.type)},
          {"kept_f16", result.written.kept_f16},
          {"tokenizer", result.written.tokenizer}};
}

// ---- model run -------------------------------------------------------------------------------

RunPlan price_run(const ModelDir& m, const RunRequest& r, double max_sparse_numbers) {
  const ModelConfig& c = m.model.config;
  RunPlan plan;
  plan.ids = token_ids(m, r.text, "text");
  plan.top_k = r.top_k;
  plan.options.ablate = r.ablate;
  for (std::size_t k = 0; k < r.ablate.size(); ++k)
    check_head(c, r.ablate[k], fmt::format("ablate[{}]", k));
  if (r.layer.has_value() != r.head.has_value())
    fail(r.layer ? "head" : "layer", "give layer and head together (e.g. layer 5, head 1)");
  if (r.layer) {
    plan.head = HeadRef{*r.layer, *r.head};
    check_head(c, *plan.head, *r.layer >= c.n_layer ? "layer" : "head");
  }
  if (r.query) {
    if (!plan.head) fail("query", "is the position of a head explained; give layer and head too");
    if (*r.query >= plan.ids.size())
      fail("query", fmt::format("token {} does not exist; positions run from 0 to {}", *r.query, plan.ids.size() - 1));
    plan.query = *r.query;
  }
  plan.options.keep_attention =
      plan.head || std::find(r.capture.begin(), r.capture.end(), "attention") != r.capture.end();
  plan.options.keep_stream = std::find(r.capture.begin(), r.capture.end(), "stream") != r.capture.end();
  plan.options.logits = r.logits == "last" ? LogitRows::last : r.logits == "none" ? LogitRows::none : LogitRows::every;
  plan.options.sparse_top = r.sparse;
  const double sparse_numbers =
      double(c.n_layer) * double(c.n_head) * double(plan.ids.size()) * double(2 * r.sparse + 2);
  if (r.sparse && sparse_numbers > max_sparse_numbers)
    fail("sparse",
         fmt::format("{} layers × {} heads × {} tokens × (2 × {} + 2) is {:.3g} numbers, more than the {:.3g} "
                     "given here; use fewer keys a row or a shorter text",
                     c.n_layer, c.n_head, plan.ids.size(), r.sparse, sparse_numbers, max_sparse_numbers));
  return plan;
}

namespace {

// Appends a weight in [0, 1] rounded to 4 decimals, written as JSON writes the double
// nearest to it ("0.1234", "0.05", "0", "1"): millions of them, so without a formatter.
void append_rounded_weight(std::string& out, float w) {
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

// [layer][head][n][n]: each weight rounded to 4 decimals, or as the float it is.
void append_weights(std::string& out, const ForwardResult& r, std::size_t heads, WeightDigits digits) {
  const std::size_t n = r.n;
  out.reserve(out.size() + r.attention.size() * heads * n * n * (digits == WeightDigits::four ? 7 : 14));
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
          if (digits == WeightDigits::four)
            append_rounded_weight(out, row[j]);
          else
            out += json(row[j]).dump();
        }
        out += ']';
      }
      out += ']';
    }
    out += ']';
  }
  out += ']';
}

// The next-token distribution at the last position, as the reply writes it.
json last_top_k_json(const ModelDir& m, const ForwardResult& r, std::size_t k) {
  json out = json::array();
  for (const TokenProbability& t : top_k(r.logits_at(r.n - 1), k))
    out.push_back(candidate_json(m, t.id, t.probability));
  return out;
}

}  // namespace

namespace {

// {"top", "sink", "entropy" [L][H][n], "keys", "weights" [L][H][n][the keys the query sees, at most top]}.
json sparse_json(const SparseAttention& s, std::size_t heads, std::size_t n) {
  json sink = json::array(), entropy = json::array(), keys = json::array(), weights = json::array();
  for (std::size_t l = 0; l < s.keys.size(); ++l) {
    json layer_sink = json::array(), layer_entropy = json::array(), layer_keys = json::array(),
         layer_weights = json::array();
    for (std::size_t h = 0; h < heads; ++h) {
      layer_sink.push_back(std::vector<float>(s.sink[l].begin() + std::ptrdiff_t(h * n),
                                              s.sink[l].begin() + std::ptrdiff_t((h + 1) * n)));
      layer_entropy.push_back(std::vector<float>(s.entropy[l].begin() + std::ptrdiff_t(h * n),
                                                 s.entropy[l].begin() + std::ptrdiff_t((h + 1) * n)));
      json rows_keys = json::array(), rows_weights = json::array();
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<std::uint32_t> k;
        std::vector<float> w;
        for (std::size_t t = 0; t < s.top; ++t) {
          const std::size_t at = (h * n + i) * s.top + t;
          if (s.keys[l][at] == SparseAttention::none) break;
          k.push_back(s.keys[l][at]);
          w.push_back(s.weights[l][at]);
        }
        rows_keys.push_back(std::move(k));
        rows_weights.push_back(std::move(w));
      }
      layer_keys.push_back(std::move(rows_keys));
      layer_weights.push_back(std::move(rows_weights));
    }
    sink.push_back(std::move(layer_sink));
    entropy.push_back(std::move(layer_entropy));
    keys.push_back(std::move(layer_keys));
    weights.push_back(std::move(layer_weights));
  }
  return {{"top", s.top}, {"sink", sink}, {"entropy", entropy}, {"keys", keys}, {"weights", weights}};
}

}  // namespace

std::string run_json(const ModelDir& m, const RunPlan& plan, const ForwardResult& run, const ForwardResult* ablated,
                     bool with_weights, WeightDigits digits) {
  const ForwardResult& asked = ablated ? *ablated : run;
  const std::span<const float> last_logits = asked.logits_at(asked.n - 1);
  json reply = {
      {"ids", plan.ids},
      {"top_k", last_top_k_json(m, run, plan.top_k)},
      {"ablated", json::array()},
      {"top_k_ablated", nullptr},
      // The detectors on this text: from the weights the run kept, or from its sparse rows'
      // pass (as detect_heads scores each of its sequences).
      {"heads", !run.attention.empty() ? head_scores_json(score_heads(run, plan.ids))["heads"]
                : run.sparse.top       ? head_scores_json(head_scores_of(run.sparse, m.model.config.n_head))["heads"]
                                       : json()},
      {"last_logits", std::vector<float>(last_logits.begin(), last_logits.end())}};
  add_tokens_json(reply, m, plan.ids);
  if (run.sparse.top) reply["sparse"] = sparse_json(run.sparse, m.model.config.n_head, run.n);
  if (ablated) {
    for (const HeadRef& h : plan.options.ablate)
      reply["ablated"].push_back(to_string(h));
    reply["top_k_ablated"] = last_top_k_json(m, *ablated, plan.top_k);
  }
  // The weights go in as text: nlohmann::json would hold each of millions of numbers as a
  // node (GPT-2 small at 256 tokens has 9.4 million).
  std::string text = reply.dump();
  text.pop_back();  // the closing brace
  text += ",\"weights\":";
  if (with_weights)
    append_weights(text, run, m.model.config.n_head, digits);
  else
    text += "null";
  text += '}';
  return text;
}

// ---- model map -------------------------------------------------------------------------------

MapResult price_map(const ModelDir& m, const MapRequest& r) {
  const ModelConfig& c = m.model.config;
  MapResult result;
  result.ids = token_ids(m, r.text, "text");
  const std::size_t n = result.ids.size(), cells = r.cells;
  if (r.head.size() != 1) fail("head", fmt::format("give one head, L.H (got {})", r.head.size()));
  HeadMapWindow w{.head = r.head.front()};
  check_head(c, w.head, "head");
  for (const auto& [name, first] : {std::pair{"query", r.query}, {"key", r.key}})
    if (first && *first >= n) fail(name, fmt::format("{} is past the last token (positions 0 to {})", *first, n - 1));
  if (r.query || r.key) {  // a window, one weight a cell
    w.row0 = r.query.value_or(0), w.col0 = r.key.value_or(0);
    w.rows = std::min(cells, n - w.row0), w.cols = std::min(cells, n - w.col0);
  } else {  // the whole head, in blocks
    w.rows = w.cols = n;
    w.tile = (n + cells - 1) / cells;
  }
  // The forward runs to the head's layer and keeps nothing of n × n: its price is the model's
  // own positions' (token_ids checked n against them).
  result.options = {.logits = LogitRows::none, .head_map = w, .last_layer = w.head.layer};
  return result;
}

void run_map(const ModelDir& m, MapResult& result) {
  result.map = model_forward(m.model, result.ids, result.options).head_map;
}

json map_json(const ModelDir& m, const MapResult& result) {
  const HeadMap& map = result.map;
  const HeadMapWindow& w = map.window;
  const std::size_t down = w.cells_down(), across = w.cells_across();
  json weights = json::array(), query = json::array(), key = json::array();
  for (std::size_t i = 0; i < down; ++i) {
    json weights_row = json::array(), query_row = json::array(), key_row = json::array();
    for (std::size_t j = 0; j < across; ++j) {
      const std::size_t cell = i * across + j;
      const bool seen = map.query[cell] != HeadMap::none;
      weights_row.push_back(seen ? json(map.weights[cell]) : json(nullptr));
      query_row.push_back(seen ? json(map.query[cell]) : json(nullptr));
      key_row.push_back(seen ? json(map.key[cell]) : json(nullptr));
    }
    weights.push_back(std::move(weights_row));
    query.push_back(std::move(query_row));
    key.push_back(std::move(key_row));
  }
  json out = {{"ids", result.ids},
              {"head", to_string(w.head)},
              {"kv_head", m.model.config.kv_head_of(w.head.head)},
              {"tile", w.tile},
              {"row0", w.row0},
              {"col0", w.col0},
              {"rows", w.rows},
              {"cols", w.cols},
              {"weights", std::move(weights)},
              {"query", std::move(query)},
              {"key", std::move(key)}};
  add_tokens_json(out, m, result.ids);
  return out;
}

// ---- model kv --------------------------------------------------------------------------------

ModelKvResult price_model_kv(const ModelDir& m, const ModelKvRequest& r) {
  const ModelConfig& c = m.model.config;
  ModelKvResult result{
      m.dir, c, r.dtype, r.context, {}, m.model.weight_bytes(), std::string(ggml_type_name(m.model.stored_type))};
  if (result.contexts.empty()) {  // 16, 64, 256, ... up to the model's positions (at most 4096)
    for (std::uint64_t t = 16; t <= std::min<std::uint64_t>(c.n_positions, 4096); t *= 4)
      result.contexts.push_back(t);
    if (result.contexts.empty()) result.contexts.push_back(c.n_positions);
  }
  return result;  // measure_model_kv checks each context and the memory before it runs
}

void run_model_kv(const ModelDir& m, ModelKvResult& result) {
  result.points = measure_model_kv(m.model, result.contexts, result.dtype);
}

namespace {

// The longest context this machine holds now: the model's positions, or fewer where the
// available memory runs out first (0: unknown).
std::uint64_t longest_context(const ModelKvResult& r, std::uint64_t available) {
  if (available == 0) return 0;
  return std::min<std::uint64_t>(r.config.n_positions, available / cache_token_bytes(r.config, r.dtype));
}

}  // namespace

std::string model_kv_report(const ModelKvResult& r) {
  const ModelConfig& c = r.config;
  const MachineDescription machine = describe_machine();
  const std::uint64_t per_token = cache_token_bytes(c, r.dtype), weights = r.weight_bytes;
  std::string out = fmt::format("# The KV cache of {}, measured\n\n", r.model);
  out += fmt::format("- machine: {}, {} cores, {} memory ({} available)\n", machine.cpu, machine.cores,
                     format_bytes(machine.memory_bytes), format_bytes(machine.available_bytes));
  out += fmt::format("- attnlab {}\n", ATTNLAB_VERSION);
  out += fmt::format("- model: {}\n", describe(c));
  out += fmt::format("- weights: {} parameters, {} in memory as stored ({})\n", format_count(c.parameters()),
                     format_bytes(weights), r.weight_type);
  out += fmt::format("- cache: {}, 2 × {} layers × {} KV heads × a row of {} values in {} bytes = {} a token\n\n",
                     cache_type_name(r.dtype), c.n_layer, c.kv_heads(), c.head_dim(),
                     cache_row_bytes(r.dtype, c.head_dim()), format_bytes(per_token));
  out += "| context (tokens) | formula | measured (resident) | share of the weights |\n|---:|---:|---:|---:|\n";
  for (const ModelKvPoint& p : r.points)
    out += fmt::format("| {} | {} | {} | {:.1f}% |\n", format_count(p.tokens), format_bytes(p.formula_bytes),
                       p.resident_bytes ? format_bytes(p.resident_bytes) : std::string("unknown"),
                       100.0 * double(p.formula_bytes) / double(weights));
  const std::uint64_t longest = longest_context(r, machine.available_bytes);
  if (longest == 0)
    out += "\nThe longest context this machine holds: unknown (no MemAvailable in /proc/meminfo).\n";
  else if (longest == c.n_positions)
    out += fmt::format(
        "\nThe longest context this machine holds: the model's own {} positions (a cache of {}, "
        "within the {} available).\n",
        format_count(longest), format_bytes(longest * per_token), format_bytes(machine.available_bytes));
  else
    out += fmt::format(
        "\nThe longest context this machine holds: about {} tokens ({} available ÷ {} a token), short "
        "of the model's {} positions.\n",
        format_count(longest), format_bytes(machine.available_bytes), format_bytes(per_token),
        format_count(c.n_positions));
  out +=
      "\nMeasured with `attnlab model kv`: each context a seeded prompt through the decoder; the measured column is "
      "the resident memory the cache alone holds. Nothing was sent anywhere.\n";
  return out;
}

json model_kv_json(const ModelKvResult& result) {
  const ModelConfig& c = result.config;
  json rows = json::array();
  for (const ModelKvPoint& p : result.points)
    rows.push_back({{"tokens", p.tokens},
                    {"formula_bytes", p.formula_bytes},
                    {"used_bytes", p.used_bytes},
                    {"reserved_bytes", p.reserved_bytes},
                    {"resident_bytes", p.resident_bytes ? json(p.resident_bytes) : json(nullptr)}});
  return {{"layers", c.n_layer},
          {"kv_heads", c.kv_heads()},
          {"heads", c.n_head},
          {"head_dim", c.head_dim()},
          {"dtype", cache_type_name(result.dtype)},
          {"weights_bytes", result.weight_bytes},
          {"weights_type", result.weight_type},
          {"contexts", std::move(rows)},
          {"longest_context", longest_context(result, available_memory())},
          {"report", model_kv_report(result)}};
}

// ---- model eval ------------------------------------------------------------------------------

EvalResult price_eval(const ModelDir& m, const EvalRequest& r) {
  for (std::size_t k = 0; k < r.ablate.size(); ++k)
    check_head(m.model.config, r.ablate[k], fmt::format("ablate[{}]", k));
  EvalResult result{r.ablate, r.seed};
  // Repeated random sequences [BOS, r_1..r_k, r_1..r_k]: the first half can only be guessed,
  // the second half can be copied from the first by a model with induction heads.
  const auto sequences = default_detector_sequences(m.model.config, r.seed, result.sequences);
  result.longest = (sequences.front().size() - 1) / 2;
  result.shortest = (sequences.back().size() - 1) / 2;
  return result;
}

void run_eval(const ModelDir& m, EvalResult& result) {
  std::tie(result.loss_first_half, result.loss_second_half) =
      in_context_losses(m.model, result.seed, result.sequences, result.ablate);
}

json eval_json(const EvalResult& result) {
  return {{"loss_first_half", result.loss_first_half},
          {"loss_second_half", result.loss_second_half},
          {"ablated", field_json(result.ablate)}};
}

// ---- model heads -----------------------------------------------------------------------------

HeadsResult price_heads(const ModelDir& m, const HeadsRequest& r) {
  HeadsResult result;
  if (r.text.given() && !r.sequences.empty()) fail("sequences", "give text (or ids) or sequences, not both");
  result.given = r.text.given() || !r.sequences.empty();
  if (r.text.given()) result.sequences.push_back(token_ids(m, r.text, "text"));
  for (std::size_t k = 0; k < r.sequences.size(); ++k) {
    const std::vector<int>& ids = r.sequences[k];
    const std::string field = fmt::format("sequences[{}]", k);
    if (ids.empty() || ids.size() > m.model.config.n_positions)
      fail(field, fmt::format("{} tokens; give 1 to the model's {} positions", ids.size(), m.model.config.n_positions));
    for (std::size_t j = 0; j < ids.size(); ++j)
      check_token_id(m.model.config, ids[j], fmt::format("{}[{}]", field, j));
    result.sequences.push_back(ids);
  }
  if (!result.given) result.sequences = default_detector_sequences(m.model.config, r.seed);
  return result;
}

void run_heads(const ModelDir& m, HeadsResult& result) { result.scores = detect_heads(m.model, result.sequences); }

json heads_json(const HeadsResult& result) { return head_scores_json(result.scores); }

// ---- model attribute, model lens -------------------------------------------------------------

namespace {

// The numbers attribution works out over n tokens, against the limits.
void check_attribution_size(const ModelConfig& c, std::size_t n, const AttributionLimits& limits,
                            std::string_view field) {
  if (double(c.n_layer) * double(c.n_head) * double(n) > limits.max_numbers)
    fail(field, fmt::format("{} tokens × {} layers × {} heads is more per-source contributions than the {} worked "
                            "out here; {}",
                            n, c.n_layer, c.n_head, limits.max_numbers, limits.elsewhere));
}

void check_lens_size(const ModelConfig& c, std::size_t n, const AttributionLimits& limits, std::string_view field) {
  const double work = double(c.n_layer + 1) * double(n) * double(c.vocab_size) * double(c.n_embd);
  if (work > limits.max_lens_work || double(c.n_layer + 1) * double(n) > limits.max_numbers)
    fail(field, fmt::format("the lens over {} tokens is ({} layers + 1) × n × a vocabulary of {} × d_model {} = "
                            "{:.3g} multiply-adds, more than the {:.3g} done here; {}",
                            n, c.n_layer, c.vocab_size, c.n_embd, work, limits.max_lens_work, limits.elsewhere));
}

// A position asked for among n tokens.
void check_position(const std::optional<std::uint64_t>& position, std::size_t n) {
  if (position && *position >= n)
    fail("position", fmt::format("{} is past the last token (positions 0 to {})", *position, n - 1));
}

// The field that carries a token input's tokens, for a message about their number.
std::string tokens_field(const TokenInput& t, std::string_view name) {
  return t.ids ? ids_key(name) : std::string(name);
}

}  // namespace

AttributeResult price_attribute(const ModelDir& m, const AttributeRequest& r, const AttributionLimits& limits) {
  AttributeResult result;
  result.ids = token_ids(m, r.text, "text");
  check_position(r.position, result.ids.size());
  check_attribution_size(m.model.config, result.ids.size(), limits, tokens_field(r.text, "text"));
  result.target = {r.position, token_id(m, r.target, "target"), token_id(m, r.contrast, "contrast")};
  return result;
}

void run_attribute(const ModelDir& m, AttributeResult& result) {
  result.attribution = attribute_logit(m.model, result.ids, result.target);
}

json attribute_json(const ModelDir& m, const AttributeResult& result) {
  json out = attribution_json(result.attribution, m.model.config.n_head, texts_of(m));
  out.update(ids_and_tokens(m, result.ids));
  return out;
}

// ---- model qk --------------------------------------------------------------------------------

QkResult price_qk(const ModelDir& m, const QkRequest& r, const AttributionLimits& limits) {
  const ModelConfig& c = m.model.config;
  QkResult result;
  result.ids = token_ids(m, r.text, "text");
  const std::size_t n = result.ids.size();
  if (r.head.size() != 1) fail("head", fmt::format("give one head, L.H (got {})", r.head.size()));
  result.head = r.head.front();
  check_head(c, result.head, "head");
  if (r.query && *r.query >= n)
    fail("query", fmt::format("{} is past the last token (positions 0 to {})", *r.query, n - 1));
  const std::size_t query = r.query ? std::size_t(*r.query) : n - 1;
  if (r.key && *r.key > query)
    fail("key", fmt::format("{} is after the query {}: a causal head's query sees keys 0 to {}", *r.key, query, query));
  // The run keeps every head's weights and the stream: L × H × n² weights.
  const double weights = double(c.n_layer) * double(c.n_head) * double(n) * double(n);
  if (weights > limits.max_weights)
    fail(tokens_field(r.text, "text"),
         fmt::format("{} tokens keep {} layers × {} heads × n² = {:.3g} attention weights, more than the {:.3g} kept "
                     "here; {}",
                     n, c.n_layer, c.n_head, weights, limits.max_weights, limits.elsewhere));
  result.query = query;
  if (r.key) result.key = std::size_t(*r.key);
  result.top = r.top;
  return result;
}

void run_qk(const ModelDir& m, QkResult& result) {
  ForwardOptions keep;
  keep.keep_attention = true;
  keep.keep_stream = true;
  keep.logits = LogitRows::none;
  const ForwardResult run = model_forward(m.model, result.ids, keep);
  const std::size_t n = run.n, query = *result.query;
  std::size_t key = 0;
  if (result.key) {
    key = *result.key;
  } else {  // the key the head weighs most from this query
    const float* row = run.attention[result.head.layer].data() + (result.head.head * n + query) * n;
    key = std::size_t(std::max_element(row, row + query + 1) - row);
  }
  result.decomposition = qk_decomposition(m.model, result.ids, run, result.head, query, key);
}

json qk_json(const ModelDir& m, const QkResult& result) {
  const QkDecomposition& q = result.decomposition;
  json parts = json::array();
  double rest = 0, rest_unrotated = 0, unrotated = 0;
  for (std::size_t k = 0; k < q.pairs.size(); ++k) {
    const QkPair& p = q.pairs[k];
    unrotated += p.unrotated;
    if (result.top == 0 || k < result.top)
      parts.push_back(
          {{"query_side", p.query_side}, {"key_side", p.key_side}, {"score", p.score}, {"unrotated", p.unrotated}});
    else
      rest += p.score, rest_unrotated += p.unrotated;
  }
  if (result.top != 0 && q.pairs.size() > result.top)
    parts.push_back({{"query_side", "rest"},
                     {"key_side", "rest"},
                     {"score", rest},
                     {"unrotated", rest_unrotated},
                     {"pairs", q.pairs.size() - result.top}});
  const auto sides = [](const std::vector<QkSide>& list) {
    json out = json::array();
    for (const QkSide& s : list)
      out.push_back({{"name", s.name}, {"score", s.score}});
    return out;
  };
  json out = ids_and_tokens(m, result.ids);
  out.update({{"head", to_string(q.head)},
              {"query", q.query},
              {"key", q.key},
              {"score", q.score},
              {"weight", q.weight},
              {"rotary", q.rotary},
              {"unrotated_score", unrotated},
              {"parts", std::move(parts)},
              {"query_sides", sides(q.query_sides)},
              {"key_sides", sides(q.key_sides)}});
  return out;
}

// ---- model circuits --------------------------------------------------------------------------

CircuitsResult price_circuits(const ModelDir& m, const CircuitsRequest& r, const AttributionLimits& limits) {
  const ModelConfig& c = m.model.config;
  const double work = circuits_work(c, r.token_pairs);
  if (work > limits.max_circuit_work)
    fail("model", fmt::format("the circuits of {} layers × {} heads (d_model {}, d_k {}, vocabulary {}) are {:.3g} "
                              "multiply-adds, more than the {:.3g} done here; {}",
                              c.n_layer, c.n_head, c.n_embd, c.head_dim(), c.vocab_size, work, limits.max_circuit_work,
                              limits.elsewhere));
  if (c.head_dim() > c.n_embd)
    fail("model", fmt::format("head_dim {} is wider than d_model {}: the circuits' factors need d_k ≤ d_model",
                              c.head_dim(), c.n_embd));
  if (const double bytes = circuits_bytes(c); bytes > limits.max_circuit_bytes)
    fail("model", fmt::format("the circuits of {} layers × {} heads hold {:.3g} GiB of factors at once, more than the "
                              "{:.3g} GiB allowed here; {}",
                              c.n_layer, c.n_head, bytes / double(1ull << 30),
                              limits.max_circuit_bytes / double(1ull << 30), limits.elsewhere));
  return {r.singular_values, r.token_pairs, r.seed, {}};
}

void run_circuits(const ModelDir& m, CircuitsResult& result,
                  const std::function<void(std::size_t, std::size_t)>& progress) {
  result.circuits = model_circuits(m.model, result.seed, result.token_pairs, progress);
}

json circuits_json(const ModelDir& m, const CircuitsResult& result) {
  const Circuits& c = result.circuits;
  json heads = json::array();
  for (const HeadRef& h : c.heads)
    heads.push_back(to_string(h));
  const auto matrix = [](const std::vector<std::vector<double>>& m) {
    json out = json::array();
    for (const std::vector<double>& row : m) {
      json cells = json::array();
      for (double x : row)
        cells.push_back(std::isnan(x) ? json(nullptr) : json(x));
      out.push_back(std::move(cells));
    }
    return out;
  };
  const auto first = [&](const std::vector<std::vector<double>>& values) {
    json out = json::array();
    for (const std::vector<double>& v : values) {
      const std::size_t k = result.singular_values == 0 ? v.size() : std::min(v.size(), result.singular_values);
      out.push_back(std::vector<double>(v.begin(), v.begin() + std::ptrdiff_t(k)));
    }
    return out;
  };
  const TokenText token = texts_of(m);
  const auto token_pairs = [&](const std::vector<std::vector<TokenPair>>& per_head) {
    json out = json::array();
    for (const std::vector<TokenPair>& pairs : per_head) {
      json list = json::array();
      for (const TokenPair& p : pairs)
        list.push_back({{"query", p.query},
                        {"key", p.key},
                        {"query_token", token(p.query)},
                        {"key_token", token(p.key)},
                        {"score", p.score}});
      out.push_back(std::move(list));
    }
    return out;
  };
  return {{"heads", std::move(heads)},
          {"composition", {{"q", matrix(c.q)}, {"k", matrix(c.k)}, {"v", matrix(c.v)}}},
          {"baseline", {{"q", c.baseline_q}, {"k", c.baseline_k}, {"v", c.baseline_v}}},
          {"ov_copying", c.ov_copying},
          {"qk_singular_values", first(c.qk_singular)},
          {"ov_singular_values", first(c.ov_singular)},
          {"qk_token_pairs", token_pairs(c.qk_token_pairs)}};
}

LensResult price_lens(const ModelDir& m, const LensRequest& r, const AttributionLimits& limits) {
  LensResult result;
  result.ids = token_ids(m, r.text, "text");
  check_lens_size(m.model.config, result.ids.size(), limits, tokens_field(r.text, "text"));
  result.target = token_id(m, r.target, "target");
  return result;
}

void run_lens(const ModelDir& m, LensResult& result) { result.lens = logit_lens(m.model, result.ids, result.target); }

json lens_result_json(const ModelDir& m, const LensResult& result) {
  json out = lens_json(result.lens, texts_of(m));
  out.update(ids_and_tokens(m, result.ids));
  return out;
}

// ---- model patch -----------------------------------------------------------------------------

PatchResult price_patch(const ModelDir& m, const PatchRequest& r) {
  PatchResult result;
  result.clean = token_ids(m, r.clean, "clean");
  result.corrupt = token_ids(m, r.corrupt, "corrupt");
  if (result.corrupt.size() != result.clean.size())
    fail(tokens_field(r.corrupt, "corrupt"),
         fmt::format("is {} tokens and the clean run {}; patching compares the same positions, so give runs of the "
                     "same length in tokens",
                     result.corrupt.size(), result.clean.size()));
  result.target = token_id(m, r.target, "target");
  result.contrast = token_id(m, r.contrast, "contrast");
  for (std::size_t k = 0; k < r.path.size(); ++k)
    result.paths.push_back(parse_patch_path(r.path[k], m.model.config, fmt::format("path[{}]", k)));
  return result;
}

void run_patch(const ModelDir& m, PatchResult& result, const Progress& progress) {
  result.patching =
      patch_residual(m.model, result.clean, result.corrupt, result.target, result.contrast, progress, result.paths);
}

json patch_json(const ModelDir& m, const PatchResult& result) {
  json out = patching_json(result.patching, texts_of(m));
  out["clean"] = ids_and_tokens(m, result.clean);
  out["corrupt"] = ids_and_tokens(m, result.corrupt);
  return out;
}

// ---- model verdict ---------------------------------------------------------------------------

namespace {

// At most this many texts in a texts file (each priced on its own by the verdict), and bytes.
constexpr std::size_t kMaxVerdictTexts = 64, kMaxVerdictFileBytes = std::size_t{1} << 20;

// A file of texts, one per line (blank lines skipped), each through the model's tokenizer.
std::vector<std::vector<int>> texts_of_file(const ModelDir& m, const std::string& path) {
  const std::string file = read_file_within(path, kMaxVerdictFileBytes, "texts");
  std::vector<std::vector<int>> runs;
  for (std::size_t start = 0; start < file.size();) {
    const std::size_t end = std::min(file.find('\n', start), file.size());
    std::string line = file.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) runs.push_back(token_ids(m, {.text = line}, "texts"));
    if (runs.size() > kMaxVerdictTexts)
      fail("texts", fmt::format("{} has more than {} texts, the limit", path, kMaxVerdictTexts));
    start = end + 1;
  }
  if (runs.empty()) fail("texts", fmt::format("{} has no text; write one text per line", path));
  return runs;
}

}  // namespace

VerdictResult price_verdict(const ModelDir& m, const VerdictRequest& r) {
  VerdictResult result;
  result.options.steps = r.steps;
  result.options.target = {r.position, token_id(m, r.target, "target"), token_id(m, r.contrast, "contrast")};
  result.many = !r.texts.empty() || r.induction > 0;
  if (!result.many) {
    result.runs.push_back(token_ids(m, r.text, "text"));
    check_position(r.position, result.runs[0].size());
    return result;
  }
  const char* many = r.induction ? "induction" : "texts";
  if (!r.texts.empty() && r.induction) fail("induction", "give texts or induction, not both");
  if (r.text.given()) fail(many, fmt::format("give {} or one text (or ids), not both", many));
  if (r.position) fail("position", fmt::format("is for one text; with {} each is explained at its last token", many));
  if (r.induction) {
    // The trained model's task, [BOS, r, r], each cut before its last token: the prediction is in the repeat.
    for (std::vector<int> ids : default_detector_sequences(m.model.config, r.seed, r.induction)) {
      ids.pop_back();
      result.runs.push_back(std::move(ids));
    }
  } else {
    result.runs = texts_of_file(m, r.texts);
  }
  return result;
}

void run_verdict(const ModelDir& m, VerdictResult& result, const Progress& progress) {
  VerdictOptions options = result.options;
  options.progress = progress;
  for (std::size_t k = 0; k < result.runs.size(); ++k) {
    if (progress && result.many) progress("text", k, result.runs.size());
    result.verdicts.push_back(verdict(m.model, result.runs[k], options));
  }
  if (progress && result.many) progress("text", result.runs.size(), result.runs.size());
}

json verdict_result_json(const ModelDir& m, const VerdictResult& result) {
  const auto one = [&](std::size_t k) {
    const Verdict& v = result.verdicts[k];
    json out = verdict_json(v, texts_of(m));
    // The text as the verdict read it: cut after the position it explains.
    out.update(
        ids_and_tokens(m, std::vector<int>(result.runs[k].begin(), result.runs[k].begin() + std::ptrdiff_t(v.n))));
    return out;
  };
  if (!result.many) return one(0);
  json each = json::array();
  for (std::size_t k = 0; k < result.verdicts.size(); ++k)
    each.push_back(one(k));
  return {{"texts", std::move(each)}, {"agreements", spread_json(agreement_spread(result.verdicts))}};
}

// ---- any of them by name ---------------------------------------------------------------------

json run_model_operation(std::string_view name, const ModelDir& m, const json& body, Face face) {
  if (name == InfoRequest::kName) {
    (void)read_request<InfoRequest>(body, face);  // no fields: refuses any
    return info_json(m, run_info(m));
  }
  if (name == TokenizeRequest::kName)
    return tokenize_json(m, run_tokenize(m, read_request<TokenizeRequest>(body, face)));
  if (name == ExportRequest::kName) {
    ExportResult r = price_export(m, read_request<ExportRequest>(body, face));
    run_export(m, r);
    return export_json(r);
  }
  if (name == GenerateRequest::kName) {
    GenerateResult r = price_generate(m, read_request<GenerateRequest>(body, face));
    generate_tokens(m, r);
    return generate_json(m, r);
  }
  if (name == ModelKvRequest::kName) {
    ModelKvResult r = price_model_kv(m, read_request<ModelKvRequest>(body, face));
    run_model_kv(m, r);
    return model_kv_json(r);
  }
  if (name == EvictRequest::kName) {
    EvictResult r = price_evict(m, read_request<EvictRequest>(body, face));
    run_evict(m, r);
    return evict_json(r);
  }
  if (name == EvalRequest::kName) {
    EvalResult r = price_eval(m, read_request<EvalRequest>(body, face));
    run_eval(m, r);
    return eval_json(r);
  }
  if (name == HeadsRequest::kName) {
    HeadsResult r = price_heads(m, read_request<HeadsRequest>(body, face));
    run_heads(m, r);
    return heads_json(r);
  }
  if (name == AttributeRequest::kName) {
    AttributeResult r = price_attribute(m, read_request<AttributeRequest>(body, face));
    run_attribute(m, r);
    return attribute_json(m, r);
  }
  if (name == CircuitsRequest::kName) {
    CircuitsResult r = price_circuits(m, read_request<CircuitsRequest>(body, face));
    run_circuits(m, r);
    return circuits_json(m, r);
  }
  if (name == SurveyRequest::kName) {
    const SurveyRequest request = read_request<SurveyRequest>(body, face);
    const SurveyPlan plan = price_survey(m, request);
    const SurveyTotals totals = run_survey(m, plan, request.out);
    if (request.partial) return survey_partial_json(totals, plan.corpus_id);
    json survey = survey_json(m, plan, totals);
    if (request.html) write_survey_finder(*request.html, survey);
    return survey;
  }
  if (name == MapRequest::kName) {
    MapResult r = price_map(m, read_request<MapRequest>(body, face));
    run_map(m, r);
    return map_json(m, r);
  }
  if (name == QkRequest::kName) {
    QkResult r = price_qk(m, read_request<QkRequest>(body, face));
    run_qk(m, r);
    return qk_json(m, r);
  }
  if (name == LensRequest::kName) {
    LensResult r = price_lens(m, read_request<LensRequest>(body, face));
    run_lens(m, r);
    return lens_result_json(m, r);
  }
  if (name == PatchRequest::kName) {
    PatchResult r = price_patch(m, read_request<PatchRequest>(body, face));
    run_patch(m, r);
    return patch_json(m, r);
  }
  if (name == VerdictRequest::kName) {
    VerdictResult r = price_verdict(m, read_request<VerdictRequest>(body, face));
    run_verdict(m, r);
    return verdict_result_json(m, r);
  }
  fail("operation", fmt::format("\"{}\" is not an operation on a model", text_excerpt(name, 40)));
}

}  // namespace attnlab
