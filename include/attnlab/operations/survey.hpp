// `model survey`, described once (operations/request.hpp): what every head does across a
// corpus (model/survey.hpp's sums), on one machine in shards that merge exactly, or on many
// (Python's attnlab.survey sends the shards to a Dask cluster). docs/survey.md.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/survey.hpp"
#include "attnlab/operations/corpus.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

struct SurveyRequest {
  static constexpr std::string_view kName = "model survey";
  static constexpr std::string_view kHelp =
      "What every head does across a corpus: its weight on the previous token, itself, the first token and "
      "induction's, entropy, query–key distances, the tokens that draw it and its top examples";

  std::string texts;
  std::vector<std::string> documents;
  IdSequences sequences;
  std::optional<std::uint64_t> max_tokens;
  std::uint64_t shards = 1;
  std::optional<std::uint64_t> shard;
  std::optional<std::string> out;
  bool skip_bad_lines = false;
  bool partial = false;
  std::optional<std::string> html;

  template <class Field>
  void for_each(Field&& field) {
    field(texts, {.name = "texts",
                  .help = "A file of texts: a document a line, or JSON Lines of {\"text\": ...} or {\"ids\": [...]}",
                  .faces = kCommandLine | kPython,
                  .positional = true});
    field(documents, {.name = "documents",
                      .help = "The documents themselves, a text each (instead of texts)",
                      .max_items = 10'000,
                      .faces = kHttpApi});
    field(sequences, {.name = "sequences",
                      .help = "The documents as token-id sequences (instead of texts)",
                      .max_items = 10'000,
                      .faces = kHttpApi});
    field(max_tokens, {.name = "max_tokens",
                       .help = "Each document cut into windows of at most N tokens (default: 512, or the model's "
                               "positions where fewer)",
                       .unit = "tokens",
                       .range = {2, 1u << 20}});
    field(shards, {.name = "shards",
                   .help = "The documents split into K shards, each surveyed alone and then merged: the same numbers "
                           "as one pass, bit for bit",
                   .range = {1, 1'000'000},
                   .faces = kCommandLine | kPython});
    field(shard, {.name = "shard",
                  .help = "Only shard S (0-based) of the K, its sums to merge (a cluster worker's part)",
                  .faces = kPython});
    field(out, {.name = "out",
                .help = "A folder: each finished shard is written there, and the same survey run again resumes from "
                        "them",
                .faces = kCommandLine | kPython});
    field(skip_bad_lines, {.name = "skip_bad_lines",
                           .help = "Leave out lines that are not documents (each listed with its line number) instead "
                                   "of refusing the file",
                           .faces = kCommandLine | kPython});
    field(html, {.name = "html",
                 .help = "Also write the head finder to this file: every head a point on two metrics, its examples "
                         "on a click; one page with the survey inside, which opens from disk with no server",
                 .faces = kCommandLine | kPython});
    field(partial, {.name = "partial",
                    .help = "The sums to merge (docs/survey.md) instead of the survey",
                    .faces = kCommandLine | kPython});
  }
};

// The corpus read and cut into windows, checked and priced before any work.
struct SurveyPlan {
  std::string texts, corpus_id;  // the file, and a digest of its bytes, the model and the windows
  std::size_t max_tokens = 512, shards = 1;
  std::optional<std::size_t> shard;
  std::vector<CorpusDocument> documents;  // every one, tokenized where the plan runs it (all, or its shard's)
  std::vector<SkippedLine> skipped;
  std::size_t windows = 0, tokens = 0;  // of the documents the plan runs
  double flops = 0;                     // the forwards' and the survey pass's
  std::size_t distinct_tokens = 0;      // different ids among them
  std::size_t memory = 0;               // bytes: a window's forward and every head's sums a distinct token
};
SurveyPlan price_survey(const ModelDir& model, const SurveyRequest& request);

// Progress: documents and tokens done of the plan's, from the shards run (or read back).
using SurveyProgress = std::function<void(std::size_t documents, std::size_t tokens)>;

// Shard s of the plan's K (its documents a contiguous range), surveyed.
SurveyTotals survey_shard(const ModelDir& model, const SurveyPlan& plan, std::size_t shard,
                          const SurveyProgress& progress = {});
// Every shard (or the plan's one), each read back from `out` where an earlier run finished it
// and written there when `out` is given; merged.
SurveyTotals run_survey(const ModelDir& model, const SurveyPlan& plan, const std::optional<std::string>& out,
                        const SurveyProgress& progress = {});

// The sums as JSON, to merge elsewhere: {"partial": 1, "corpus", "layers", "heads", "documents",
// "windows", "tokens", "limits", "per_head": [...]}, every sum a decimal string (128-bit fixed
// point), and back (checked: a cluster's message is untrusted).
nlohmann::json survey_partial_json(const SurveyTotals& totals, const std::string& corpus_id);
SurveyTotals survey_from_partial(const nlohmann::json& partial, const ModelDir& model, std::string_view field);

// The plan's shards' partial sums (`parts` [K], shard k's at k, each checked as untrusted input
// and against the plan's corpus) merged: what run_survey gives for the plan.
SurveyTotals merge_survey_parts(const ModelDir& model, const SurveyPlan& plan, const nlohmann::json& parts,
                                std::string_view field);

// The survey: {"texts", "documents", "windows", "tokens", "max_tokens", "shards", "skipped":
// [{"line", "error"}], "heads": [{"head": "L.H", "layer", "index", "kv_head", "rows",
// "previous_token", "self", "sink", "induction", "induction_rows", "entropy", "distance_mean",
// "distance_variance", "histogram": [{"from", "to", "weight"}], "active_rows",
// "top_query_tokens", "top_key_tokens": [{"id", "token", "score", "count"}], "examples": {"top":
// [...], "tenths": [[...] × 10]}}]}, an example {"document", "window", "position", "activation",
// "token", "keys": [{"position", "token", "weight"}], "context": {"start", "tokens"}} (positions
// in the document).
nlohmann::json survey_json(const ModelDir& model, const SurveyPlan& plan, const SurveyTotals& totals);

// The head finder's page (`page`, web/survey-finder.html) with `survey` inside it in place of its
// marker: self-contained, to open from disk or share.
std::string survey_finder_html(std::string_view page, const nlohmann::json& survey);
// That page, the build's copy of web/survey-finder.html filled, written to `path` (the request's
// `html`); InputError naming "html" where the file cannot be written.
void write_survey_finder(const std::string& path, const nlohmann::json& survey);

}  // namespace attnlab
