// Scenario loading and validation. Everything a user types is checked here, once; the
// maths below this line may assume shapes chain and numbers are finite.
#include "attnlab/scenario/scenario.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <tuple>

#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/scenario/price.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

std::vector<std::string> as_tokens(const json& j, std::string_view field) {
  if (!j.is_array()) fail(field, fmt::format("expected a list of token strings but got {}", json_kind(j)));
  if (j.empty()) fail(field, "the token list is empty; give at least one token");
  if (j.size() > kMaxTokens)
    fail(field, fmt::format("{} tokens is more than the limit of {}; use a shorter sequence", j.size(), kMaxTokens));
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < j.size(); ++i)
    tokens.push_back(read_string(j[i], fmt::format("{}[{}]", field, i)));
  return tokens;
}

// A non-empty list of equally long rows of finite numbers.
Matrix as_matrix(const json& j, std::string_view field, std::size_t max_rows) {
  if (!j.is_array()) fail(field, fmt::format("expected a matrix (a list of rows) but got {}", json_kind(j)));
  if (j.empty()) fail(field, "the matrix has no rows");
  if (j.size() > max_rows) fail(field, fmt::format("{} rows is more than the limit of {}", j.size(), max_rows));
  const json& first = j[0];
  if (!first.is_array())
    fail(fmt::format("{}[0]", field), fmt::format("expected a row (a list of numbers) but got {}", json_kind(first)));
  const std::size_t cols = first.size();
  if (cols == 0) fail(fmt::format("{}[0]", field), "the row is empty");
  if (cols > kMaxWidth)
    fail(fmt::format("{}[0]", field), fmt::format("width {} is more than the limit of {}", cols, kMaxWidth));
  Matrix m(j.size(), cols);
  for (std::size_t r = 0; r < j.size(); ++r) {
    const std::string row_field = fmt::format("{}[{}]", field, r);
    const json& row = j[r];
    if (!row.is_array()) fail(row_field, fmt::format("expected a row (a list of numbers) but got {}", json_kind(row)));
    if (row.size() != cols)
      fail(row_field,
           fmt::format("ragged matrix: this row has {} numbers but row 0 has {}; every row needs the same length",
                       row.size(), cols));
    for (std::size_t c = 0; c < cols; ++c)
      m(r, c) = read_number(row[c], fmt::format("{}[{}]", row_field, c));
  }
  return m;
}

Positions as_positions(const json& j) {
  const auto kind_named = [](const std::string& name, std::string_view field) {
    if (name == "none") return PositionKind::none;
    if (name == "sinusoidal") return PositionKind::sinusoidal;
    if (name == "sincos-pair") return PositionKind::sincos_pair;
    if (name == "rope") return PositionKind::rope;
    fail(field, fmt::format("unknown kind \"{}\" (known: none, sinusoidal, sincos-pair, rope)", name));
  };
  Positions p;
  if (j.is_null()) return p;
  if (j.is_string()) {
    p.kind = kind_named(j.get<std::string>(), "positions");
    if (p.kind == PositionKind::sincos_pair)
      fail("positions", "sincos-pair needs a frequency: write {\"kind\": \"sincos-pair\", \"omega\": 0.5}");
    return p;
  }
  if (!j.is_object()) fail("positions", fmt::format("expected a string or an object but got {}", json_kind(j)));
  refuse_unknown_fields(j, {"kind", "omega", "pairs", "frequencies"}, "positions");
  if (!j.contains("kind")) fail("positions.kind", "missing; one of none, sinusoidal, sincos-pair, rope");
  p.kind = kind_named(read_string(j["kind"], "positions.kind"), "positions.kind");
  if (p.kind == PositionKind::sincos_pair) {
    if (!j.contains("omega")) fail("positions.omega", "missing; sincos-pair needs a frequency ω, e.g. 0.5");
    p.omega = read_number(j["omega"], "positions.omega");
  } else if (j.contains("omega")) {
    fail("positions.omega", "only sincos-pair takes a frequency");
  }
  if ((j.contains("pairs") || j.contains("frequencies")) && p.kind != PositionKind::rope)
    fail(j.contains("pairs") ? "positions.pairs" : "positions.frequencies", "only rope takes pairs and frequencies");
  if (j.contains("pairs")) {
    const std::string pairs = read_string(j["pairs"], "positions.pairs");
    if (pairs != "interleaved" && pairs != "split-half")
      fail("positions.pairs", fmt::format("\"{}\" is not a pairing; write \"interleaved\" ((2i, 2i+1), the default) "
                                          "or \"split-half\" ((i, i + d_k/2), as Llama-family models pair)",
                                          text_excerpt(pairs, 24)));
    p.rope.split_half = pairs == "split-half";
  }
  if (j.contains("frequencies")) {
    const json& f = j["frequencies"];
    if (!f.is_array() || f.empty() || f.size() > kMaxWidth / 2)
      fail("positions.frequencies", fmt::format("expected a list of 1 to {} numbers, one per pair", kMaxWidth / 2));
    for (std::size_t i = 0; i < f.size(); ++i) {
      const double x = read_number(f[i], fmt::format("positions.frequencies[{}]", i));
      if (!(x > 0) || !std::isfinite(x))
        fail(fmt::format("positions.frequencies[{}]", i), "a rotary frequency must be a finite number above 0");
      p.rope.frequencies.push_back(x);
    }
  }
  return p;
}

// A head's interventions, "ablation" and "scale" (docs/interventions.md).
void read_head_interventions(const json& j, const std::string& field, HeadSpec& head) {
  if (j.contains("ablation")) {
    const std::string name = read_string(j["ablation"], field + ".ablation");
    const auto kind = head_ablation_named(name);
    if (!kind)
      fail(field + ".ablation", fmt::format("unknown ablation \"{}\" (known: none, zero, mean, uniform)", name));
    head.ablation = *kind;
  }
  if (j.contains("scale")) head.scale = read_number(j["scale"], field + ".scale");
}

// A {"random": SEED} head's d_k and d_v: d_in unless given.
std::pair<std::size_t, std::size_t> random_head_widths(const json& j, const std::string& field, std::size_t d_in) {
  const auto width = [&](const char* key) -> std::size_t {
    if (!j.contains(key)) return d_in;
    const std::uint64_t w = read_count(j[key], fmt::format("{}.{}", field, key));
    if (w < 1 || w > kMaxWidth)
      fail(fmt::format("{}.{}", field, key), fmt::format("{} is outside 1..{}", w, kMaxWidth));
    return w;
  };
  return {width("d_k"), width("d_v")};
}

// The random heads' weights, priced together before any is drawn: they must fit
// `max_work_bytes`, and the first head that would pass it is named.
void price_random_heads(const json& heads, std::size_t d_in, std::uint64_t max_work_bytes) {
  std::uint64_t weight_numbers = 0;
  for (std::size_t h = 0; h < heads.size(); ++h)
    if (heads[h].is_object() && heads[h].contains("random")) {
      const std::string field = fmt::format("heads[{}]", h);
      const auto [d_k, d_v] = random_head_widths(heads[h], field, d_in);
      check_weights_to_draw(weight_numbers, head_weight_numbers(d_in, d_k, d_v), max_work_bytes, field);
      weight_numbers += head_weight_numbers(d_in, d_k, d_v);
    }
}

HeadSpec as_head(const json& j, std::size_t index, std::size_t d_in) {
  const std::string field = fmt::format("heads[{}]", index);
  if (!j.is_object())
    fail(field,
         fmt::format("expected an object with w_q, w_k, w_v (or {{\"random\": SEED}}) but got {}", json_kind(j)));
  HeadSpec head;
  head.name = j.contains("name") ? read_string(j["name"], field + ".name") : fmt::format("head {}", index);
  if (j.contains("random")) {
    refuse_unknown_fields(j, {"name", "random", "d_k", "d_v", "ablation", "scale"}, field);
    head.random_seed = read_count(j["random"], field + ".random");
    const auto [d_k, d_v] = random_head_widths(j, field, d_in);
    HeadSpec drawn = random_head(*head.random_seed, d_in, d_k, d_v);
    if (j.contains("name")) drawn.name = head.name;
    read_head_interventions(j, field, drawn);
    return drawn;
  }
  refuse_unknown_fields(
      j, {"name", "w_q", "w_k", "w_v", "b_q", "b_k", "b_v", "q_norm", "k_norm", "norm_epsilon", "ablation", "scale"},
      field);
  read_head_interventions(j, field, head);
  for (const char* key : {"w_q", "w_k", "w_v"})
    if (!j.contains(key))
      fail(fmt::format("{}.{}", field, key), "missing; a head needs w_q, w_k and w_v, or {\"random\": SEED}");
  head.w_q = as_matrix(j["w_q"], field + ".w_q", kMaxWidth + 2);
  head.w_k = as_matrix(j["w_k"], field + ".w_k", kMaxWidth + 2);
  head.w_v = as_matrix(j["w_v"], field + ".w_v", kMaxWidth + 2);
  // Optional biases, one row each: [b_1, ..., b_d].
  // Optional biases and QK-norm weights, one row each: [b_1, ..., b_d].
  for (auto [key, row_of] : {std::pair{"b_q", &head.b_q},
                             {"b_k", &head.b_k},
                             {"b_v", &head.b_v},
                             {"q_norm", &head.q_norm},
                             {"k_norm", &head.k_norm}})
    if (j.contains(key)) {
      const Matrix row = as_matrix(json::array({j[key]}), field + "." + key, 1);
      row_of->assign(row.data.begin(), row.data.end());
    }
  if (j.contains("norm_epsilon")) head.norm_epsilon = read_number(j["norm_epsilon"], field + ".norm_epsilon");
  return head;
}

ReadoutSpec as_readout(const json& j) {
  if (!j.is_object())
    fail("readout", fmt::format("expected {{\"matrix\": [[...]], \"labels\": [...]}} but got {}", json_kind(j)));
  refuse_unknown_fields(j, {"matrix", "labels"}, "readout");
  if (!j.contains("matrix")) fail("readout.matrix", "missing; give d_out rows, one column per class");
  ReadoutSpec r;
  r.matrix = as_matrix(j["matrix"], "readout.matrix", kMaxHeads * kMaxWidth);
  if (j.contains("labels")) {
    const json& labels = j["labels"];
    if (!labels.is_array())
      fail("readout.labels", fmt::format("expected a list of class names but got {}", json_kind(labels)));
    for (std::size_t k = 0; k < labels.size(); ++k)
      r.labels.push_back(read_string(labels[k], fmt::format("readout.labels[{}]", k)));
  } else {
    for (std::size_t k = 0; k < r.matrix.cols; ++k)
      r.labels.push_back(fmt::format("class {}", k));
  }
  return r;
}

std::vector<std::size_t> as_indices(const json& j, std::string_view field) {
  if (!j.is_array()) fail(field, fmt::format("expected a list of token indices but got {}", json_kind(j)));
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < j.size(); ++k)
    out.push_back(read_count(j[k], fmt::format("{}[{}]", field, k)));
  return out;
}

std::string input_rows_reason(const Scenario& s) {
  if (s.positions.kind == PositionKind::sincos_pair)
    return fmt::format("d_in = d_model {} + 2 for the sincos-pair positions", s.d_model());
  return "d_in = d_model";
}

}  // namespace

std::size_t Scenario::d_out() const {
  if (w_o) return w_o->cols;
  std::size_t total = 0;
  for (const HeadSpec& h : heads)
    total += h.w_v.cols;
  return total;
}

HeadSpec random_head(std::uint64_t seed, std::size_t d_in, std::size_t d_k, std::size_t d_v) {
  HeadSpec head{fmt::format("random (seed {})", seed), seed, Matrix(d_in, d_k), Matrix(d_in, d_k), Matrix(d_in, d_v)};
  SplitMix64 rng(seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_in));
  for (Matrix* w : {&head.w_q, &head.w_k, &head.w_v})
    for (double& x : w->data)
      x = rng.normal() * scale;
  return head;
}

void validate(const Scenario& s) {
  const std::size_t n = s.n(), m = s.m(), d_in = s.d_in();
  if (s.tokens.empty()) fail("tokens", "the token list is empty; give at least one token");
  if (n > kMaxTokens) fail("tokens", fmt::format("{} tokens is more than the limit of {}", n, kMaxTokens));
  if (s.embeddings.rows != n)
    fail("embeddings", fmt::format("expected {} rows (one per token) but got {}", n, s.embeddings.rows));
  if (s.source) {
    if (m > kMaxTokens) fail("source.tokens", fmt::format("{} tokens is more than the limit of {}", m, kMaxTokens));
    if (s.source->embeddings.rows != m)
      fail("source.embeddings",
           fmt::format("expected {} rows (one per source token) but got {}", m, s.source->embeddings.rows));
    if (s.source->embeddings.cols != s.d_model())
      fail("source.embeddings", fmt::format("expected width {} (d_model, as in embeddings) but got {}", s.d_model(),
                                            s.source->embeddings.cols));
  }
  if (s.heads.empty()) fail("heads", "no heads; give at least one head");
  if (s.heads.size() > kMaxHeads)
    fail("heads", fmt::format("{} heads is more than the limit of {}", s.heads.size(), kMaxHeads));
  if (s.heads.size() * n * m > kMaxTraceCells)
    fail(
        "heads",
        fmt::format("{} heads × {} × {} tokens is {} score cells, more than the limit of {}; use fewer heads or tokens",
                    s.heads.size(), n, m, s.heads.size() * n * m, kMaxTraceCells));
  std::size_t total_d_v = 0;
  for (std::size_t h = 0; h < s.heads.size(); ++h) {
    const HeadSpec& head = s.heads[h];
    const auto field = [&](const char* w) { return fmt::format("heads[{}].{}", h, w); };
    for (const auto& [w, matrix] : {std::pair{"w_q", &head.w_q}, {"w_k", &head.w_k}, {"w_v", &head.w_v}}) {
      if (matrix->rows != d_in)
        fail(field(w), fmt::format("expected {} rows ({}) but got {}", d_in, input_rows_reason(s), matrix->rows));
      if (matrix->cols > kMaxWidth)
        fail(field(w), fmt::format("width {} is more than the limit of {}", matrix->cols, kMaxWidth));
    }
    if (head.w_k.cols != head.w_q.cols)
      fail(field("w_k"), fmt::format("expected {} columns (d_k, as in w_q) but got {}", head.w_q.cols, head.w_k.cols));
    if (s.positions.kind == PositionKind::rope && head.w_q.cols % 2 != 0)
      fail(field("w_q"),
           fmt::format("rope rotates pairs of dimensions, so d_k must be even, but it is {}", head.w_q.cols));
    if (s.positions.kind == PositionKind::rope && s.positions.rope.frequencies.size() > head.w_q.cols / 2)
      fail("positions.frequencies",
           fmt::format("{} frequencies for heads of d_k {}: give one per pair, at most d_k / 2 = {} (fewer rotate "
                       "only the first pairs)",
                       s.positions.rope.frequencies.size(), head.w_q.cols, head.w_q.cols / 2));
    for (const auto& [b, bias, width] : {std::tuple{"b_q", &head.b_q, head.w_q.cols},
                                         {"b_k", &head.b_k, head.w_k.cols},
                                         {"b_v", &head.b_v, head.w_v.cols}})
      if (!bias->empty() && bias->size() != width)
        fail(field(b), fmt::format("expected {} numbers (the width of w_{}) but got {}", width, b[2], bias->size()));
    for (const auto& [name, gamma] : {std::pair{"q_norm", &head.q_norm}, {"k_norm", &head.k_norm}})
      if (!gamma->empty() && gamma->size() != head.w_q.cols)
        fail(field(name), fmt::format("expected {} numbers (d_k) but got {}", head.w_q.cols, gamma->size()));
    if (!(head.norm_epsilon > 0) || head.norm_epsilon > 1)
      fail(field("norm_epsilon"), fmt::format("{} is not in (0, 1]", head.norm_epsilon));
    total_d_v += head.w_v.cols;
  }
  if (s.w_o && s.w_o->rows != total_d_v)
    fail("w_o", fmt::format("expected {} rows (Σ d_v over the heads) but got {}", total_d_v, s.w_o->rows));
  for (std::size_t h = 0; h < s.heads.size(); ++h)
    if (!std::isfinite(s.heads[h].scale))
      fail(fmt::format("heads[{}].scale", h), fmt::format("{} is not a finite number", s.heads[h].scale));
  if (s.readout) {
    const ReadoutSpec& r = *s.readout;
    if (r.matrix.rows != s.d_out())
      fail("readout.matrix", fmt::format("expected {} rows (d_out: {}) but got {}", s.d_out(),
                                         s.w_o ? "the columns of w_o" : "Σ d_v over the heads", r.matrix.rows));
    if (r.labels.size() != r.matrix.cols)
      fail("readout.labels", fmt::format("expected {} labels (one per column of readout.matrix) but got {}",
                                         r.matrix.cols, r.labels.size()));
    for (std::size_t a = 0; a < r.labels.size(); ++a) {
      if (r.labels[a].empty()) fail(fmt::format("readout.labels[{}]", a), "a class label must not be empty");
      for (std::size_t b = 0; b < a; ++b)
        if (r.labels[a] == r.labels[b])
          fail(fmt::format("readout.labels[{}]", a),
               fmt::format("\"{}\" is also label {}; labels must differ", r.labels[a], b));
    }
  }
  if (s.mask.causal && n != m)
    fail("causal",
         fmt::format("a causal mask needs as many queries as keys, but there are {} queries and {} source tokens; "
                     "turn causal off for this cross-attention",
                     n, m));
  if (s.mask.window && *s.mask.window == 0)
    fail("window", "must be at least 1 (a window of w lets query i see |i - j| < w)");
  if (s.mask.window && *s.mask.window > kMaxTokens)
    fail("window", fmt::format("{} is more than the limit of {}; a window as long as the sequence hides nothing, so "
                               "leave the window out instead",
                               *s.mask.window, kMaxTokens));
  for (std::size_t k = 0; k < s.mask.hidden_keys.size(); ++k)
    if (s.mask.hidden_keys[k] >= m)
      fail(fmt::format("mask_tokens[{}]", k),
           fmt::format("token {} does not exist; key indices run from 0 to {}", s.mask.hidden_keys[k], m - 1));
  if (!std::isfinite(s.temperature) || s.temperature <= 0)
    fail("temperature", fmt::format("must be a finite number > 0 (e.g. 0.1 to 3) but is {}", s.temperature));
  if (!std::isfinite(s.score_scale) || s.score_scale < 0)
    fail("score_scale", fmt::format("must be a finite number > 0 (or 0 for 1/√d_k) but is {}", s.score_scale));
  if (s.query && *s.query >= n)
    fail("query", fmt::format("token {} does not exist; query indices run from 0 to {}", *s.query, n - 1));
  if (s.precision < 0 || s.precision > 12) fail("precision", fmt::format("must be 0 to 12 but is {}", s.precision));
}

Scenario scenario_from_json(const json& doc, std::uint64_t max_work_bytes) {
  if (!doc.is_object()) fail("scenario", fmt::format("expected a JSON object but got {}", json_kind(doc)));
  refuse_unknown_fields(
      doc,
      {"format", "name", "description", "notes", "tokens", "embeddings", "positions", "heads", "w_o", "source",
       "causal", "window", "mask_tokens", "temperature", "score_scale", "query", "precision", "readout"},
      "");
  if (!doc.contains("format")) fail("format", fmt::format("missing; add \"format\": \"{}\"", kScenarioFormat));
  if (const std::string format = read_string(doc["format"], "format"); format != kScenarioFormat)
    fail("format", fmt::format("\"{}\" is not a format this attnlab reads; expected \"{}\"", format, kScenarioFormat));
  for (const char* key : {"tokens", "embeddings", "heads"})
    if (!doc.contains(key)) fail(key, "missing; a scenario needs tokens, embeddings and heads");

  Scenario s;
  s.name = doc.contains("name") ? read_string(doc["name"], "name") : "scenario";
  if (doc.contains("description")) s.description = read_string(doc["description"], "description");
  if (doc.contains("notes")) s.notes = read_string(doc["notes"], "notes");
  s.tokens = as_tokens(doc["tokens"], "tokens");
  s.embeddings = as_matrix(doc["embeddings"], "embeddings", kMaxTokens);
  if (doc.contains("positions")) s.positions = as_positions(doc["positions"]);

  if (doc.contains("source") && !doc["source"].is_null()) {
    const json& src = doc["source"];
    if (!src.is_object())
      fail("source",
           fmt::format("expected {{\"tokens\": [...], \"embeddings\": [[...]]}} or null but got {}", json_kind(src)));
    refuse_unknown_fields(src, {"tokens", "embeddings"}, "source");
    for (const char* key : {"tokens", "embeddings"})
      if (!src.contains(key)) fail(fmt::format("source.{}", key), "missing; a source needs tokens and embeddings");
    s.source = SourceSequence{as_tokens(src["tokens"], "source.tokens"),
                              as_matrix(src["embeddings"], "source.embeddings", kMaxTokens)};
  }

  const json& heads = doc["heads"];
  if (!heads.is_array()) fail("heads", fmt::format("expected a list of heads but got {}", json_kind(heads)));
  if (heads.empty()) fail("heads", "no heads; give at least one head");
  if (heads.size() > kMaxHeads)
    fail("heads", fmt::format("{} heads is more than the limit of {}", heads.size(), kMaxHeads));
  price_random_heads(heads, s.d_in(), max_work_bytes);
  for (std::size_t h = 0; h < heads.size(); ++h)
    s.heads.push_back(as_head(heads[h], h, s.d_in()));

  if (doc.contains("w_o") && !doc["w_o"].is_null()) s.w_o = as_matrix(doc["w_o"], "w_o", kMaxHeads * kMaxWidth);
  if (doc.contains("causal")) s.mask.causal = read_flag(doc["causal"], "causal");
  if (doc.contains("window") && !doc["window"].is_null()) s.mask.window = read_count(doc["window"], "window");
  if (doc.contains("mask_tokens")) s.mask.hidden_keys = as_indices(doc["mask_tokens"], "mask_tokens");
  if (doc.contains("temperature")) s.temperature = read_number(doc["temperature"], "temperature");
  if (doc.contains("score_scale")) s.score_scale = read_number(doc["score_scale"], "score_scale");
  if (doc.contains("query") && !doc["query"].is_null()) s.query = read_count(doc["query"], "query");
  if (doc.contains("precision"))
    s.precision = static_cast<int>(std::min<std::uint64_t>(read_count(doc["precision"], "precision"), 99));
  if (doc.contains("readout") && !doc["readout"].is_null()) s.readout = as_readout(doc["readout"]);
  validate(s);
  check_work(s, max_work_bytes, "heads");
  return s;
}

Scenario parse_scenario(std::string_view text, std::string_view origin) {
  const json doc = parse_json_document(text, origin);
  try {
    return scenario_from_json(doc);
  } catch (const InputError& e) {
    throw e.field().empty() ? e.under(origin) : InputError(fmt::format("{}: {}", origin, e.field()), e.message());
  }
}

Scenario load_scenario(std::string_view name_or_path) {
  const std::vector<BundledScenario> bundled = bundled_scenarios();
  for (const BundledScenario& b : bundled)
    if (b.name == name_or_path) return parse_scenario(b.text, b.name + ".json");

  const bool looks_like_path = name_or_path.ends_with(".json") || name_or_path.find('/') != std::string_view::npos;
  if (!looks_like_path) {
    throw InputError(fmt::format("unknown scenario \"{}\"; the bundled ones are: {} (or give a path to a .json file)",
                                 name_or_path, fmt::join(bundled_scenario_names(), ", ")));
  }
  const std::string path(name_or_path);
  return parse_scenario(read_file_within(path, kMaxScenarioFileBytes, path), path);
}

void apply_overrides(Scenario& s, const Overrides& o) {
  if (o.causal) s.mask.causal = *o.causal;
  if (o.temperature) s.temperature = *o.temperature;
  if (o.window) s.mask.window = *o.window == 0 ? std::nullopt : o.window;
  for (std::size_t j : o.mask_tokens)
    if (std::find(s.mask.hidden_keys.begin(), s.mask.hidden_keys.end(), j) == s.mask.hidden_keys.end())
      s.mask.hidden_keys.push_back(j);
  if (o.query) s.query = o.query;
  validate(s);
}

std::vector<std::size_t> parse_permutation(std::string_view text, std::size_t n) {
  std::vector<std::size_t> order;
  std::string item;
  std::istringstream in{std::string(text)};
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    unsigned long value = 0;
    try {
      value = std::stoul(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || item[0] == '-')
      fail("permute", fmt::format("\"{}\" is not a token index; write the new order as old indices, e.g. 2,0,1", item));
    order.push_back(value);
  }
  check_permutation(order, n);
  return order;
}

void check_permutation(std::span<const std::size_t> order, std::size_t n) {
  if (order.size() != n)
    fail("permute",
         fmt::format("expected {} indices (one per token) but got {}; e.g. for 3 tokens: 2,0,1", n, order.size()));
  std::vector<bool> seen(n, false);
  for (std::size_t v : order) {
    if (v >= n) fail("permute", fmt::format("index {} does not exist; token indices run from 0 to {}", v, n - 1));
    if (seen[v]) fail("permute", fmt::format("index {} appears twice; each token must appear exactly once", v));
    seen[v] = true;
  }
}

Scenario permute_tokens(const Scenario& s, std::span<const std::size_t> order) {
  assert(order.size() == s.n());
  Scenario out = s;
  out.tokens.clear();
  for (std::size_t k : order)
    out.tokens.push_back(s.tokens[k]);
  out.embeddings = take_rows(s.embeddings, order);
  if (!s.source) {  // keys are the same tokens: masked key indices follow their tokens
    std::vector<std::size_t> new_index(order.size());
    for (std::size_t k = 0; k < order.size(); ++k)
      new_index[order[k]] = k;
    for (std::size_t& j : out.mask.hidden_keys)
      j = new_index[j];
  }
  if (s.query) out.query = std::find(order.begin(), order.end(), *s.query) - order.begin();
  return out;
}

AttentionInput attention_input(const Scenario& s) {
  AttentionInput input;
  input.queries_from = apply_positions(s.embeddings, s.positions);
  input.keys_from = s.source ? apply_positions(s.source->embeddings, s.positions) : input.queries_from;
  if (s.positions.kind == PositionKind::rope) input.rope = s.positions.rope;
  for (const HeadSpec& h : s.heads)
    input.heads.push_back(HeadWeights{h.name, h.w_q, h.w_k, h.w_v, h.ablation, h.scale, h.b_q, h.b_k, h.b_v, h.q_norm,
                                      h.k_norm, h.norm_epsilon});
  input.w_o = s.w_o;
  input.mask = s.mask;
  input.temperature = s.temperature;
  input.score_scale = s.score_scale;
  return input;
}

Trace run_scenario(const Scenario& s) {
  Trace trace = attend(attention_input(s));
  trace.tokens = s.tokens;
  trace.source_tokens = s.source ? s.source->tokens : s.tokens;
  check_finite(s, trace);
  return trace;
}

namespace {

bool all_finite(std::span<const double> values) {
  return std::all_of(values.begin(), values.end(), [](double x) { return std::isfinite(x); });
}

double largest_magnitude(std::span<const double> values) {
  double largest = 0.0;
  for (double x : values)
    largest = std::max(largest, std::abs(x));
  return largest;
}

}  // namespace

void check_finite(const Scenario& s, const Trace& trace) {
  const std::size_t n = s.n(), m = s.m();
  const Mask mask(s.mask, n, m);
  for (std::size_t h = 0; h < trace.heads.size(); ++h) {
    const HeadTrace& t = trace.heads[h];
    const HeadSpec& head = s.heads[h];
    // What the projections, the scores and the mix multiply: the larger numbers are named.
    const auto overflow = [&](std::string_view stage) {
      std::pair<std::string, double> culprit{"embeddings", largest_magnitude(s.embeddings.data)};
      if (s.source && largest_magnitude(s.source->embeddings.data) > culprit.second)
        culprit = {"source.embeddings", largest_magnitude(s.source->embeddings.data)};
      for (const auto& [name, w] : {std::pair{"w_q", &head.w_q}, {"w_k", &head.w_k}, {"w_v", &head.w_v}})
        if (largest_magnitude(w->data) > culprit.second)
          culprit = {fmt::format("heads[{}].{}", h, name), largest_magnitude(w->data)};
      fail(culprit.first, fmt::format("head {}'s {} overflow (the largest |number| here is {}); use smaller numbers", h,
                                      stage, culprit.second));
    };
    if (!all_finite(t.queries.data) || !all_finite(t.keys.data) || !all_finite(t.values.data))
      overflow("projections (queries, keys, values)");
    if (!all_finite(t.scores.data) || !all_finite(t.scaled.data)) overflow("scores");
    for (std::size_t i = 0; i < t.logits.rows; ++i)  // none from the tiled kernel, which keeps no grid
      for (std::size_t j = 0; j < t.logits.cols; ++j)
        if (mask.visible(i, j) && !std::isfinite(t.logits(i, j)))
          fail("temperature", fmt::format("{} makes head {}'s logits (scaled scores ÷ T, up to {} ÷ T) overflow a "
                                          "double; use a larger temperature, e.g. 0.01 or more",
                                          s.temperature, h, largest_magnitude(t.scaled.row(i))));
    if (!all_finite(t.mixed.data)) overflow("outputs (weights · values)");
    if (!all_finite(t.output.data)) {
      if (head.scale == 1.0) overflow("outputs (weights · values)");
      fail(fmt::format("heads[{}].scale", h),
           fmt::format("{} makes head {}'s output overflow; use a smaller factor", head.scale, h));
    }
  }
  if (!all_finite(trace.output.data))
    fail("w_o", fmt::format("the layer's output (the heads' outputs · W_O) overflows (the largest |number| of w_o is "
                            "{}); use smaller numbers",
                            s.w_o ? largest_magnitude(s.w_o->data) : 0.0));
}

}  // namespace attnlab
