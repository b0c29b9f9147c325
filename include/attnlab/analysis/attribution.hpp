// What drove a model's prediction, read off the residual stream: direct logit attribution and
// the logit lens (docs/attribution.md says what each can and cannot show).
//
// Direct logit attribution (DLA): the stream after the last block is a sum of parts (the
// embedding, each head's output, each MLP's, biases; attnlab/model/stream.hpp); with the final
// norm's scale frozen from the real run, the target's logit (or target − contrast) is the sum
// of each part's contribution part · r, plus the final norm's bias. A head's contribution
// splits over source tokens through the OV path: a_h[p, j] · (v_j · W_O_h) · r. The parts add
// up to the logit the model computed (to float rounding: within 1e-4 of the largest part).
// DLA says what each part wrote in the direction of the answer, not what the model needed:
// a later layer's norm and MLP read the same parts too, and erasing one is another question
// (interventions).
//
// The logit lens: the stream after the embedding and after each block, through the final norm
// (its own statistics at that row) and the unembedding, as if the model stopped there.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/stream.hpp"

namespace attnlab {

// The prediction explained: at `position` (default: the last token), the logit of `target`
// (default, −1: the model's top prediction there), minus `contrast`'s when one is given.
struct LogitTarget {
  std::optional<std::size_t> position;
  int target = -1, contrast = -1;
};

struct PartContribution {
  PartKind kind = PartKind::embedding;
  std::size_t layer = kNotInABlock, head = kNotInABlock;
  double logit = 0;  // part · r
};

struct LogitAttribution {
  std::size_t n = 0, position = 0;
  int target = 0, contrast = -1;
  double logit = 0;                     // the model's logit (or target − contrast), from its own forward
  double final_bias = 0;                // β · u: the final norm's bias (LayerNorm; 0 for RMSNorm)
  std::vector<PartContribution> parts;  // every part, in stream order; Σ parts + final_bias = logit
  std::vector<double> heads;            // [L × H] each head's contribution
  std::vector<double> sources;          // [L × H × n] each head's contribution per source token (0 past position)
  std::vector<double> by_source;        // [n] Σ over every head of a source's contributions
};

// Runs `ids` once, keeping the stream, and takes the logit apart. InputError naming
// "position", "target" or "contrast" when outside the tokens or the vocabulary.
LogitAttribution attribute_logit(const Model& model, std::span<const int> ids, const LogitTarget& target = {});

struct LensCell {
  int top = 0;                    // the most probable token
  double top_probability = 0;     //
  double target_probability = 0;  //
  std::size_t target_rank = 0;    // 1 + the number of tokens with a larger logit
};
struct LogitLens {
  std::size_t rows = 0, n = 0;  // rows = L + 1: after the embedding, after each block
  int target = 0;
  std::vector<LensCell> cells;  // [rows × n]
};

// The lens over every position for `target` (−1: the model's top prediction at the last token).
LogitLens logit_lens(const Model& model, std::span<const int> ids, int target = -1);

// Activation patching of the residual stream, the intervention DLA and the lens are read
// against: run the corrupted tokens with the stream at one (layer, position) replaced by its
// value in the clean run, and measure how much of the clean − corrupted difference in the
// metric m = logit(target) − logit(contrast) at the last position that one site restores:
//   restored = (m_patched − m_corrupt) / (m_clean − m_corrupt)
// Rows are the stream entering each block and after the last (L + 1). Patching a row at every
// position where the texts differ restores 100%; a position where they agree, before any
// block has mixed positions, 0%. target defaults to the clean run's top prediction, contrast
// to the corrupted run's (its second when the two agree). The work is priced first: every
// site reruns the blocks after it (L(L + 1)/2 · n block passes over n tokens, at most
// kMaxPatchingFlops); InputError naming "corrupt" when the texts' lengths differ or the metric
// is the same on both.
inline constexpr double kMaxPatchingFlops = double(1ull << 42);
struct ResidualPatching {
  std::size_t rows = 0, n = 0;
  int target = 0, contrast = 0;
  double clean = 0, corrupt = 0;  // the metric on each run
  std::vector<double> restored;   // [rows × n]
};
ResidualPatching patch_residual(const Model& model, std::span<const int> clean, std::span<const int> corrupt,
                                int target = -1, int contrast = -1);

}  // namespace attnlab
