// Scenarios: the JSON files that describe tokens, embeddings, positions and heads
// (docs/scenario-format.md), validated once at the boundary with errors that name fields.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/limits.hpp"
#include "attnlab/core/mask.hpp"
#include "attnlab/core/matrix.hpp"
#include "attnlab/core/positions.hpp"
#include "attnlab/core/trace.hpp"

namespace attnlab {

inline constexpr std::string_view kScenarioFormat = "attnlab-scenario/1";
// kMaxTokens, kMaxWidth, kMaxHeads, kMaxTraceCells, kMaxWorkBytes: attnlab/core/limits.hpp.

struct HeadSpec {
  std::string name;
  std::optional<std::uint64_t> random_seed;    // set for a {"random": SEED} head
  Matrix w_q, w_k, w_v;                        // drawn at load time for a random head
  HeadAblation ablation = HeadAblation::none;  // an intervention: "ablation" in the file
  double scale = 1.0;                          // an intervention: "scale" in the file
  std::vector<double> b_q, b_k, b_v;           // optional biases ("b_q", ...): [d_k], [d_k], [d_v]
  std::vector<double> q_norm, k_norm;          // optional QK-norm weights γ ("q_norm", "k_norm"): [d_k]
  double norm_epsilon = 1e-6;                  // QK-norm's ε ("norm_epsilon")
};

// A linear read-out of the layer's output, so a query's output makes a "prediction" an
// intervention can flip: class scores z = output_i · matrix, the class is argmax z.
struct ReadoutSpec {
  Matrix matrix;                    // [d_out × classes]
  std::vector<std::string> labels;  // one per class, distinct
};

struct SourceSequence {  // the key/value side of cross-attention
  std::vector<std::string> tokens;
  Matrix embeddings;  // [m × d_model]
};

struct Scenario {
  std::string name;
  std::string description;
  std::string notes;
  std::vector<std::string> tokens;
  Matrix embeddings;  // [n × d_model]
  Positions positions;
  std::vector<HeadSpec> heads;
  std::optional<Matrix> w_o;  // [Σ d_v × d_out]
  std::optional<SourceSequence> source;
  MaskSpec mask;  // causal, window, mask_tokens
  double temperature = 1.0;
  double score_scale = 0.0;            // "score_scale": scaled = score × it (a model's own); 0: ÷ √d_k
  std::optional<std::size_t> query;    // the query explain works in full (default: the last)
  int precision = 2;                   // decimals explain shows by default
  std::optional<ReadoutSpec> readout;  // what `attnlab probe` reads off an output by default

  std::size_t n() const { return tokens.size(); }
  std::size_t m() const { return source ? source->tokens.size() : tokens.size(); }
  std::size_t d_model() const { return embeddings.cols; }
  std::size_t d_in() const { return input_width(d_model(), positions); }
  // The width of the layer output: W_O's columns, or Σ d_v without W_O.
  std::size_t d_out() const;
};

// Parses and validates a scenario. `origin` names the text in messages (a file path,
// "request body"); a malformed document reports line and column.
Scenario parse_scenario(std::string_view text, std::string_view origin);
// The same from an already parsed JSON value (the server's request bodies). Its work
// (attnlab/scenario/price.hpp) must fit `max_work_bytes`; random heads are priced against
// it before they are drawn.
Scenario scenario_from_json(const nlohmann::json& document, std::uint64_t max_work_bytes = kMaxWorkBytes);

// Checks every rule of the format (shapes chain, indices in range, limits, T > 0) and
// throws InputError naming the first field that breaks one. parse_scenario calls it;
// call it again after changing a scenario by hand.
void validate(const Scenario& scenario);

struct BundledScenario {
  std::string name;
  std::string description;
  std::string_view text;  // the file as bundled
};
// The scenarios compiled into attnlab, sorted by name, three-tokens first.
std::vector<BundledScenario> bundled_scenarios();
std::vector<std::string> bundled_scenario_names();  // in the same order
inline constexpr std::string_view kDefaultScenario = "three-tokens";

// The scenario as a JSON document in the file format (random heads stay {"random": SEED,
// "d_k", "d_v"}); parsing it gives the same scenario back.
nlohmann::json scenario_to_json(const Scenario& scenario);

// A head drawn at random: W_Q, W_K, W_V from N(0, 1/d_in), in that order, row by row,
// by splitmix64 seeded with `seed` (docs/scenario-format.md gives the exact recipe).
HeadSpec random_head(std::uint64_t seed, std::size_t d_in, std::size_t d_k, std::size_t d_v);

// The embedding attnlab gives a word a scenario does not know: per coordinate, the value
// every token of `scenario` shares there (a constant feature), else a number in [-1, 1]
// (2 decimals) drawn by splitmix64 seeded with the FNV-1a hash of the word.
std::vector<double> word_embedding(const Scenario& scenario, std::string_view word);

// The scenario with its query tokens replaced by the words of `sentence` (split on
// whitespace). Known words keep their embeddings; others get word_embedding(). In
// self-attention the keys follow. The scenario's own mask_tokens and query, which name
// the old tokens, are cleared.
Scenario with_sentence(const Scenario& scenario, std::string_view sentence);

// A bundled scenario by name, or a scenario file by path (anything ending in .json or
// containing '/'). Unknown names get a message listing the bundled ones.
Scenario load_scenario(std::string_view name_or_path);

// Changes a user asks for on top of a scenario (CLI flags, API options).
struct Overrides {
  std::optional<bool> causal;
  std::optional<double> temperature;
  std::optional<std::size_t> window;     // 0 removes the window
  std::vector<std::size_t> mask_tokens;  // added to the scenario's own
  std::optional<std::size_t> query;
};
// Applies the overrides and validates the result.
void apply_overrides(Scenario& scenario, const Overrides& overrides);

// The scenario with its query tokens (and, in self-attention, keys) reordered:
// new token k is old token order[k]. Masked token indices follow their tokens. `order`
// must be a permutation of 0..n-1.
Scenario permute_tokens(const Scenario& scenario, std::span<const std::size_t> order);

// Reads "2,0,1" into {2, 0, 1}, checking it is a permutation of 0..n-1.
std::vector<std::size_t> parse_permutation(std::string_view text, std::size_t n);
// Throws InputError (field "permute") unless `order` is a permutation of 0..n-1.
void check_permutation(std::span<const std::size_t> order, std::size_t n);

// The layer's input for the reference kernel: positions applied, heads, mask, T.
AttentionInput attention_input(const Scenario& scenario);

// Runs the reference computation and names the tokens in the trace; a computation that
// overflows is refused (check_finite).
Trace run_scenario(const Scenario& scenario);

// Throws InputError when finite inputs overflowed a double somewhere in `trace` (embeddings
// of 1e308 whose scores are 1e616, a temperature of 1e-320), naming the field to change:
// "embeddings" (or "source.embeddings", "heads[h].w_q" ..., whichever holds the larger
// numbers), "temperature", "heads[h].scale" or "w_o". Masked logits (-inf) are not overflow.
void check_finite(const Scenario& scenario, const Trace& trace);

}  // namespace attnlab
