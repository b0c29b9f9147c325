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
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/stream.hpp"

namespace attnlab {

// Long work reports as it advances: (stage, done, total), e.g. ("erasure", 3, 12).
using Progress = std::function<void(std::string_view stage, std::size_t done, std::size_t total)>;

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
// The components too: each head's output at every position (z_h, before W_O) and each MLP's
// output, one at a time, taken from the clean run (L·H + L more reruns from the site's layer).
inline constexpr double kMaxPatchingFlops = double(1ull << 42);
// A path: head `sender`'s clean output fed only into head `receiver`'s query, key or value
// input, every other input reading the corrupted run (path patching; Wang et al. 2022). The
// receiver's output then flows on as the model computes it. A grouped-query receiver's key and
// value are its KV head's, which the heads sharing it read too.
struct PatchPath {
  HeadRef sender, receiver;
  char input = 'k';  // 'q', 'k' or 'v'
};
std::string to_string(const PatchPath& path);  // "0.0:1.0:k"
// "S:R:c" (sender L.H, receiver L.H, c one of q, k, v; the sender's layer below the
// receiver's); InputError naming `field` otherwise.
PatchPath parse_patch_path(std::string_view text, const ModelConfig& config, std::string_view field);

struct ResidualPatching {
  std::size_t rows = 0, n = 0, layers = 0, heads = 0;
  int target = 0, contrast = 0;
  double clean = 0, corrupt = 0;       // the metric on each run
  std::vector<double> restored;        // [rows × n] the stream at (row, position)
  std::vector<double> heads_restored;  // [L × H] head L.H's output at every position
  std::vector<double> mlps_restored;   // [L] layer L's MLP output at every position
  std::vector<PatchPath> paths;        // the paths asked for
  std::vector<double> paths_restored;  // each one's share
};
ResidualPatching patch_residual(const Model& model, std::span<const int> clean, std::span<const int> corrupt,
                                int target = -1, int contrast = -1, const Progress& progress = {},
                                const std::vector<PatchPath>& paths = {});
// Its price: every residual site's rerun ((L + 1)/2 · n forwards' worth) and every head's and MLP's.
double patching_flops(const ModelConfig& config, std::size_t n);

// ---- context mixing: how much each source token fed the prediction's row ----------------
//
// At the prediction's position p, per layer l and source token j (every measure 0 past p):
//   attention     a_h[p, j], every head                                           [L × H × n]
//   value norms   ‖Σ_h a_h[p, j] · f_h(x_j)‖, f_h(x_j) = v_h[j] · W_O_h (the head's write,
//                 sandwich-normed where the family norms it): the size of what j sends, not
//                 just the weight (Kobayashi et al. 2020)                               [L × n]
//   rollout       row p of Â_L ··· Â_1, Â_l = ½·mean_h A_l + ½·I, rows renormalised: the
//                 residual as half of each layer, mixed through the layers (Abnar & Zuidema 2020) [n]
//   ALTI          row p of C_L ··· C_1, C_l[i, j] = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁) rows
//                 normalised, y_i the stream after layer l's attention and T_i(x_j) = Σ_h a_h[i, j] ·
//                 f_h(x_j) + [i = j]·x_i what j put in it, the residual included (Ferrando et al. 2022) [n]
// ALTI rather than value zeroing: it is closed-form in what the forward kept (no rerun), and
// it counts the residual, which carries most of each row, where attention and value norms do
// not. In these pre-norm blocks the block's norm sits inside f_h (v reads norm_1(x_j)); the MLP
// acts on each row alone, so it mixes nothing and ALTI leaves it out.
inline constexpr double kMaxMixingWork = double(1ull << 36);  // L · n² · (H · d / 2 + n): ALTI and the maps' products
struct ContextMixing {
  std::size_t layers = 0, heads = 0, n = 0, position = 0;
  std::vector<double> attention;    // [L × H × n]
  std::vector<double> value_norms;  // [L × n]
  std::vector<double> rollout;      // [n]
  std::vector<double> alti;         // [n]
  // The maps, every row i ≤ p (0 past it): the weights' mean over layers and heads, and the
  // rolled-out rollout and ALTI (row p of each is the vector above)            [n × n] each
  std::vector<double> attention_map, rollout_map, alti_map;
};
// From a forward over n tokens with keep_stream; InputError naming "position" past the tokens
// or "ids" when ALTI's work is over kMaxMixingWork.
ContextMixing context_mixing(const Model& model, const ForwardResult& run, std::size_t position);

// ---- the verdict: every measure against the interventions ------------------------------
//
// For one prediction (a LogitTarget; the text is cut after its position, which nothing later
// can reach), the metric m = logit(target) − logit(contrast):
//   per source token j ≤ p: attention (mean over layers and heads), value norms (mean over
//     layers), rollout, ALTI, DLA through the OV path (Σ over heads), gradient × input
//     ∂m/∂x_j · x_j and integrated gradients at the input embeddings x_j, from the baseline x'
//     where every token's embedding is the vocabulary's mean (positions kept), `steps`
//     midpoints: Σ_j IG_j ≈ m(x) − m(x'). Not from 0: the norms make m(α·x) all but blind to
//     α until α·x nears their ε, where it swings (the Llama fixture: 0 at α = 0, 1.01 at 10⁻⁶,
//     −0.58 at 10⁻⁵, −1.69 at 10⁻⁴), so a zero baseline's integral is all in that sliver;
//     the intervention: erasure, m with key j hidden in every layer − m;
//   per head: DLA; the interventions: m with the head's output zeroed − m, and with it
//     replaced by its mean over the positions − m;
// and for every measure the rank agreement with its intervention's effect, sizes only (the
// sign set aside): Kendall's τ-b and Spearman's ρ. Priced first: the interventions are one
// forward per token and two per head (from the head's layer), at most kMaxVerdictFlops.
inline constexpr double kMaxVerdictFlops = double(1ull << 44);
struct Scores {
  std::string name;            // "attention", "value_norms", …, "erasure", "zero_ablation"
  std::vector<double> values;  // per source token [p + 1], or per head [L × H]
};
struct Agreement {
  std::string measure, intervention;
  double kendall = 0, spearman = 0;  // NaN where undefined (a constant list, fewer than two items)
};
struct Verdict {
  std::size_t n = 0, position = 0, layers = 0, heads = 0;
  int target = 0, contrast = -1;
  double metric = 0;
  std::vector<Scores> token_measures, token_interventions;  // erasure
  std::vector<Scores> head_measures, head_interventions;    // zero_ablation, mean_ablation
  std::vector<Agreement> agreements;                        // every measure × its kind's interventions
};
struct VerdictOptions {
  LogitTarget target;
  std::size_t steps = 16;  // integrated gradients' midpoints (1 to 256)
  Progress progress;       // ("gradients" | "erasure" | "heads", done, total)
};
Verdict verdict(const Model& model, std::span<const int> ids, const VerdictOptions& options = {});
// Its price over n tokens (the text already cut after the prediction): a forward per token
// erased, two per head from its layer on (H · (L + 1) in all), about three per gradient.
double verdict_flops(const ModelConfig& config, std::size_t n, std::size_t steps);

// Spearman's ρ: Pearson's correlation of the ranks (ties sharing their mean rank); NaN when
// either list is constant or has fewer than two items.
double spearman_rho(std::span<const double> a, std::span<const double> b);

// The agreements over many texts: for each (measure, intervention), the mean and standard
// deviation of τ and ρ over the texts where they are defined.
struct AgreementSpread {
  std::string measure, intervention;
  std::size_t texts = 0;  // where defined
  double kendall_mean = 0, kendall_sd = 0, spearman_mean = 0, spearman_sd = 0;
};
std::vector<AgreementSpread> agreement_spread(const std::vector<Verdict>& verdicts);

}  // namespace attnlab
