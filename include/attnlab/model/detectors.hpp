// Head detectors: how much of its attention a head puts where a known pattern says.
//
// For a detector pattern P (P_ij = 1 where query i "should" look at key j), a head's score
// is the mean, over the rows i where P has any key, of Σ_j A_ij · P_ij: the weight the head
// puts on P's keys. 1 is a perfect head, 0 a head that never looks there. This is
// TransformerLens's Σ(A ⊙ P) / Σ A restricted to those rows (each row of A sums to 1).
//   previous-token   P_ij = 1 for j = i − 1
//   duplicate-token  P_ij = 1 for j < i with t_j = t_i (an earlier copy of this token)
//   induction        P_ij = 1 for 1 <= j <= i with t_{j−1} = t_i, j − 1 < i (the token
//                    after an earlier copy: what came next last time)
//   sink             P_ij = 1 for j = 0 < i (the first token, which many heads weigh whatever
//                    it says: an attention sink, Xiao et al. 2023; the first row, whose one
//                    key is the first token, is left out)
// The induction pattern is found on repeated random sequences [BOS, r_1..r_k, r_1..r_k]
// (Elhage et al. 2021; Olsson et al. 2022): in the second half every token has an earlier
// copy, and only a head that looks one past it scores high.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "attnlab/model/forward.hpp"

namespace attnlab {

enum class Detector { previous_token, duplicate_token, induction, sink };

// The detector's pattern for a token sequence: [n × n], 0 or 1, causal (j <= i).
std::vector<float> detector_pattern(Detector detector, std::span<const int> ids);

// The score of one head's weights `a` ([n × n], rows summing to 1) against `pattern`;
// NaN when no row of the pattern has a key.
double detector_score(std::span<const float> a, std::span<const float> pattern, std::size_t n);

struct HeadScores {
  HeadRef head;
  double previous_token = 0, duplicate_token = 0, induction = 0, sink = 0;
};

// [BOS, r_1..r_k, r_1..r_k]: k tokens drawn uniformly from [0, vocab) without BOS, seeded.
std::vector<int> repeated_random_tokens(std::uint64_t seed, std::size_t k, std::size_t vocab, int bos);

// Every head's four scores on one run over `ids` whose weights were kept (keep_attention):
// NaN for a detector whose pattern has no key in these ids (a text without repeats has no
// induction cells).
std::vector<HeadScores> score_heads(const ForwardResult& run, std::span<const int> ids);

// Every head's four scores on one text from its forward's pass over each row's scores
// (ForwardOptions::sparse_top: SparseAttention::detectors), layer by layer.
std::vector<HeadScores> head_scores_of(const SparseAttention& sparse, std::size_t heads);

// Every head's four scores, averaged over the given sequences (each run through the model,
// the scores taken from its pass over each row's scores: ForwardResult::sparse.detectors, no
// n × n weights kept, so any length the model's positions allow). Sequences where a detector's
// pattern is empty do not count for it.
std::vector<HeadScores> detect_heads(const Model& model, const std::vector<std::vector<int>>& sequences);

// The default probe set: `count` seeded repeated random sequences [BOS, r_1..r_k, r_1..r_k],
// k from the longest the model's positions allow (at most 32) down to half of that (varied,
// so a head that looks back a fixed distance does not score as an induction head), with BOS
// the last id of the vocabulary (GPT-2's <|endoftext|>).
std::vector<std::vector<int>> default_detector_sequences(const ModelConfig& config, std::uint64_t seed = 0,
                                                         std::size_t count = 4);

// {"heads": [{"layer", "head", "previous_token", "duplicate_token", "induction", "sink"}, ...]}:
// `attnlab model heads --json`, the Python module's Model.heads() and POST /api/model/run's
// "heads" (a score that is NaN is null).
nlohmann::json head_scores_json(const std::vector<HeadScores>& scores);

}  // namespace attnlab
