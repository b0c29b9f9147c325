// Interventions: change one thing about an attention computation and see what moves.
//
// A weight is a normalised similarity; whether the token it points at drove the output is
// a separate question (seed 000, "The weights look like a reason but the arithmetic alone
// does not make one"), answered by intervening: knock out a key token, ablate or scale a
// head, replace a token or its embedding, reorder the tokens. Interventions combine, and
// every one reports the output before and after and the difference per token.
// docs/interventions.md says what each one does and does not establish.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/attention.hpp"
#include "attnlab/scenario.hpp"
#include "attnlab/trace.hpp"

namespace attnlab {

// A finite number written in full ("0.5", "-2", "1e-3"), or nothing (for flag parsing).
std::optional<double> finite_number(std::string_view text);


// Each intervention remembers where it was asked for (`origin`: "--ablate-head 1:mean",
// "options.ablate_heads[0]"), so an error names what the user typed.

struct KnockOut {  // hide key token `key` from every query; the remaining weights renormalise
  std::size_t key = 0;
  std::string origin = "mask_tokens";
};

struct HeadAblationRequest {  // ablate head `head` (the engine applies it at the mix step)
  std::size_t head = 0;
  HeadAblation ablation = HeadAblation::zero;
  std::string origin = "ablate_heads";
};

struct HeadScaling {  // multiply head `head`'s output by `factor`
  std::size_t head = 0;
  double factor = 1.0;
  std::string origin = "scale_heads";
};

// Replace query token `index` (in self-attention the key too; positions stay with the slot)
// by a word, or give it a new embedding. A word that is already a token of the scenario
// takes that token's embedding; any other word gets attnlab's word table row
// (word_embedding, docs/api.md). With only an embedding, the token keeps its name.
struct TokenReplacement {
  std::size_t index = 0;
  std::optional<std::string> word;
  std::optional<std::vector<double>> embedding;  // d_model numbers
  std::string origin = "replace_tokens";
};

struct Interventions {
  std::vector<KnockOut> knock_out;
  std::vector<HeadAblationRequest> ablate;
  std::vector<HeadScaling> scale;
  std::vector<TokenReplacement> replace;
  std::optional<std::vector<std::size_t>> permute;  // new token k is old token permute[k]

  bool empty() const {
    return knock_out.empty() && ablate.empty() && scale.empty() && replace.empty() && !permute;
  }
};

// The command-line forms (the API accepts them too). Each throws InputError naming
// `origin` and the form expected.
HeadAblationRequest parse_ablate_head(std::string_view text, std::string_view origin);    // "H" or "H:zero|mean|uniform"
HeadScaling parse_scale_head(std::string_view text, std::string_view origin);             // "H:F"
TokenReplacement parse_replace_token(std::string_view text, std::string_view origin);     // "J:WORD"
TokenReplacement parse_replace_embedding(std::string_view text, std::string_view origin); // "J:x1,x2,..."

// One line per intervention, in the order they are applied, e.g.
// `knock out key 1 "t2"`, `ablate head 0 "worked example": mean output over the tokens`.
std::vector<std::string> describe(const Interventions& interventions, const Scenario& scenario);

// The scenario with every intervention applied, in a fixed order: token replacements,
// knock-outs, head ablations and scales, then the permutation. Every index refers to the
// scenario as given. Throws InputError naming the intervention's origin for an index out
// of range, a head ablated or scaled twice, an embedding of the wrong width, or a bad
// permutation.
Scenario apply_interventions(const Scenario& scenario, const Interventions& interventions);

// What an intervention did: both traces, and per token (in the original order, so a
// permuted token is compared with itself) the output before and after and the change.
struct InterventionResult {
  Scenario before_scenario, after_scenario;
  Trace before, after;
  std::vector<std::string> applied;    // describe(interventions)
  std::vector<std::size_t> after_row;  // token i of `before` is row after_row[i] of `after`
  Matrix output_before;                // [n × d_out] before.output
  Matrix output_after;                 // [n × d_out] after.output, rows in the original order
  Matrix delta;                        // [n × d_out] output_after - output_before
  std::vector<double> delta_norm;      // [n] ‖delta_i‖ (Euclidean)
};

// Runs the scenario as given and with the interventions applied.
InterventionResult intervene(const Scenario& scenario, const Interventions& interventions);

// The before/after table as text: one line per token with both outputs, Δ and ‖Δ‖.
std::string format_intervention(const InterventionResult& result, int precision);

// {"applied": [...], "tokens": [...], "after_row": [...], "before": [[...]],
//  "after": [[...]], "delta": [[...]], "delta_norm": [...]}  (docs/api.md)
nlohmann::json intervention_to_json(const InterventionResult& result);

}  // namespace attnlab
