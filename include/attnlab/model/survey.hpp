// What every head does across a corpus (`attnlab model survey`, docs/survey.md): per head, sums
// over every query row of every window the forward ran, kept so that any split of the corpus
// merges to the same numbers, bit for bit, in any order.
//
// For query i ≥ 1 of a window, with weights a_ij over the keys j it sees:
//   previous-token a_i,i−1    self a_ii    sink a_i0
//   induction Σ a_ij over the keys right after an earlier copy of token i (rows that have one)
//   entropy −Σ a_ij log₂ a_ij (bits)
//   distance under the weights: Σ a_ij (i − j) and Σ a_ij (i − j)², and its histogram
//   (the weight on distances 0, 1, 2–3, 4–7, ...)
//   activation: the row's largest weight off the sink and itself (rows i ≥ 2), which ranks
//   the head's examples and scores its query tokens; a key token's score is the weight it
//   draws from the later queries, off the sink.
// Sums are fixed point (2⁻³² of a unit in 128-bit integers), so addition is exact and
// associative: doubles would depend on the order shards are merged in. Examples are bounded
// and totally ordered: the top by activation, and per tenth of the activation's range the
// rows whose hash of (document, window, position) is smallest (a deterministic sample).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace attnlab {

__extension__ typedef __int128 Fixed;  // a sum in units of 2⁻³² (__extension__: a GNU type, -Wpedantic)
__extension__ typedef unsigned __int128 UnsignedFixed;
Fixed to_fixed(double x);
double from_fixed(Fixed x);

// Distance bins: 0, 1, 2–3, 4–7, ..., 2^(k−1)–2^k − 1: bin(d) = 0 for d = 0, else ⌊log₂ d⌋ + 1.
constexpr std::size_t kSurveyDistanceBins = 24;
std::size_t distance_bin(std::size_t d);

// One row where a head was active: where it is, how active, and its heaviest keys.
struct SurveyExample {
  std::uint64_t document = 0, window = 0, position = 0;  // the query's position in its window
  std::uint64_t window_start = 0;                        // the window's first token in the document
  double activation = 0;                                 // the row's largest weight off the sink and itself
  std::uint64_t hash = 0;                                // of (document, window, position): the sample's order
  std::vector<std::uint32_t> keys;                       // the row's heaviest keys (positions in the window)
  std::vector<float> weights;                            // their weights
  std::vector<std::int32_t> context;                     // token ids of the window from context_start
  std::uint64_t context_start = 0;                       // the window position of context[0]
};

struct TokenSums {
  Fixed sum = 0;
  std::uint64_t count = 0;
  bool operator==(const TokenSums&) const = default;
};

struct HeadSurvey {
  std::uint64_t rows = 0, induction_rows = 0, active_rows = 0;
  Fixed previous_token = 0, self = 0, sink = 0, induction = 0, entropy = 0, distance = 0, distance_squared = 0;
  std::vector<Fixed> histogram = std::vector<Fixed>(kSurveyDistanceBins, 0);
  std::vector<SurveyExample> top;  // by activation, largest first
  std::vector<std::vector<SurveyExample>> tenths = std::vector<std::vector<SurveyExample>>(10);
  std::map<std::int32_t, TokenSums> query_tokens;  // activation of the rows of each query token
  std::map<std::int32_t, TokenSums> key_tokens;    // weight each key token draws, off the sink and itself
};

struct SurveyLimits {
  std::size_t top_examples = 8, tenth_examples = 3, example_keys = 4, context_before = 24, context_after = 4;
};

// Every head's sums [L × H], head h of layer l at l·H + h.
struct SurveyTotals {
  SurveyLimits limits;
  std::size_t layers = 0, heads = 0;
  std::uint64_t documents = 0, windows = 0, tokens = 0;
  std::vector<HeadSurvey> per_head;
};

// Where the window the forward runs on sits in the corpus (ForwardOptions::survey).
struct SurveyWindow {
  SurveyTotals* totals = nullptr;
  std::uint64_t document = 0, window = 0, window_start = 0;
};

// `from` added into `into` (the same model and limits): sums added, examples and token maps
// merged; the result is the same whatever the order or grouping of merges.
void merge_survey(SurveyTotals& into, const SurveyTotals& from);
// One example offered to a head's bounded lists.
void keep_example(HeadSurvey& head, const SurveyLimits& limits, SurveyExample example);
// The total order of examples: activation, then (document, window, position).
bool example_before(const SurveyExample& a, const SurveyExample& b);

}  // namespace attnlab
