// `model survey` (operations/survey.hpp): the corpus priced and cut into windows, shards run or
// read back, merged, and written out.
#include "attnlab/operations/survey.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/core/embedded.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kDefaultWindow = 512;
constexpr std::size_t kTopTokens = 10;
// A head's sum for one token (HeadSurvey's query_tokens and key_tokens): a std::map node of a key
// and a TokenSums, 80 bytes, which glibc's malloc hands out as 96.
constexpr std::size_t kTokenSumBytes = 96;

// FNV-1a over 64 bits: the corpus's identity in a shard's file (not a security check: a shard
// read back is checked like any other input).
struct Digest {
  static constexpr std::uint64_t kPrime = 0x100000001b3ull;
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(std::uint64_t x) {
    for (int k = 0; k < 8; ++k)
      h = (h ^ ((x >> (8 * k)) & 0xff)) * kPrime;
  }
  void add(std::string_view s) {  // its length, then its bytes
    add(std::uint64_t(s.size()));
    for (char c : s)
      h = (h ^ static_cast<unsigned char>(c)) * kPrime;
  }
};

// The windows of a document of `length` tokens: [start, start + size).
std::vector<std::pair<std::size_t, std::size_t>> windows_of(std::size_t length, std::size_t window) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t start = 0; start < length; start += window)
    out.emplace_back(start, std::min(window, length - start));
  return out;
}

// Shard s's documents: [begin, end) of D, the shards as even as whole documents allow.
std::pair<std::size_t, std::size_t> shard_range(std::size_t documents, std::size_t shards, std::size_t s) {
  return {documents * s / shards, documents * (s + 1) / shards};
}

std::string fixed_text(Fixed x) {
  if (x == 0) return "0";
  const bool negative = x < 0;
  UnsignedFixed u = negative ? -static_cast<UnsignedFixed>(x) : static_cast<UnsignedFixed>(x);
  std::string digits;
  while (u > 0)
    digits.push_back(char('0' + int(u % 10))), u /= 10;
  if (negative) digits.push_back('-');
  return {digits.rbegin(), digits.rend()};
}

Fixed fixed_from(const json& j, const std::string& field) {
  if (!j.is_string()) fail(field, "expected a sum as a decimal string");
  const std::string& s = j.get_ref<const std::string&>();
  const bool negative = !s.empty() && s[0] == '-';
  // 33 digits: below 2^110, so that merging even 2^17 such sums stays inside 128 bits
  if (s.size() < 1u + negative || s.size() > 33u + negative ||
      s.find_first_not_of("0123456789", negative) != std::string::npos)
    fail(field, "expected a sum as a decimal string of at most 33 digits");
  Fixed x = 0;
  for (std::size_t k = negative; k < s.size(); ++k)
    x = x * 10 + (s[k] - '0');
  return negative ? -x : x;
}

SurveyTotals empty_totals(const ModelConfig& c) {
  SurveyTotals t;
  t.layers = c.n_layer, t.heads = c.n_head;
  t.per_head.resize(c.n_layer * c.n_head);
  return t;
}

std::string shard_file(const std::string& out, std::size_t s, std::size_t shards) {
  return (fs::path(out) / fmt::format("shard-{}-of-{}.json", s, shards)).string();
}

}  // namespace

SurveyPlan price_survey(const ModelDir& m, const SurveyRequest& r) {
  const ModelConfig& c = m.model.config;
  SurveyPlan plan;
  if (r.partial && r.html)
    fail("html",
         "a partial survey gives the sums to merge, not a survey to show; write the head finder where the "
         "parts are merged (Python's attnlab.survey(..., html=FILE)), or leave out partial");
  plan.texts = r.texts;
  plan.max_tokens = r.max_tokens ? std::size_t(*r.max_tokens) : std::min(kDefaultWindow, c.n_positions);
  if (plan.max_tokens > c.n_positions)
    fail("max_tokens", fmt::format("{} is more than the model's {} positions", plan.max_tokens, c.n_positions));
  // The documents read and checked; their texts are tokenized below, only those this plan runs.
  if (!r.documents.empty()) {  // given inline (the lab's): texts, as a file's lines are
    if (!m.tokenizer) fail("documents", "this model has no tokenizer; survey a file of {\"ids\": [...]} lines");
    plan.texts = fmt::format("{} documents", r.documents.size());
    for (std::size_t k = 0; k < r.documents.size(); ++k) {
      if (r.documents[k].empty())
        fail(fmt::format("documents[{}]", k), "is empty; give each document some text, or leave it out");
      plan.documents.push_back({.line = k + 1, .text = r.documents[k]});
    }
  } else if (!r.sequences.empty()) {
    plan.texts = fmt::format("{} sequences", r.sequences.size());
    for (std::size_t k = 0; k < r.sequences.size(); ++k) {
      if (r.sequences[k].empty())
        fail(fmt::format("sequences[{}]", k), "is empty; give each sequence at least one token id, or leave it out");
      for (std::size_t j = 0; j < r.sequences[k].size(); ++j)
        check_token_id(c, r.sequences[k][j], fmt::format("sequences[{}][{}]", k, j));
      plan.documents.push_back({k + 1, r.sequences[k]});
    }
  } else if (r.texts.empty()) {
    fail("texts",
         "give a file of texts (a document a line, or JSON Lines of {\"text\": ...} or {\"ids\": [...]}), "
         "or the documents themselves (the API's documents or sequences)");
  } else {
    plan.documents =
        read_corpus(m, r.texts, "texts", {}, r.skip_bad_lines ? &plan.skipped : nullptr, /*tokenize=*/false);
  }
  plan.shards = r.shards;
  if (plan.shards > plan.documents.size())
    fail("shards",
         fmt::format("{} shards of {} documents: at most one a document", plan.shards, plan.documents.size()));
  if (r.shard) {
    if (*r.shard >= plan.shards)
      fail("shard", fmt::format("{} is not one of the {} shards (0 to {})", *r.shard, plan.shards, plan.shards - 1));
    plan.shard = *r.shard;
  }
  // The model (its shape, its embedding's first and last rows: a retrained one differs, and its tokenizer), the
  // windows, the documents as given (texts or ids: a cluster's worker reads them all but tokenizes only its shard's).
  Digest digest;
  digest.add(describe(c));
  digest.add(std::uint64_t(c.parameters()));
  std::vector<float> row(c.n_embd);
  for (const std::size_t id : {std::size_t{0}, c.vocab_size - 1}) {
    m.model.wte.row(id, c.n_embd, row.data());
    for (const float x : row)
      digest.add(std::bit_cast<std::uint32_t>(x));
  }
  if (m.tokenizer)
    for (int id : encode_text(m, "The survey's digest: a tokenizer's ids of this, 0123456789 éß😀."))
      digest.add(std::uint64_t(id));
  digest.add(std::uint64_t(plan.max_tokens));
  for (const CorpusDocument& d : plan.documents) {
    digest.add(d.text);
    digest.add(std::uint64_t(d.ids.size()));
    for (int id : d.ids)
      digest.add(std::uint64_t(id));
  }
  plan.corpus_id = fmt::format("{:016x}", digest.h);
  // Tokenized and priced: every document, or only the shard's where one shard is asked for.
  const auto [begin, end] = plan.shard ? shard_range(plan.documents.size(), plan.shards, *plan.shard)
                                       : std::pair{std::size_t{0}, plan.documents.size()};
  const std::span<CorpusDocument> ours = std::span(plan.documents).subspan(begin, end - begin);
  tokenize_documents(m, ours);
  std::vector<bool> seen(c.vocab_size);
  for (const CorpusDocument& d : ours) {
    for (int id : d.ids)
      plan.distinct_tokens += !seen[id], seen[id] = true;
    for (const auto& [start, size] : windows_of(d.ids.size(), plan.max_tokens)) {
      plan.windows += 1, plan.tokens += size;
      // the forward's, and the survey's pass: per head its scores again and ~10 operations a weight
      plan.flops += forward_flops(c, size, LogitRows::none) +
                    double(c.n_layer * c.n_head) * double(size) * double(size + 1) / 2 * (2.0 * c.head_dim() + 10);
    }
  }
  // Memory: a window's forward, and every head's sums for each token it meets as a query and as a key (they grow
  // with the corpus's distinct tokens, up to the vocabulary; the examples are bounded and small beside them).
  plan.memory = forward_buffer_bytes(c, plan.max_tokens, LogitRows::none) +
                c.n_layer * c.n_head * 2 * plan.distinct_tokens * kTokenSumBytes;
  require_available_memory(
      plan.memory, "texts",
      fmt::format("the survey of {} distinct tokens (each head's sums a token, and a window's "
                  "forward)",
                  plan.distinct_tokens),
      "survey fewer documents at once, or on a machine with more memory (a cluster's workers hold only "
      "their shards' sums, but the merge holds them all)");
  return plan;
}

SurveyTotals survey_shard(const ModelDir& m, const SurveyPlan& plan, std::size_t shard,
                          const SurveyProgress& progress) {
  SurveyTotals totals = empty_totals(m.model.config);
  const auto [begin, end] = shard_range(plan.documents.size(), plan.shards, shard);
  for (std::size_t d = begin; d < end; ++d) {
    const std::vector<int>& ids = plan.documents[d].ids;
    const auto windows = windows_of(ids.size(), plan.max_tokens);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      const auto [start, size] = windows[w];
      SurveyWindow where{&totals, d, w, start};
      if (size >= 2)  // a window of one token has no row past its first
        (void)model_forward(m.model, std::span<const int>(ids).subspan(start, size),
                            {.logits = LogitRows::none, .survey = &where});
      totals.windows += 1, totals.tokens += size;
      if (progress) progress(w + 1 == windows.size() ? 1 : 0, size);  // a document done with its last window
    }
    if (windows.empty() && progress) progress(1, 0);  // a text of no tokens
    totals.documents += 1;
  }
  return totals;
}

SurveyTotals run_survey(const ModelDir& m, const SurveyPlan& plan, const std::optional<std::string>& out,
                        const SurveyProgress& progress) {
  if (out) {
    std::error_code error;
    fs::create_directories(*out, error);
    if (error) fail("out", fmt::format("cannot create the folder {}: {}", *out, error.message()));
  }
  SurveyTotals totals;
  for (std::size_t s = plan.shard.value_or(0); s < (plan.shard ? *plan.shard + 1 : plan.shards); ++s) {
    SurveyTotals part;
    bool done = false;
    const std::string file = out ? shard_file(*out, s, plan.shards) : "";
    if (out && fs::exists(file)) {  // finished by an earlier run: read back, if it is this survey's
      try {
        const json saved = json::parse(read_file_within(file, std::uintmax_t(1) << 30, "out"));
        if (saved.value("corpus", "") == plan.corpus_id) {
          part = survey_from_partial(saved, m, file);
          done = true;
        }
      } catch (const std::exception&) {  // unreadable or not this survey's: computed again
      }
    }
    if (done) {
      if (progress) {
        const auto [begin, end] = shard_range(plan.documents.size(), plan.shards, s);
        progress(end - begin, part.tokens);
      }
    } else {
      part = survey_shard(m, plan, s, [&](std::size_t documents, std::size_t tokens) {
        if (progress) progress(documents, tokens);
      });
      if (out) {  // written whole, then renamed: a shard file is complete or absent
        const std::string partial = file + ".partial";
        std::ofstream(partial) << survey_partial_json(part, plan.corpus_id).dump();
        std::error_code error;
        fs::rename(partial, file, error);
        if (error) fail("out", fmt::format("cannot write {}: {}", file, error.message()));
      }
    }
    merge_survey(totals, part);
  }
  if (totals.per_head.empty()) totals = empty_totals(m.model.config);
  return totals;
}

// ---- the sums as JSON ---------------------------------------------------------------------

namespace {

json example_partial(const SurveyExample& e) {
  return {{"document", e.document},
          {"window", e.window},
          {"position", e.position},
          {"start", e.window_start},
          {"activation", e.activation},
          {"hash", std::to_string(e.hash)},
          {"keys", e.keys},
          {"weights", e.weights},
          {"context", e.context},
          {"context_start", e.context_start}};
}

json token_sums_partial(const std::map<std::int32_t, TokenSums>& sums) {
  json out = json::array();
  for (const auto& [id, s] : sums)
    out.push_back({id, fixed_text(s.sum), s.count});
  return out;
}

}  // namespace

json survey_partial_json(const SurveyTotals& t, const std::string& corpus_id) {
  json heads = json::array();
  for (const HeadSurvey& h : t.per_head) {
    json histogram = json::array(), top = json::array(), tenths = json::array();
    for (const Fixed x : h.histogram)
      histogram.push_back(fixed_text(x));
    for (const SurveyExample& e : h.top)
      top.push_back(example_partial(e));
    for (const auto& tenth : h.tenths) {
      json list = json::array();
      for (const SurveyExample& e : tenth)
        list.push_back(example_partial(e));
      tenths.push_back(std::move(list));
    }
    heads.push_back({{"rows", h.rows},
                     {"induction_rows", h.induction_rows},
                     {"active_rows", h.active_rows},
                     {"previous_token", fixed_text(h.previous_token)},
                     {"self", fixed_text(h.self)},
                     {"sink", fixed_text(h.sink)},
                     {"induction", fixed_text(h.induction)},
                     {"entropy", fixed_text(h.entropy)},
                     {"distance", fixed_text(h.distance)},
                     {"distance_squared", fixed_text(h.distance_squared)},
                     {"histogram", std::move(histogram)},
                     {"top", std::move(top)},
                     {"tenths", std::move(tenths)},
                     {"query_tokens", token_sums_partial(h.query_tokens)},
                     {"key_tokens", token_sums_partial(h.key_tokens)}});
  }
  return {{"partial", 1},       {"corpus", corpus_id},         {"layers", t.layers},
          {"heads", t.heads},   {"documents", t.documents},    {"windows", t.windows},
          {"tokens", t.tokens}, {"per_head", std::move(heads)}};
}

namespace {

std::uint64_t count_from(const json& j, const std::string& field) {
  constexpr std::uint64_t kMost = std::uint64_t{1} << 48;  // merged counts stay far from 2^64
  if (!j.is_number_unsigned() || j.get<std::uint64_t>() > kMost)
    fail(field, fmt::format("expected a whole number from 0 to {}", kMost));
  return j.get<std::uint64_t>();
}

const json& member(const json& j, const char* key, const std::string& field) {
  if (!j.is_object() || !j.contains(key)) fail(field, fmt::format("missing \"{}\"", key));
  return j[key];
}

std::vector<SurveyExample> examples_from(const json& list, std::size_t limit, const ModelConfig& c,
                                         const SurveyLimits& limits, const std::string& field) {
  if (!list.is_array() || list.size() > limit)
    fail(field, fmt::format("expected a list of at most {} examples", limit));
  std::vector<SurveyExample> out;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string at = fmt::format("{}[{}]", field, k);
    const json& j = list[k];
    SurveyExample e;
    e.document = count_from(member(j, "document", at), at + ".document");
    e.window = count_from(member(j, "window", at), at + ".window");
    e.position = count_from(member(j, "position", at), at + ".position");
    e.window_start = count_from(member(j, "start", at), at + ".start");
    e.context_start = count_from(member(j, "context_start", at), at + ".context_start");
    const json& activation = member(j, "activation", at);
    if (!activation.is_number() || !(activation.get<double>() >= 0 && activation.get<double>() <= 1))
      fail(at + ".activation", "expected a weight from 0 to 1");
    e.activation = activation.get<double>();
    const json& hash = member(j, "hash", at);
    const std::string* digits = hash.is_string() ? &hash.get_ref<const std::string&>() : nullptr;
    const auto [end, error] = digits ? std::from_chars(digits->data(), digits->data() + digits->size(), e.hash)
                                     : std::from_chars_result{nullptr, std::errc::invalid_argument};
    if (!digits || error != std::errc() || end != digits->data() + digits->size())
      fail(at + ".hash", "expected a 64-bit hash as a decimal string");
    const json &keys = member(j, "keys", at), &weights = member(j, "weights", at), &context = member(j, "context", at);
    if (!keys.is_array() || !weights.is_array() || keys.size() != weights.size() || keys.size() > limits.example_keys)
      fail(at + ".keys", fmt::format("expected keys and weights, as many of each, at most {}", limits.example_keys));
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!keys[i].is_number_unsigned() || keys[i].get<std::uint64_t>() > e.position)
        fail(at + ".keys", "expected positions up to the example's own");
      if (!weights[i].is_number() || !(weights[i].get<double>() >= 0 && weights[i].get<double>() <= 1))
        fail(at + ".weights", "expected weights from 0 to 1");
      e.keys.push_back(keys[i].get<std::uint32_t>());
      e.weights.push_back(weights[i].get<float>());
    }
    if (!context.is_array() || context.size() > limits.context_before + limits.context_after + 1)
      fail(at + ".context", "expected the tokens around the example");
    for (const json& id : context) {
      if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (long long)c.vocab_size)
        fail(at + ".context", fmt::format("expected token ids of the model's vocabulary (0 to {})", c.vocab_size - 1));
      e.context.push_back(id.get<std::int32_t>());
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::map<std::int32_t, TokenSums> token_sums_from(const json& list, const ModelConfig& c, const std::string& field) {
  if (!list.is_array() || list.size() > c.vocab_size)
    fail(field, "expected at most a vocabulary's [id, sum, count] entries");
  std::map<std::int32_t, TokenSums> out;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const json& e = list[k];
    const std::string at = fmt::format("{}[{}]", field, k);
    if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer() || e[0].get<long long>() < 0 ||
        e[0].get<long long>() >= (long long)c.vocab_size)
      fail(at, "expected [token id, sum, count]");
    const std::int32_t id = e[0].get<std::int32_t>();
    if (!out.empty() && id <= out.rbegin()->first) fail(at, "expected each token id once, ascending");
    out[id] = {fixed_from(e[1], at), count_from(e[2], at)};
  }
  return out;
}

}  // namespace

SurveyTotals survey_from_partial(const json& p, const ModelDir& m, std::string_view field_view) {
  const std::string field(field_view);
  const ModelConfig& c = m.model.config;
  // Compared as JSON, not read as an int: a number past int's range there is no crash.
  if (!p.is_object() || !p.contains("partial") || p.at("partial") != json(1))
    fail(field, "not a survey's partial sums (\"partial\": 1)");
  if (count_from(member(p, "layers", field), field + ".layers") != c.n_layer ||
      count_from(member(p, "heads", field), field + ".heads") != c.n_head)
    fail(field,
         fmt::format("the sums of a model of other layers or heads than this one's {} × {}", c.n_layer, c.n_head));
  SurveyTotals t = empty_totals(c);
  t.documents = count_from(member(p, "documents", field), field + ".documents");
  t.windows = count_from(member(p, "windows", field), field + ".windows");
  t.tokens = count_from(member(p, "tokens", field), field + ".tokens");
  const json& heads = member(p, "per_head", field);
  if (!heads.is_array() || heads.size() != t.per_head.size())
    fail(field + ".per_head", fmt::format("expected {} heads' sums", t.per_head.size()));
  for (std::size_t k = 0; k < heads.size(); ++k) {
    const std::string at = fmt::format("{}.per_head[{}]", field, k);
    const json& j = heads[k];
    HeadSurvey& h = t.per_head[k];
    h.rows = count_from(member(j, "rows", at), at + ".rows");
    h.induction_rows = count_from(member(j, "induction_rows", at), at + ".induction_rows");
    h.active_rows = count_from(member(j, "active_rows", at), at + ".active_rows");
    for (const auto& [name, sum] : {std::pair{"previous_token", &h.previous_token},
                                    {"self", &h.self},
                                    {"sink", &h.sink},
                                    {"induction", &h.induction},
                                    {"entropy", &h.entropy},
                                    {"distance", &h.distance},
                                    {"distance_squared", &h.distance_squared}})
      *sum = fixed_from(member(j, name, at), at + "." + name);
    const json& histogram = member(j, "histogram", at);
    if (!histogram.is_array() || histogram.size() != kSurveyDistanceBins)
      fail(at + ".histogram", fmt::format("expected {} bins", kSurveyDistanceBins));
    for (std::size_t b = 0; b < kSurveyDistanceBins; ++b)
      h.histogram[b] = fixed_from(histogram[b], at + ".histogram");
    h.top = examples_from(member(j, "top", at), t.limits.top_examples, c, t.limits, at + ".top");
    const json& tenths = member(j, "tenths", at);
    if (!tenths.is_array() || tenths.size() != 10) fail(at + ".tenths", "expected 10 lists");
    for (std::size_t b = 0; b < 10; ++b)
      h.tenths[b] = examples_from(tenths[b], t.limits.tenth_examples, c, t.limits, at + ".tenths");
    h.query_tokens = token_sums_from(member(j, "query_tokens", at), c, at + ".query_tokens");
    h.key_tokens = token_sums_from(member(j, "key_tokens", at), c, at + ".key_tokens");
  }
  return t;
}

SurveyTotals merge_survey_parts(const ModelDir& m, const SurveyPlan& plan, const json& parts,
                                std::string_view field_view) {
  const std::string field(field_view);
  if (!parts.is_array() || parts.size() != plan.shards)
    fail(field, fmt::format("expected the {} shards' sums, shard k's at k", plan.shards));
  SurveyTotals totals;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string at = fmt::format("{}[{}]", field, k);
    if (!parts[k].is_object() || parts[k].value("corpus", "") != plan.corpus_id)
      fail(at, "the sums of another corpus, model or window size than this survey's");
    merge_survey(totals, survey_from_partial(parts[k], m, at));
  }
  return totals;
}

// ---- the survey ---------------------------------------------------------------------------

namespace {

json top_tokens_json(const ModelDir& m, const std::map<std::int32_t, TokenSums>& sums) {
  std::vector<std::pair<std::int32_t, TokenSums>> order(sums.begin(), sums.end());
  const std::size_t keep = std::min(kTopTokens, order.size());
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), [](const auto& a, const auto& b) {
    return a.second.sum > b.second.sum || (a.second.sum == b.second.sum && a.first < b.first);
  });
  json out = json::array();
  for (std::size_t k = 0; k < keep; ++k) {
    const auto& [id, s] = order[k];
    out.push_back({{"id", id},
                   {"token", token_texts(m, {id})[0]},
                   {"total", from_fixed(s.sum)},
                   {"mean", s.count ? from_fixed(s.sum) / double(s.count) : 0.0},
                   {"count", s.count}});
  }
  return out;
}

json example_json(const ModelDir& m, const SurveyExample& e) {
  json keys = json::array();
  for (std::size_t k = 0; k < e.keys.size(); ++k) {
    const std::size_t at = e.keys[k] - e.context_start;
    keys.push_back({{"position", e.window_start + e.keys[k]},
                    {"token", at < e.context.size() ? json(token_texts(m, {e.context[at]})[0]) : json(nullptr)},
                    {"weight", e.weights[k]}});
  }
  const std::size_t query = e.position - e.context_start;
  return {{"document", e.document},
          {"window", e.window},
          {"position", e.window_start + e.position},
          {"activation", e.activation},
          {"token", query < e.context.size() ? json(token_texts(m, {e.context[query]})[0]) : json(nullptr)},
          {"keys", std::move(keys)},
          {"context", {{"start", e.window_start + e.context_start}, {"tokens", token_texts(m, e.context)}}}};
}

}  // namespace

json survey_json(const ModelDir& m, const SurveyPlan& plan, const SurveyTotals& t) {
  const ModelConfig& c = m.model.config;
  json heads = json::array(), skipped = json::array();
  for (const SkippedLine& s : plan.skipped)
    skipped.push_back({{"line", s.line}, {"error", s.error}});
  for (std::size_t k = 0; k < t.per_head.size(); ++k) {
    const HeadSurvey& h = t.per_head[k];
    const std::size_t layer = k / c.n_head, index = k % c.n_head;
    const auto mean = [&](Fixed sum, std::uint64_t rows) {
      return rows ? json(from_fixed(sum) / double(rows)) : json(nullptr);
    };
    const double rows = double(h.rows), distance = h.rows ? from_fixed(h.distance) / rows : 0.0;
    json histogram = json::array(), top = json::array(), tenths = json::array();
    for (std::size_t b = 0; b < kSurveyDistanceBins; ++b) {
      const std::uint64_t from = b == 0 ? 0 : std::uint64_t{1} << (b - 1),
                          to = b == 0 ? 0 : (std::uint64_t{1} << b) - 1;
      if (h.histogram[b] != 0 || b < 2)
        histogram.push_back({{"from", from}, {"to", to}, {"weight", mean(h.histogram[b], h.rows)}});
    }
    for (const SurveyExample& e : h.top)
      top.push_back(example_json(m, e));
    for (const auto& tenth : h.tenths) {
      json list = json::array();
      for (const SurveyExample& e : tenth)
        list.push_back(example_json(m, e));
      tenths.push_back(std::move(list));
    }
    heads.push_back(
        {{"head", fmt::format("{}.{}", layer, index)},
         {"layer", layer},
         {"index", index},
         {"kv_head", c.kv_head_of(index)},
         {"rows", h.rows},
         {"previous_token", mean(h.previous_token, h.rows)},
         {"self", mean(h.self, h.rows)},
         {"sink", mean(h.sink, h.rows)},
         {"induction", mean(h.induction, h.induction_rows)},
         {"induction_rows", h.induction_rows},
         {"entropy", mean(h.entropy, h.rows)},
         {"distance_mean", mean(h.distance, h.rows)},
         {"distance_variance",
          h.rows ? json(std::max(0.0, from_fixed(h.distance_squared) / rows - distance * distance)) : json(nullptr)},
         {"histogram", std::move(histogram)},
         {"active_rows", h.active_rows},
         {"top_query_tokens", top_tokens_json(m, h.query_tokens)},
         {"top_key_tokens", top_tokens_json(m, h.key_tokens)},
         {"examples", {{"top", std::move(top)}, {"tenths", std::move(tenths)}}}});
  }
  return {{"texts", plan.texts},           {"documents", t.documents},
          {"windows", t.windows},          {"tokens", t.tokens},
          {"max_tokens", plan.max_tokens}, {"shards", plan.shards},
          {"skipped", std::move(skipped)}, {"heads", std::move(heads)}};
}

std::string survey_finder_html(std::string_view page, const json& survey) {
  constexpr std::string_view kMarker = "/*SURVEY*/null";
  const std::size_t at = page.find(kMarker);
  if (at == std::string_view::npos) fail("html", "the head finder's page has no place for the survey (a build error)");
  // Inside <script>, "</" would end the element early: JSON may write "/" escaped.
  std::string data = survey.dump();
  for (std::size_t k = data.find("</"); k != std::string::npos; k = data.find("</", k + 3))
    data.replace(k, 2, "<\\/");
  return std::string(page.substr(0, at)) + data + std::string(page.substr(at + kMarker.size()));
}

std::vector<EmbeddedFile> survey_finder_files();  // generated: src/operations/CMakeLists.txt

void write_survey_finder(const std::string& path, const json& survey) {
  const std::string page = survey_finder_html(survey_finder_files().at(0).bytes, survey);
  std::ofstream out(path, std::ios::binary);
  out << page;
  if (!out.flush()) fail("html", fmt::format("cannot write {}: is its folder there, and writable?", path));
}

}  // namespace attnlab
