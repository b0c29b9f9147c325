// Interventions: change one thing about an attention computation and see what moves.
//
// A weight is a normalised similarity; whether the token it points at drove the output is
// a separate question (Jain & Wallace 2019; Serrano & Smith 2019; Wiegreffe & Pinter
// 2019: docs/references.md), answered by intervening: knock out a key token, ablate or scale a
// head, replace a token or its embedding, reorder the tokens. Interventions combine, and
// intervene() (attnlab/analysis/intervene.hpp) runs them and reports what moved.
// This header holds them as data: what a user asked for, checked and applied to a scenario.
// docs/interventions.md says what each one does and does not establish.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/trace.hpp"
#include "attnlab/scenario/scenario.hpp"

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

  bool empty() const { return knock_out.empty() && ablate.empty() && scale.empty() && replace.empty() && !permute; }
};

// The command-line forms (the API accepts them too). Each throws InputError naming
// `origin` and the form expected.
HeadAblationRequest parse_ablate_head(std::string_view text, std::string_view origin);  // "H" or "H:zero|mean|uniform"
HeadScaling parse_scale_head(std::string_view text, std::string_view origin);           // "H:F"
TokenReplacement parse_replace_token(std::string_view text, std::string_view origin);   // "J:WORD"
TokenReplacement parse_replace_embedding(std::string_view text, std::string_view origin);  // "J:x1,x2,..."
// The pieces those forms are made of, for requests that give them as typed fields:
HeadAblation ablation_kind(std::string_view kind, std::string_view origin);  // "zero", "mean" or "uniform"
std::string checked_word(std::string_view word, std::string_view origin);    // one word, no spaces

// One line per intervention, in the order they are applied, e.g.
// `knock out key 1 "t2"`, `ablate head 0 "worked example": mean output over the tokens`.
std::vector<std::string> describe(const Interventions& interventions, const Scenario& scenario);

// The scenario with every intervention applied, in a fixed order: token replacements,
// knock-outs, head ablations and scales, then the permutation. Every index refers to the
// scenario as given. Throws InputError naming the intervention's origin for an index out
// of range, a head ablated or scaled twice, an embedding of the wrong width, or a bad
// permutation.
Scenario apply_interventions(const Scenario& scenario, const Interventions& interventions);

}  // namespace attnlab
