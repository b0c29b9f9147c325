// Writes and reads the input document (include/attnlab/report/input_document.hpp). The reading
// half is what the page's WebAssembly engine runs, so it raises through fail() (attnlab/core/error.hpp).
#include "attnlab/report/input_document.hpp"

#include <fmt/format.h>
#include <cmath>
#include <tuple>

#include "attnlab/core/error.hpp"
#include "attnlab/report/packed_reply.hpp"
#include "attnlab/report/trace_json.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// "rope": false, true (RoFormer's interleaved pairs at 10000^(−2i/d)), or a model's own
// {"pairs": "split-half" | "interleaved", "frequencies": [f_0, ...]}.
json rope_json(const std::optional<Rope>& rope) {
  if (!rope) return false;
  if (*rope == Rope{}) return true;
  json out = {{"pairs", rope->split_half ? "split-half" : "interleaved"}};
  if (!rope->frequencies.empty()) out["frequencies"] = rope->frequencies;
  return out;
}

}  // namespace

json input_document(const Scenario& scenario, const AttentionInput& input,
                    const std::function<json(const Matrix&)>& write_matrix) {
  json heads = json::array();
  for (const HeadWeights& h : input.heads)
    heads.push_back({{"name", h.name},
                     {"w_q", write_matrix(h.w_q)},
                     {"w_k", write_matrix(h.w_k)},
                     {"w_v", write_matrix(h.w_v)},
                     {"ablation", std::string(to_string(h.ablation))},
                     {"scale", h.scale},
                     {"b_q", h.b_q},
                     {"b_k", h.b_k},
                     {"b_v", h.b_v},
                     {"q_norm", h.q_norm},
                     {"k_norm", h.k_norm},
                     {"norm_epsilon", h.norm_epsilon}});
  return {{"scenario", scenario.name},
          {"tokens", scenario.tokens},
          {"source_tokens", scenario.source ? scenario.source->tokens : scenario.tokens},
          {"positions", describe(scenario.positions)},
          {"queries_from", write_matrix(input.queries_from)},
          {"keys_from", write_matrix(input.keys_from)},
          {"rope", rope_json(input.rope)},
          {"heads", heads},
          {"w_o", input.w_o ? write_matrix(*input.w_o) : json(nullptr)},
          {"causal", input.mask.causal},
          {"window", input.mask.window ? json(*input.mask.window) : json(nullptr)},
          {"mask_tokens", input.mask.hidden_keys},
          {"temperature", input.temperature},
          {"score_scale", input.score_scale}};
}

namespace {

[[noreturn]] void bad_field(std::string_view field, std::string_view message) {
  fail(fmt::format("input document: {}", field), message);
}

// object[name]; `at` is where object sits in the document ("" or "heads[2].").
const json& field(const json& object, const char* name, const std::string& at = "") {
  if (!object.is_object() || !object.contains(name)) bad_field(at + name, "missing");
  return object[name];
}

std::size_t index_of(const json& j, std::string_view name) {
  return read_count(j, fmt::format("input document: {}", name));
}

std::optional<Rope> read_rope(const json& j) {
  if (j.is_boolean()) return j.get<bool>() ? std::optional(Rope{}) : std::nullopt;
  if (!j.is_object()) bad_field("rope", "expected true, false or {\"pairs\", \"frequencies\"}");
  Rope rope;
  const json& pairs = field(j, "pairs", "rope.");
  if (pairs != "split-half" && pairs != "interleaved")
    bad_field("rope.pairs", "expected \"split-half\" or \"interleaved\"");
  rope.split_half = pairs == "split-half";
  if (j.contains("frequencies")) {
    const json& f = j["frequencies"];
    if (!f.is_array() || f.size() > kMaxWidth / 2) bad_field("rope.frequencies", "expected a list of numbers");
    for (const json& x : f) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || !(x.get<double>() > 0))
        bad_field("rope.frequencies", "each must be a finite number above 0");
      rope.frequencies.push_back(x.get<double>());
    }
  }
  return rope;
}

std::vector<std::string> strings(const json& j, const char* name) {
  if (!j.is_array()) bad_field(name, "expected a list of strings");
  std::vector<std::string> out;
  for (const json& s : j) {
    if (!s.is_string()) bad_field(name, fmt::format("{} is not a string", describe_json(s)));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// A matrix of `rows` × `cols` (0: any), every value finite.
Matrix finite_matrix(const PackedDocument& doc, const json& ref, const std::string& name, std::size_t rows,
                     std::size_t cols) {
  Matrix m = doc.matrix(ref, name);
  if ((rows && m.rows != rows) || (cols && m.cols != cols))
    bad_field(name, fmt::format("is {} × {}, expected {} × {}", m.rows, m.cols, rows ? std::to_string(rows) : "any",
                                cols ? std::to_string(cols) : "any"));
  for (double x : m.data)
    if (!std::isfinite(x)) bad_field(name, "holds a value that is not finite");
  return m;
}

}  // namespace

std::string attend_document(std::string_view packed_input) {
  const PackedDocument doc = read_packed(packed_input);
  const json& h = doc.header;
  AttentionInput in;
  const std::vector<std::string> tokens = strings(field(h, "tokens"), "tokens");
  const std::vector<std::string> source_tokens = strings(field(h, "source_tokens"), "source_tokens");
  const std::size_t n = tokens.size(), m = source_tokens.size();
  if (n == 0 || m == 0 || n > kMaxTokens || m > kMaxTokens)
    bad_field("tokens", fmt::format("{} queries and {} keys; each must be 1 to {}", n, m, kMaxTokens));
  in.queries_from = finite_matrix(doc, field(h, "queries_from"), "queries_from", n, 0);
  const std::size_t d_in = in.queries_from.cols;
  if (d_in == 0 || d_in > kMaxWidth)
    bad_field("queries_from", fmt::format("{} columns; d_in must be 1 to {}", d_in, kMaxWidth));
  in.keys_from = finite_matrix(doc, field(h, "keys_from"), "keys_from", m, d_in);
  in.rope = read_rope(field(h, "rope"));

  const json& heads = field(h, "heads");
  if (!heads.is_array() || heads.empty() || heads.size() > kMaxHeads)
    bad_field("heads", fmt::format("expected a list of 1 to {} heads", kMaxHeads));
  if (heads.size() * n * m > kMaxTraceCells)
    bad_field("heads", fmt::format("more than {} score cells", kMaxTraceCells));
  std::size_t sum_d_v = 0;
  for (std::size_t k = 0; k < heads.size(); ++k) {
    const json& spec = heads[k];
    const std::string at = fmt::format("heads[{}]", k);
    HeadWeights w;
    if (!field(spec, "name", at + ".").is_string()) bad_field(at + ".name", "expected a string");
    w.name = spec["name"];
    w.w_q = finite_matrix(doc, field(spec, "w_q", at + "."), at + ".w_q", d_in, 0);
    w.w_k = finite_matrix(doc, field(spec, "w_k", at + "."), at + ".w_k", d_in, w.w_q.cols);
    w.w_v = finite_matrix(doc, field(spec, "w_v", at + "."), at + ".w_v", d_in, 0);
    if (w.w_q.cols == 0 || w.w_v.cols == 0) bad_field(at, "d_k and d_v must be at least 1");
    if (in.rope && w.w_q.cols % 2 != 0) bad_field(at + ".w_q", "rope needs an even d_k");
    if (in.rope && in.rope->frequencies.size() > w.w_q.cols / 2)
      bad_field("rope.frequencies", "expected at most one frequency per pair of d_k");
    const json& ablation = field(spec, "ablation", at + ".");
    const auto kind = ablation.is_string() ? head_ablation_named(ablation.get<std::string>()) : std::nullopt;
    if (!kind) bad_field(at + ".ablation", "expected \"none\", \"zero\", \"mean\" or \"uniform\"");
    w.ablation = *kind;
    if (!field(spec, "scale", at + ".").is_number() || !std::isfinite(spec["scale"].get<double>()))
      bad_field(at + ".scale", "expected a finite number");
    w.scale = spec["scale"];
    // Biases and QK-norm weights: optional (older documents have none), a list of d_k (d_v)
    // numbers or empty.
    for (auto [key, bias, width] : {std::tuple{"b_q", &w.b_q, w.w_q.cols},
                                    {"b_k", &w.b_k, w.w_k.cols},
                                    {"b_v", &w.b_v, w.w_v.cols},
                                    {"q_norm", &w.q_norm, w.w_q.cols},
                                    {"k_norm", &w.k_norm, w.w_k.cols}}) {
      if (!spec.contains(key)) continue;
      const json& b = spec[key];
      if (!b.is_array() || (!b.empty() && b.size() != width))
        bad_field(at + "." + key, fmt::format("expected a list of {} numbers, or []", width));
      for (const json& x : b) {
        if (!x.is_number() || !std::isfinite(x.get<double>())) bad_field(at + "." + key, "expected finite numbers");
        bias->push_back(x.get<double>());
      }
    }
    if (spec.contains("norm_epsilon")) {
      const json& e = spec["norm_epsilon"];
      if (!e.is_number() || !(e.get<double>() > 0) || !(e.get<double>() <= 1))
        bad_field(at + ".norm_epsilon", "expected a number in (0, 1]");
      w.norm_epsilon = e;
    }
    sum_d_v += w.w_v.cols;
    in.heads.push_back(std::move(w));
  }
  if (!field(h, "w_o").is_null()) in.w_o = finite_matrix(doc, h["w_o"], "w_o", sum_d_v, 0);

  if (!field(h, "causal").is_boolean()) bad_field("causal", "expected true or false");
  in.mask.causal = h["causal"];
  if (!field(h, "window").is_null()) in.mask.window = index_of(h["window"], "window");
  const json& hidden = field(h, "mask_tokens");
  if (!hidden.is_array()) bad_field("mask_tokens", "expected a list of key indices");
  for (const json& j : hidden) {
    const std::size_t key = index_of(j, "mask_tokens");
    if (key >= m) bad_field("mask_tokens", fmt::format("key {} does not exist; keys run from 0 to {}", key, m - 1));
    in.mask.hidden_keys.push_back(key);
  }
  const json& t = field(h, "temperature");
  if (!t.is_number() || !(t.get<double>() > 0) || !std::isfinite(t.get<double>()))
    bad_field("temperature", fmt::format("{} is not a number > 0", describe_json(t)));
  in.temperature = t;
  if (h.contains("score_scale")) {  // optional: older documents scale by 1/√d_k
    const json& f = h["score_scale"];
    if (!f.is_number() || !(f.get<double>() >= 0) || !std::isfinite(f.get<double>()))
      bad_field("score_scale", fmt::format("{} is not a number >= 0", describe_json(f)));
    in.score_scale = f;
  }

  TraceJsonOptions written;
  if (h.contains("detail_heads")) {
    if (!h["detail_heads"].is_array()) bad_field("detail_heads", "expected a list of head indices");
    std::vector<std::size_t> keep;
    for (const json& j : h["detail_heads"]) {
      keep.push_back(index_of(j, "detail_heads"));
      if (keep.back() >= in.heads.size())
        bad_field("detail_heads",
                  fmt::format("head {} does not exist; heads run from 0 to {}", keep.back(), in.heads.size() - 1));
    }
    written.detail_heads = keep;
  }
  if (!field(h, "scenario").is_string() || !field(h, "positions").is_string())
    bad_field("scenario", "\"scenario\" and \"positions\" must be strings");

  Trace trace = attend(in);
  trace.tokens = tokens;
  trace.source_tokens = source_tokens;
  Scenario named;  // what trace_to_json reads besides the trace
  named.name = h["scenario"];
  named.mask = in.mask;
  named.temperature = in.temperature;
  named.score_scale = in.score_scale;
  if (in.rope) named.positions = {PositionKind::rope, 0.0, *in.rope};
  PackedArrays arrays;
  written.write_matrix = [&arrays](const Matrix& x) { return arrays.add(x); };
  json reply = trace_to_json(named, trace, written);
  reply["positions"] = h["positions"];
  reply["kernel"] = "reference";
  return pack_reply(reply, arrays);
}

}  // namespace attnlab
