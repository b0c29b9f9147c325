// The forward pass of every family and the KV-cache decoder (attnlab/model/forward.hpp):
// the embedding, the blocks (transformer.hpp's block_forward, the one training runs too, its
// heads through the kept reference, the tiled kernel or the decode kernel) and the LM head.
#include "attnlab/model/forward.hpp"

#include <cblas.h>
#include <sys/mman.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <stdexcept>
#include <unordered_set>

#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/kernels/flash_decode.hpp"
#include "attnlab/kernels/matvec.hpp"
#include "attnlab/kernels/team.hpp"
#include "attnlab/model/blas.hpp"
#include "transformer/transformer.hpp"

namespace attnlab {

using namespace transformer;  // the block and its steps, shared with training

namespace {
constexpr std::size_t kHuge = std::size_t(2) << 20;  // a transparent huge page on x86-64
}  // namespace

void* allocate_huge_pages(std::size_t bytes) {
  const std::size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  // Over-asked by one huge page, then trimmed to a start on a 2 MiB boundary.
  void* mapped = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapped);
  const std::uintptr_t aligned = (start + kHuge - 1) / kHuge * kHuge;
  if (aligned > start) munmap(mapped, aligned - start);
  if (const std::size_t tail = start + kHuge - aligned; tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // a hint: where refused, small pages
  return reinterpret_cast<void*>(aligned);
}

void advise_huge_pages(void* p, std::size_t bytes) {
  if (bytes < kHugePagesFrom) return;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (start + kHuge - 1) / kHuge * kHuge, last = (start + bytes) / kHuge * kHuge;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void free_huge_pages(void* p, std::size_t bytes) { munmap(p, (bytes + kHuge - 1) / kHuge * kHuge); }

std::string to_string(HeadRef head) { return fmt::format("{}.{}", head.layer, head.head); }

HeadRef parse_head_ref(std::string_view text, std::string_view field) {
  const std::size_t dot = text.find('.');
  HeadRef h;
  const auto number = [&](std::string_view part, std::size_t& out) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), out);
    return error == std::errc() && end == part.data() + part.size() && !part.empty();
  };
  if (dot == std::string_view::npos || !number(text.substr(0, dot), h.layer) || !number(text.substr(dot + 1), h.head))
    fail(field, fmt::format("\"{}\" is not a head; write LAYER.HEAD, 0-based, e.g. 1.3", text.substr(0, 32)));
  return h;
}

namespace {

// Every head at once through the tiled kernel (no n × n grid), read where the fused
// projection qkv [n × W] holds them and written into z [n × H·hd]: no copies of Q, K, V.
void attention_tiled(const float* qkv, std::size_t n, const Heads& at, float* z) {
  const std::size_t hd = at.hd;
  const AttentionLayout layout{.q_head = hd,
                               .q_row = at.width,
                               .k_head = hd,
                               .k_row = at.width,
                               .v_head = hd,
                               .v_row = at.width,
                               .out_head = hd,
                               .out_row = at.H * hd};
  AttentionOptions options;
  options.causal = true;
  options.scale = at.scale;
  if (at.window) options.window = at.window;
  if (bf16_products()) options.precision = Precision::bf16;  // Q·Kᵀ and P·V as bf16 dot products too
  flash_attention(qkv + at.q(0), qkv + at.k(0), qkv + at.v(0), z, {at.H, at.H_kv, n, n, hd, hd}, layout, options);
}

}  // namespace

std::vector<double> rope_frequencies(const ModelConfig& c, std::size_t layer) {
  const std::size_t rotated = c.rope.rotated ? c.rope.rotated : c.head_dim();
  // Sliding-window layers with a θ of their own (Gemma 3's) rotate with it, unscaled.
  const bool local = c.rope.local_theta > 0 && c.window(layer) > 0;
  const double theta = local ? c.rope.local_theta : c.rope.theta;
  std::vector<double> f(rotated / 2);
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotated));
    if (local) continue;
    if (i < c.rope.divisors.size()) {
      f[i] /= c.rope.divisors[i];
      continue;
    }
    if (c.rope.scaling == RopeScaling::linear) f[i] /= c.rope.factor;
    if (c.rope.scaling == RopeScaling::llama3) {
      // Llama 3: long wavelengths slowed by the factor, short ones kept, the band between blended.
      const double original = static_cast<double>(c.rope.original_positions);
      const double low_wavelength = original / c.rope.low_freq_factor;
      const double high_wavelength = original / c.rope.high_freq_factor;
      const double wavelength = 2 * M_PI / f[i];
      if (wavelength > low_wavelength) {
        f[i] /= c.rope.factor;
      } else if (wavelength >= high_wavelength) {
        const double smooth =
            (original / wavelength - c.rope.low_freq_factor) / (c.rope.high_freq_factor - c.rope.low_freq_factor);
        f[i] = (1 - smooth) * f[i] / c.rope.factor + smooth * f[i];
      }
    }
  }
  return f;
}

void check_token_id(const ModelConfig& c, int id, std::string_view field) {
  if (id < 0 || static_cast<std::size_t>(id) >= c.vocab_size)
    fail(field, fmt::format("token id {} is outside the vocabulary (0 to {})", id, c.vocab_size - 1));
}

void check_head(const ModelConfig& c, HeadRef h, std::string_view field) {
  if (h.layer >= c.n_layer || h.head >= c.n_head)
    fail(field, fmt::format("head {} does not exist; the model has layers 0 to {} and heads 0 to {}", to_string(h),
                            c.n_layer - 1, c.n_head - 1));
}

namespace transformer {

// Token ids checked against the vocabulary, and the positions they would take.
void check_ids(const ModelConfig& c, std::span<const int> ids, std::size_t first_position) {
  if (ids.empty()) fail("ids", "no tokens; give at least one");
  if (first_position + ids.size() > c.n_positions)
    fail("ids",
         fmt::format("{} tokens is more than the model's {} positions", first_position + ids.size(), c.n_positions));
  for (std::size_t i = 0; i < ids.size(); ++i)
    check_token_id(c, ids[i], fmt::format("ids[{}]", first_position + i));
}

std::vector<float> embed(const Model& model, std::span<const int> ids, std::size_t first_position) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd;
  const float scale = static_cast<float>(c.embedding_scale);
  std::vector<float> x(ids.size() * d), position(d, 0.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    float* row = x.data() + i * d;
    model.wte.row(static_cast<std::size_t>(ids[i]), d, row);
    if (!c.rotary) model.wpe.row(first_position + i, d, position.data());
    for (std::size_t col = 0; col < d; ++col)
      row[col] = row[col] * scale + position[col];
  }
  return x;
}

}  // namespace transformer

namespace {

// The heads' outputs of the ablated heads of layer l zeroed, in z [n × Z].
void zero_ablated(const ModelConfig& c, std::size_t l, const std::vector<HeadRef>& ablate, std::size_t n, float* z) {
  const std::size_t dh = c.head_dim(), zw = c.attention_width();
  for (const HeadRef& h : ablate)
    if (h.layer == l)
      for (std::size_t i = 0; i < n; ++i)
        std::fill_n(z + i * zw + h.head * dh, dh, 0.0f);
}

// The replaced heads of layer l: their output rows in z [n × Z] overwritten.
void replace_heads(const ModelConfig& c, std::size_t l, const std::vector<HeadReplacement>& replace, std::size_t n,
                   float* z) {
  const std::size_t dh = c.head_dim(), zw = c.attention_width();
  for (const HeadReplacement& r : replace)
    if (r.head.layer == l)
      for (std::size_t i = 0; i < n; ++i)
        std::copy_n(r.z.data() + i * dh, dh, z + i * zw + r.head.head * dh);
}

// The options' interventions checked against the model and the n tokens they act on.
void check_interventions(const ModelConfig& c, const ForwardOptions& options, std::size_t n) {
  for (const HeadRef& h : options.ablate)
    check_head(c, h, "ablate");
  for (const HeadReplacement& r : options.replace_heads) {
    check_head(c, r.head, "replace_heads");
    if (r.z.size() != n * c.head_dim())
      fail("replace_heads", fmt::format("head {}'s replacement is {} numbers; it takes [n × head_dim] = {}",
                                        to_string(r.head), r.z.size(), n * c.head_dim()));
  }
  for (const MlpReplacement& r : options.replace_mlps)
    if (r.layer >= c.n_layer || r.added.size() != n * c.n_embd)
      fail("replace_mlps", fmt::format("layer {}'s replacement of {} numbers is not [n × d] = {} in layers 0 to {}",
                                       r.layer, r.added.size(), n * c.n_embd, c.n_layer - 1));
  for (const InputReplacement& r : options.replace_inputs) {
    check_head(c, r.head, "replace_inputs");
    if (r.input != 'q' && r.input != 'k' && r.input != 'v')
      fail("replace_inputs", fmt::format("head {}: input '{}' is not q, k or v", to_string(r.head), r.input));
    if (r.x.size() != n * c.n_embd)
      fail("replace_inputs", fmt::format("head {}'s stream is {} numbers; it takes [n × d] = {}", to_string(r.head),
                                         r.x.size(), n * c.n_embd));
  }
  if (options.last_layer && (*options.last_layer >= c.n_layer || options.logits != LogitRows::none))
    fail("last_layer", fmt::format("{} must be a layer (0 to {}) of a forward that computes no logits",
                                   *options.last_layer, c.n_layer - 1));
  if (const std::optional<HeadMapWindow>& w = options.head_map) {
    check_head(c, w->head, "head_map");
    if (w->tile == 0 || w->rows == 0 || w->cols == 0 || w->row0 + w->rows > n || w->col0 + w->cols > n)
      fail("head_map", fmt::format("queries {} + {} and keys {} + {} in tiles of {} are not a window of the {} tokens",
                                   w->row0, w->rows, w->col0, w->cols, w->tile, n));
    if (options.last_layer && *options.last_layer < w->head.layer)
      fail("last_layer", fmt::format("{} stops before head {}'s layer", *options.last_layer, to_string(w->head)));
  }
  if (options.hidden_key && *options.hidden_key >= n)
    fail("hidden_key", fmt::format("{} is past the last token (positions 0 to {})", *options.hidden_key, n - 1));
}

// Priced before work: the logits (n × vocab) and, when kept, every head's weights (L × H × n²).
constexpr double kMaxForwardFloats = double(1u << 30);  // 4 GiB of f32 each

}  // namespace

namespace {

// logits[n × vocab] = norm_f(x) · Uᵀ, U the LM head (wte when tied), into `logits`.
void unembed_into(const Model& model, std::span<const float> x, std::size_t n, float* logits) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd;
  std::vector<float> a(n * d);
  NormStats<float> stats;
  norm_forward(block_norm(c), x.data(), n, values(model.ln_f_weight), values(model.ln_f_bias), a.data(), stats);
  multiply_by_transpose(a.data(), n, d, c.tied ? model.wte : model.lm_head, c.vocab_size, logits);
}

}  // namespace

std::vector<float> unembed(const Model& model, std::span<const float> x, std::size_t n) {
  std::vector<float> logits(n * model.config.vocab_size);
  unembed_into(model, x, n, logits.data());
  return logits;
}

namespace {

constexpr std::size_t kScoreBlock = 64;  // queries whose scores one product makes

// Head h's scores q_i·k_j (before the scale) of queries [from, to), a block of up to kScoreBlock
// at a time: for queries [i0, i0 + rows) against keys [first, i0 + rows), the keys the block sees, one
// product S = Q_block · K_firstᵀ [rows × width] (64 × n numbers at most, never n × n);
// visit(i0, rows, first, width, S) reads key j of query i at S[(i − i0)·width + j − first] (and may
// overwrite the block's S, made again for the next).
template <class Visit>
void score_blocks(const Heads& at, const float* qkv, std::size_t from, std::size_t to, std::size_t h, Visit&& visit) {
  std::vector<float> scores;
  for (std::size_t i0 = from; i0 < to; i0 += kScoreBlock) {
    const std::size_t rows = std::min(kScoreBlock, to - i0), first = at.first_key(i0), width = i0 + rows - first;
    scores.resize(rows * width);
    gemm(false, true, rows, width, at.hd, qkv + i0 * at.width + at.q(h), at.width,
         qkv + first * at.width + at.k(at.kv_of(h)), at.width, 0.0f, scores.data(), width);
    visit(i0, rows, first, width, scores.data());
  }
}

// The largest scaled score m of query i's row of unscaled scores (key j at row[j − first]),
// over the keys it sees.
double row_max(const Heads& at, std::size_t i, const float* row, std::size_t first) {
  double m = -INFINITY;
  for (std::size_t j = at.first_key(i); j <= i; ++j)
    if (at.sees(i, j)) m = std::max(m, double(row[j - first]) * at.scale);
  return m;
}

// A head's weights pooled into the window's cells (HeadMap), from its scores block by block:
// per query row, log-sum-exp = m + log Σ e^(s − m) over the keys it sees, then a_ij =
// e^(s_ij − lse) of each key in the window, each cell keeping its largest.
HeadMap head_map_of(const Heads& at, const float* qkv, std::size_t n, const HeadMapWindow& w) {
  HeadMap map{w, {}, {}, {}};
  const std::size_t down = w.cells_down(), across = w.cells_across();
  map.weights.assign(down * across, NAN);
  map.query.assign(down * across, HeadMap::none);
  map.key.assign(down * across, HeadMap::none);
  const std::size_t row_end = std::min(n, w.row0 + w.rows), col_end = w.col0 + w.cols;
  score_blocks(at, qkv, w.row0, row_end, w.head.head,
               [&](std::size_t i0, std::size_t rows, std::size_t first, std::size_t width, const float* scores) {
                 for (std::size_t i = i0; i < i0 + rows; ++i) {
                   const float* row = scores + (i - i0) * width;
                   const double m = row_max(at, i, row, first);
                   double sum = 0;
                   for (std::size_t j = at.first_key(i); j <= i; ++j)
                     if (at.sees(i, j)) sum += std::exp(double(row[j - first]) * at.scale - m);
                   const double lse = m + std::log(sum);
                   const std::size_t cell_row = (i - w.row0) / w.tile * across;
                   for (std::size_t j = std::max(at.first_key(i), w.col0); j <= i && j < col_end; ++j) {
                     if (!at.sees(i, j)) continue;
                     const float a = static_cast<float>(std::exp(double(row[j - first]) * at.scale - lse));
                     const std::size_t cell = cell_row + (j - w.col0) / w.tile;
                     if (map.query[cell] == HeadMap::none || a > map.weights[cell])
                       map.weights[cell] = a, map.query[cell] = std::uint32_t(i), map.key[cell] = std::uint32_t(j);
                   }
                 }
               });
  return map;
}

// Every head's rows of layer `layer` in brief (SparseAttention) from q | k | v [n × W], as the
// heads see them (window, hidden key). Per head and block of 64 queries, their scores against
// every key the block sees are one product, S = Q_block · K_firstᵀ (64 × n numbers, 2 MiB at
// 8,192 tokens, never n × n); then each row in two passes over its scores: the largest m, and Σ e^(s − m),
// Σ e^(s − m)·s (in f64) and the `top` largest scores (a min-heap: after the first few keys
// almost every score fails the one comparison with its smallest). The weights are
// e^(s − log-sum-exp), log-sum-exp = m + log Σ e^(s − m), and the entropy in bits
// (log-sum-exp − Σ p·s) / ln 2. Profiled over 8,192 tokens of a 24-layer, 14-head model of
// d_k 64: this pass is about a quarter of the run (its products 12%, the rows 8%, expf 5%),
// the forward's own attention two thirds. With a pass of scalar f64 dot products instead the
// same run had not finished after 10 minutes; with this one it took 5 min 46 s (2 cores of a
// machine measuring 13 GFLOP/s that day).
//
// The head detectors ride along: a row's weight on its pattern's keys (the previous token, the
// earlier copies of its token, the tokens after them, the first token) is those keys' e^(s − m)
// over Σ e^(s − m). A row has duplicate-token and induction keys exactly when its token came
// before (the pattern counts keys outside a window, whose weight is 0, as dense rows do).
void sparse_rows(const Heads& at, const float* qkv, std::span<const int> ids, std::size_t layer, SparseAttention& out) {
  constexpr std::size_t kDetectors = 4;
  const std::size_t top = out.top, n = ids.size();
  out.keys[layer].assign(at.H * n * top, SparseAttention::none);
  out.weights[layer].assign(at.H * n * top, 0.0f);
  out.sink[layer].assign(at.H * n, 0.0f);
  out.entropy[layer].assign(at.H * n, 0.0f);
  std::vector<char> seen_before(n);  // the row's token occurred earlier
  {
    std::unordered_set<int> seen;
    for (std::size_t i = 0; i < n; ++i)
      seen_before[i] = !seen.insert(ids[i]).second;
  }
  std::vector<double> totals(at.H * kDetectors, 0.0), rows_counted(at.H * kDetectors, 0.0);
  std::vector<double> on_pattern(kScoreBlock * kDetectors);  // the block's rows' weights on each pattern
  for (std::size_t h = 0; h < at.H; ++h)
    score_blocks(
        at, qkv, 0, n, h,
        [&](std::size_t i0, std::size_t rows, std::size_t first, std::size_t width, const float* scores) {
          for_rows(rows, rows * width, [&](std::size_t r) {
            const std::size_t i = i0 + r;
            const float* row_scores = scores + r * width;  // key j's score at j − first, unscaled
            const auto score_of = [&](std::size_t j) { return double(row_scores[j - first]) * at.scale; };
            const auto visible = [&](std::size_t j) { return at.sees(i, j); };
            const double m = row_max(at, i, row_scores, first);
            std::vector<std::pair<double, std::uint32_t>> best;  // (score, key), a min-heap of the `top` largest
            const auto smaller = [](const auto& x, const auto& y) { return x.first > y.first; };
            double sum = 0, weighted = 0, sink_score = -INFINITY;
            double previous = 0, duplicate = 0, induction = 0, on_first = 0;  // Σ e^(s − m) on each pattern
            for (std::size_t j = at.first_key(i); j <= i; ++j) {
              if (!visible(j)) continue;
              const double score = score_of(j),
                           e = std::exp(static_cast<float>(score - m));  // f32's exp: half the time
              sum += e, weighted += e * score;
              if (j == 0) sink_score = score, on_first = e;
              if (j + 1 == i) previous = e;
              if (j < i && ids[j] == ids[i]) duplicate += e;
              if (j >= 1 && ids[j - 1] == ids[i]) induction += e;
              if (best.size() < top) {
                best.emplace_back(score, std::uint32_t(j));
                std::push_heap(best.begin(), best.end(), smaller);
              } else if (score > best.front().first) {
                std::pop_heap(best.begin(), best.end(), smaller);
                best.back() = {score, std::uint32_t(j)};
                std::push_heap(best.begin(), best.end(), smaller);
              }
            }
            const double lse = m + std::log(sum);
            std::sort(best.begin(), best.end(), [](const auto& x, const auto& y) {
              return x.first > y.first || (x.first == y.first && x.second < y.second);
            });
            const std::size_t row = (h * n + i) * top;
            for (std::size_t k = 0; k < best.size(); ++k) {
              out.keys[layer][row + k] = best[k].second;
              out.weights[layer][row + k] = static_cast<float>(std::exp(best[k].first - lse));
            }
            out.sink[layer][h * n + i] = static_cast<float>(std::exp(sink_score - lse));
            out.entropy[layer][h * n + i] = static_cast<float>((lse - weighted / sum) / std::numbers::ln2);
            const bool has[kDetectors] = {i >= 1, bool(seen_before[i]), bool(seen_before[i]), i >= 1};
            const double weight[kDetectors] = {previous / sum, duplicate / sum, induction / sum, on_first / sum};
            for (std::size_t d = 0; d < kDetectors; ++d)
              on_pattern[r * kDetectors + d] = has[d] ? weight[d] : NAN;
          });
          for (std::size_t r = 0; r < rows * kDetectors; ++r)  // in row order: the sums do not depend on the threads
            if (!std::isnan(on_pattern[r])) {
              totals[h * kDetectors + r % kDetectors] += on_pattern[r];
              rows_counted[h * kDetectors + r % kDetectors] += 1;
            }
        });
  out.detectors[layer].resize(at.H * kDetectors);
  for (std::size_t k = 0; k < totals.size(); ++k)
    out.detectors[layer][k] = rows_counted[k] > 0 ? totals[k] / rows_counted[k] : NAN;
}

// Every head's rows of layer `layer` added to the survey's sums (model/survey.hpp), from its
// scores block by block as the sparse rows are made: each row's weights written over its scores,
// its statistics computed in parallel, then added in row order (fixed point: the sums are exact
// whatever the order), the rows where the head is active offered to its example lists, and the
// weight each key draws from the later queries (off the sink and itself) summed per key.
void survey_rows(const Heads& at, const float* qkv, std::span<const int> ids, std::size_t layer, SurveyWindow& w) {
  SurveyTotals& totals = *w.totals;
  const SurveyLimits& limits = totals.limits;
  const std::size_t n = ids.size();
  std::vector<char> seen_before(n);  // the row's token occurred earlier in the window
  {
    std::unordered_set<int> seen;
    for (std::size_t i = 0; i < n; ++i)
      seen_before[i] = !seen.insert(ids[i]).second;
  }
  struct Row {
    double previous = 0, self = 0, sink = 0, induction = 0, entropy = 0, distance = 0, distance_squared = 0;
    double activation = -1;  // the largest weight off the sink and itself; −1: the row sees no other key
    std::array<double, kSurveyDistanceBins> histogram{};
  };
  std::vector<Row> block_rows(kScoreBlock);
  std::vector<double> drawn(n);  // per key, the weight the later queries give it
  for (std::size_t h = 0; h < at.H; ++h) {
    HeadSurvey& head = totals.per_head[layer * at.H + h];
    std::fill(drawn.begin(), drawn.end(), 0.0);
    score_blocks(
        at, qkv, 1, n, h, [&](std::size_t i0, std::size_t rows, std::size_t first, std::size_t width, float* scores) {
          for_rows(rows, rows * width, [&](std::size_t r) {
            const std::size_t i = i0 + r;
            float* row = scores + r * width;  // key j at j − first: its score, then its weight
            const double m = row_max(at, i, row, first);
            double sum = 0, weighted = 0;
            for (std::size_t j = first; j <= i; ++j) {
              const bool seen = j >= at.first_key(i) && at.sees(i, j);
              const double score = double(row[j - first]) * at.scale,
                           e = seen ? std::exp(static_cast<float>(score - m)) : 0.0;  // f32's exp: half the time
              row[j - first] = static_cast<float>(e);
              sum += e;
              if (seen) weighted += e * score;
            }
            Row& out = block_rows[r];
            out = Row{};
            const double lse = m + std::log(sum);
            out.entropy = (lse - weighted / sum) / std::numbers::ln2;
            for (std::size_t j = first; j <= i; ++j) {
              const double a = row[j - first] / sum;
              row[j - first] = static_cast<float>(a);
              if (a == 0) continue;
              const double d = double(i - j);
              out.distance += a * d, out.distance_squared += a * d * d;
              out.histogram[distance_bin(i - j)] += a;
              if (j >= 1 && ids[j - 1] == ids[i]) out.induction += a;
              if (j != 0 && j != i) out.activation = std::max(out.activation, a);
            }
            if (first == 0) out.sink = row[0];
            if (i - 1 >= first) out.previous = row[i - 1 - first];
            out.self = row[i - first];
            // a row that sees a key besides the sink and itself, all weighted 0, is active at 0
            if (out.activation < 0 && i >= 2 && at.first_key(i) < i - 1) out.activation = 0;
          });
          for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t i = i0 + r;
            const Row& row = block_rows[r];
            const float* weights = scores + r * width;
            head.rows += 1;
            head.previous_token += to_fixed(row.previous), head.self += to_fixed(row.self);
            head.sink += to_fixed(row.sink), head.entropy += to_fixed(row.entropy);
            head.distance += to_fixed(row.distance), head.distance_squared += to_fixed(row.distance_squared);
            for (std::size_t bin = 0; bin < kSurveyDistanceBins; ++bin)
              if (row.histogram[bin] > 0) head.histogram[bin] += to_fixed(row.histogram[bin]);
            if (seen_before[i]) head.induction_rows += 1, head.induction += to_fixed(row.induction);
            for (std::size_t j = std::max<std::size_t>(first, 1); j < i; ++j)
              drawn[j] += weights[j - first];
            if (row.activation < 0) continue;
            head.active_rows += 1;
            TokenSums& query = head.query_tokens[ids[i]];
            query.sum += to_fixed(row.activation), query.count += 1;
            // an example only where one of the head's lists would keep it
            SurveyExample e{.document = w.document,
                            .window = w.window,
                            .position = i,
                            .window_start = w.window_start,
                            .activation = row.activation};
            e.hash = SplitMix64(w.document * 0x9E3779B97F4A7C15ull ^ (w.window << 32) ^ i).next();
            const std::size_t tenth = std::min<std::size_t>(9, std::size_t(row.activation * 10));
            const std::vector<SurveyExample>& top = head.top;
            const std::vector<SurveyExample>& sample = head.tenths[tenth];
            const bool for_top = top.size() < limits.top_examples || example_before(e, top.back());
            const bool for_sample = sample.size() < limits.tenth_examples || e.hash < sample.back().hash;
            if (!for_top && !for_sample) continue;
            std::vector<std::uint32_t> order;  // the row's keys, heaviest first (ties: the earlier key)
            for (std::size_t j = first; j <= i; ++j)
              if (weights[j - first] > 0) order.push_back(std::uint32_t(j));
            const std::size_t keep = std::min(limits.example_keys, order.size());
            const auto heavier = [&](std::uint32_t a, std::uint32_t b) {
              const float wa = weights[a - first], wb = weights[b - first];
              return wa > wb || (wa == wb && a < b);
            };
            std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(), heavier);
            for (std::size_t k = 0; k < keep; ++k)
              e.keys.push_back(order[k]), e.weights.push_back(weights[order[k] - first]);
            e.context_start = i > limits.context_before ? i - limits.context_before : 0;
            const std::size_t context_end = std::min(n, i + 1 + limits.context_after);
            e.context.assign(ids.begin() + std::ptrdiff_t(e.context_start), ids.begin() + std::ptrdiff_t(context_end));
            keep_example(head, limits, std::move(e));
          }
        });
    for (std::size_t j = 1; j < n; ++j) {  // each occurrence of a key token off the sink
      TokenSums& key = head.key_tokens[ids[j]];
      key.sum += to_fixed(drawn[j]), key.count += 1;
    }
  }
}

// Blocks first.. on the stream x [n × d] (updated in place) with the options' interventions,
// keeping in r what the options say unless `keep` is false (a rerun keeps nothing).
void run_blocks(const Model& model, std::size_t first, std::vector<float>& x, std::size_t n,
                const ForwardOptions& options, ForwardResult& r, bool keep = true, std::span<const int> ids = {}) {
  const ModelConfig& c = model.config;
  const std::size_t heads = c.n_head;
  const bool keep_attention = keep && (options.keep_attention || options.keep_stream),
             keep_stream = keep && options.keep_stream;
  BlockActivations<float> a;  // one block's intermediates, reused layer after layer
  if (keep && options.sparse_top) {
    r.sparse.top = options.sparse_top;
    for (auto* per_layer : {&r.sparse.weights, &r.sparse.sink, &r.sparse.entropy})
      per_layer->resize(c.n_layer);
    r.sparse.keys.resize(c.n_layer);
    r.sparse.detectors.resize(c.n_layer);
  }
  const std::size_t end = options.last_layer ? std::min(*options.last_layer + 1, c.n_layer) : c.n_layer;
  for (std::size_t l = first; l < end; ++l) {
    check_deadline();  // a server request's time budget (core/deadline.hpp): checked between layers
    Heads at = heads_of(c, l);
    if (options.hidden_key) at.hidden = *options.hidden_key;
    // Inputs read from other streams (path patching): each one's columns of q | k | v, computed
    // from its stream by the same block's attention half.
    struct Columns {
      std::size_t first = 0;
      std::vector<float> qkv;  // [n × width] of that stream; the replaced head's columns are read
    };
    std::vector<Columns> replaced;
    for (const InputReplacement& r : options.replace_inputs) {
      if (r.head.layer != l) continue;
      Columns& columns = replaced.emplace_back();
      columns.first = r.input == 'q'   ? at.q(r.head.head)
                      : r.input == 'k' ? at.k(at.kv_of(r.head.head))
                                       : at.v(at.kv_of(r.head.head));
      std::vector<float> stream = r.x;
      BlockActivations<float> scratch;
      const HeadsStep<float> capture = [&](const float* qkv, float*) { columns.qkv.assign(qkv, qkv + n * at.width); };
      block_forward(c, l, model.blocks[l], n, 0, stream, scratch, capture, /*attention_only=*/true);
    }
    const HeadsStep<float> causal_heads = [&](const float* own, float* z) {
      const float* qkv = own;
      std::vector<float> patched;  // the layer's own q | k | v but for the replaced inputs' columns
      if (!replaced.empty()) {
        patched.assign(own, own + n * at.width);
        for (const Columns& columns : replaced)
          for (std::size_t i = 0; i < n; ++i)
            std::copy_n(columns.qkv.data() + i * at.width + columns.first, at.hd,
                        patched.data() + i * at.width + columns.first);
        qkv = patched.data();
      }
      if (keep_attention || options.hidden_key) {   // the reference, every weight written out
        std::vector<float> weights(heads * n * n);  // [H × n × n]
        attention_forward(at, qkv, n, weights.data(), z);
        if (keep_attention) r.attention.push_back(std::move(weights));
      } else {
        attention_tiled(qkv, n, at, z);
      }
      if (keep && options.sparse_top) sparse_rows(at, qkv, ids, l, r.sparse);
      if (keep && options.head_map && options.head_map->head.layer == l)
        r.head_map = head_map_of(at, qkv, n, *options.head_map);
      if (keep && options.survey) survey_rows(at, qkv, ids, l, *options.survey);
      zero_ablated(c, l, options.ablate, n, z);
      replace_heads(c, l, options.replace_heads, n, z);
    };
    a.keep_residuals =
        keep_stream || std::ranges::any_of(options.replace_mlps, [&](const auto& m) { return m.layer == l; });
    block_forward(c, l, model.blocks[l], n, 0, x, a, causal_heads);
    for (const MlpReplacement& m : options.replace_mlps)
      if (m.layer == l)
        for (std::size_t k = 0; k < x.size(); ++k)
          x[k] = a.x_mid[k] + m.added[k];
    if (keep_attention) r.block_inputs.push_back(a.ln1);
    if (keep_stream) {
      LayerStream& s = r.stream.emplace_back();
      s.x_in = a.x_in, s.qkv = a.qkv, s.z = a.z;
      s.attention.resize(n * c.n_embd), s.mlp.resize(n * c.n_embd);
      for (std::size_t k = 0; k < n * c.n_embd; ++k)
        s.attention[k] = a.x_mid[k] - a.x_in[k], s.mlp[k] = x[k] - a.x_mid[k];
      if (c.sandwich_norms) s.attention_rstd = a.post_attn_stats.rstd;
    }
  }
}

}  // namespace

ForwardResult model_forward(const Model& model, std::span<const int> ids, const ForwardOptions& options) {
  const ModelConfig& c = model.config;
  const std::size_t n = ids.size(), heads = c.n_head;
  check_ids(c, ids, 0);
  check_interventions(c, options, n);
  // The first position whose logits are computed (check_ids refused an empty text: n ≥ 1).
  const std::size_t logits_from = options.logits == LogitRows::every  ? 0
                                  : options.logits == LogitRows::last ? n - 1
                                                                      : n;
  if (double(n - logits_from) * double(c.vocab_size) > kMaxForwardFloats)
    fail("ids",
         fmt::format("{} tokens × a vocabulary of {} is more logits than the limit of {} (4 GiB); use fewer tokens", n,
                     c.vocab_size, kMaxForwardFloats));
  const bool keep_attention = options.keep_attention || options.keep_stream;
  if (keep_attention && double(c.n_layer) * double(heads) * double(n) * double(n) > kMaxForwardFloats)
    fail("ids", fmt::format("keeping every head's weights for {} tokens ({} layers × {} heads × n²) is more than the "
                            "limit of {} numbers (4 GiB); use fewer tokens",
                            n, c.n_layer, heads, kMaxForwardFloats));
  const double stream_floats =
      double(c.n_layer) * double(n) * double(4 * c.n_embd + c.qkv_width() + c.attention_width());
  if (options.keep_stream && stream_floats > kMaxForwardFloats)
    fail("ids",
         fmt::format("keeping the residual stream's parts for {} tokens ({} layers) is more than the limit of {} "
                     "numbers (4 GiB); use fewer tokens",
                     n, c.n_layer, kMaxForwardFloats));
  ForwardResult r;
  r.n = n;
  r.logits_from = logits_from;
  std::vector<float> x = embed(model, ids, 0);
  run_blocks(model, 0, x, n, options, r, /*keep=*/true, ids);
  if (options.keep_stream) r.final_stream = x;
  // The logits' pages touched first by every thread, a run of rows each (zeroed: the product
  // below may read what it then overwrites).
  const std::size_t vocab = c.vocab_size, rows = n - logits_from;
  if (rows == 0) return r;
  r.logits.resize(rows * vocab);
  for_rows(rows, rows * vocab, [&](std::size_t i) { std::fill_n(r.logits.data() + i * vocab, vocab, 0.0f); });
  unembed_into(model, std::span<const float>(x).subspan(logits_from * c.n_embd), rows, r.logits.data());
  return r;
}

std::span<const float> ForwardResult::logits_at(std::size_t position) const {
  if (logits_from == n)
    throw std::out_of_range(fmt::format(
        "logits_at({}): this forward computed no logits (LogitRows::none); run it with LogitRows::last or every",
        position));
  if (position < logits_from || position >= n)
    throw std::out_of_range(
        fmt::format("logits_at({}): this forward computed the logits of positions {} to {} only; "
                    "run it with LogitRows::every for every position's",
                    position, logits_from, n - 1));
  const std::size_t vocab = logits.size() / (n - logits_from);
  return std::span<const float>(logits).subspan((position - logits_from) * vocab, vocab);
}

namespace {

// x [n × d], the stream entering block `layer`, checked.
std::size_t stream_rows(const ModelConfig& c, std::size_t layer, std::span<const float> x) {
  const std::size_t n = x.size() / c.n_embd;
  if (layer > c.n_layer || n == 0 || x.size() != n * c.n_embd || n > c.n_positions)
    fail("stream", fmt::format("a stream of {} numbers entering block {} is not [n × {}] rows before block 0 to {}",
                               x.size(), layer, c.n_embd, c.n_layer));
  return n;
}

}  // namespace

std::vector<float> forward_from(const Model& model, std::size_t layer, std::vector<float> x,
                                const ForwardOptions& options, std::size_t first_row) {
  const ModelConfig& c = model.config;
  const std::size_t n = stream_rows(c, layer, x), d = c.n_embd;
  if (first_row >= n) fail("first_row", fmt::format("{} is past the last row ({} rows)", first_row, n));
  check_interventions(c, options, n);
  ForwardResult unused;
  run_blocks(model, layer, x, n, options, unused, /*keep=*/false);
  return unembed(model, std::span<const float>(x).subspan(first_row * d), n - first_row);
}

StreamGradient stream_gradient(const Model& model, std::span<const float> x0, std::size_t position, int target,
                               int contrast) {
  const ModelConfig& c = model.config;
  const std::size_t n = stream_rows(c, 0, x0), d = c.n_embd, L = c.n_layer, H = c.n_head;
  if (position >= n) fail("position", fmt::format("{} is past the last token (positions 0 to {})", position, n - 1));
  check_token_id(c, target, "target");
  if (contrast >= 0) check_token_id(c, contrast, "contrast");
  // Priced: every block's intermediates stay for the backward (the weights and ~10 rows of d per token).
  const double kept =
      double(L) * double(n) *
      (10.0 * double(d) + 2.0 * double(c.qkv_width() + c.attention_width() + c.fc_width()) + double(H) * double(n));
  if (kept > kMaxForwardFloats)
    fail("ids", fmt::format("the gradient over {} tokens keeps {:.3g} numbers for the backward, more than the limit "
                            "of {} (4 GiB); use fewer tokens",
                            n, kept, kMaxForwardFloats));
  std::vector<float> x(x0.begin(), x0.end());
  std::vector<BlockActivations<float>> acts(L);
  for (std::size_t l = 0; l < L; ++l) {
    check_deadline();
    const Heads at = heads_of(c, l);
    BlockActivations<float>& a = acts[l];
    if (l > 0) a.y = std::move(acts[l - 1].y);  // one scratch row block for all the layers, not one each
    const HeadsStep<float> kept_heads = [&](const float* qkv, float* z) {  // every softmax kept for the backward
      a.probs.resize(H * n * n);
      attention_forward(at, qkv, n, a.probs.data(), z);
    };
    block_forward(c, l, model.blocks[l], n, 0, x, a, kept_heads);
  }
  // m = norm_f(x_p) · (u_t − u_c), u the unembedding's rows; ∂m/∂norm_f(x_p) = u.
  const float* xp = x.data() + position * d;
  NormStats<float> stats;
  std::vector<float> normed(d), u(d), other(d);
  norm_forward(block_norm(c), xp, 1, values(model.ln_f_weight), values(model.ln_f_bias), normed.data(), stats);
  const Tensor& U = c.tied ? model.wte : model.lm_head;
  U.row(static_cast<std::size_t>(target), d, u.data());
  if (contrast >= 0) {
    U.row(static_cast<std::size_t>(contrast), d, other.data());
    for (std::size_t k = 0; k < d; ++k)
      u[k] -= other[k];
  }
  StreamGradient out;
  for (std::size_t k = 0; k < d; ++k)
    out.metric += double(normed[k]) * u[k];
  out.gradient.assign(n * d, 0.0f);
  norm_backward(block_norm(c), xp, 1, values(model.ln_f_weight), stats, u.data(), static_cast<float*>(nullptr),
                static_cast<float*>(nullptr), out.gradient.data() + position * d);
  const BlockView<float*> no_weight_gradients;
  for (std::size_t l = L; l-- > 0;) {
    check_deadline();
    block_backward(c, l, model.blocks[l], no_weight_gradients, acts[l], n, out.gradient);
    acts[l] = {};
  }
  return out;
}

namespace {

// n new tokens' heads against layer l's cache: their keys and values join it, and their
// queries ([n × H × hd], q's columns as they are) attend to every cached token up to their
// own position (the decode kernel), into z [n × H·hd].
void attend_through_cache(KVCache& cache, std::size_t l, const Heads& at, const float* qkv, std::size_t n, float* z) {
  const std::size_t q_width = at.H * at.hd, kv_width = at.H_kv * at.hd;
  std::vector<float> queries(n * q_width);
  for (std::size_t t = 0; t < n; ++t) {
    const float* row = qkv + t * at.width;
    cache.append(l, {row + at.k(0), kv_width}, {row + at.v(0), kv_width});
    std::copy_n(row, q_width, queries.data() + t * q_width);
  }
  DecodeOptions options;
  options.scale = at.scale;
  if (at.window) options.window = at.window;
  flash_decode(cache, l, at.H, queries, n, {z, n * q_width}, options);
}

// The last of the new tokens' weights over the whole cache of layer l (written after it went
// in), into weights [H × length]: softmax(q_h · k_j · scale) over its window, 0 outside it.
void last_row_weights(const KVCache& cache, std::size_t l, const Heads& at, const float* qkv, std::size_t n,
                      std::vector<float>& weights) {
  const std::size_t length = cache.length(l), t = length - 1, first = at.first_key(t);
  const float* row = qkv + (n - 1) * at.width;
  weights.assign(at.H * length, 0.0f);
  std::vector<float> keys(length * at.hd);
  std::vector<double> scores(length);
  for (std::size_t g = 0; g < at.H_kv; ++g) {
    cache.load_keys(l, g, 0, length, keys);
    for (std::size_t h = g * (at.H / at.H_kv); h < (g + 1) * (at.H / at.H_kv); ++h) {
      const float* q = row + at.q(h);
      for (std::size_t j = first; j < length; ++j) {
        double dot = 0;
        for (std::size_t i = 0; i < at.hd; ++i)
          dot += double(q[i]) * keys[j * at.hd + i];
        scores[j] = dot * at.scale;
      }
      softmax_in_place(std::span(scores).subspan(first, length - first));
      for (std::size_t j = first; j < length; ++j)
        weights[h * length + j] = static_cast<float>(scores[j]);
    }
  }
}

}  // namespace

std::vector<float> forward_suffix(const Model& model, std::size_t layer, std::span<const LayerStream> run,
                                  std::size_t first, std::vector<float> x) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd, rows = x.size() / d, W = c.qkv_width(), kv_width = c.kv_heads() * c.head_dim();
  if (layer >= c.n_layer || run.size() != c.n_layer || rows == 0 || x.size() != rows * d ||
      first + rows > c.n_positions || run[layer].qkv.size() < first * W)
    fail("stream", fmt::format("rows {}.. of a stream of {} numbers entering block {} do not fit the run kept", first,
                               x.size(), layer));
  // The rows before `first` as the run had them, in every layer from `layer` on: their keys
  // and values (rotated at their positions), what the rows after them attend to.
  KVCache cache(c.n_layer, c.kv_heads(), c.head_dim(), DType::f32);
  cache.reserve(first + rows);
  for (std::size_t l = layer; l < c.n_layer; ++l) {
    const Heads at = heads_of(c, l);
    for (std::size_t t = 0; t < first; ++t) {
      const float* row = run[l].qkv.data() + t * W;
      cache.append(l, {row + at.k(0), kv_width}, {row + at.v(0), kv_width});
    }
  }
  BlockActivations<float> a;
  a.keep_residuals = false;
  for (std::size_t l = layer; l < c.n_layer; ++l) {
    check_deadline();
    const Heads at = heads_of(c, l);
    const HeadsStep<float> cached_heads = [&](const float* qkv, float* z) {
      attend_through_cache(cache, l, at, qkv, rows, z);
    };
    block_forward(c, l, model.blocks[l], rows, first, x, a, cached_heads);
  }
  return unembed(model, std::span<const float>(x).subspan((rows - 1) * d), 1);
}

Decoder::Decoder(const Model& model, CacheType cache_type)
    : model_(model), cache_(model.config.n_layer, model.config.kv_heads(), model.config.head_dim(), cache_type) {}

std::vector<float> Decoder::step(std::span<const int> ids) {
  const ModelConfig& c = model_.config;
  const std::size_t n = ids.size(), first = length_;
  check_ids(c, ids, first);
  // Room for the new tokens, doubling (within the model's positions): generating one token
  // at a time then moves the cache's arrays a few times, not at every step.
  if (first + n > cache_.capacity())
    cache_.reserve(std::min(c.n_positions, std::max(first + n, 2 * cache_.capacity())));
  for (; ids.size() > kPrefillBatch; ids = ids.subspan(kPrefillBatch))
    step_batch(ids.first(kPrefillBatch), false);
  return step_batch(ids, true);
}

std::vector<float> Decoder::step_batch(std::span<const int> ids, bool want_logits) {
  const ModelConfig& c = model_.config;
  const std::size_t n = ids.size(), first = length_;
  const bool keep_weights = keep_weights_ && want_logits;  // the last token's row: the last batch's
  std::vector<float> x = embed(model_, ids, first), logits;
  if (keep_weights) last_weights_.resize(c.n_layer);
  const auto blocks_and_logits = [&] {
    BlockActivations<float> a;
    a.keep_residuals = false;
    for (std::size_t l = 0; l < c.n_layer; ++l) {
      const Heads at = heads_of(c, l);
      const HeadsStep<float> cached_heads = [&](const float* qkv, float* z) {
        attend_through_cache(cache_, l, at, qkv, n, z);
        if (keep_weights) last_row_weights(cache_, l, at, qkv, n, last_weights_[l]);
      };
      block_forward(c, l, model_.blocks[l], n, first, x, a, cached_heads);
    }
    if (want_logits)  // the last token's: the next one's odds
      logits = unembed(model_, std::span<const float>(x).last(c.n_embd), 1);
  };
  // A generated token's ~5 products and attention calls a layer, each tens of microseconds,
  // share one held team (kernels/team.hpp), not an OpenMP region each. A prompt's products
  // are GEMMs that take OpenMP's threads themselves.
  if (n <= kMatvecMaxRows)
    hold_team(blocks_and_logits);
  else
    blocks_and_logits();
  length_ += n;
  return logits;
}

double forward_flops(const ModelConfig& c, std::size_t n, LogitRows logits) {
  const double d = static_cast<double>(c.n_embd), tokens = static_cast<double>(n);
  const double linear = 2 * tokens *
                        (d * static_cast<double>(c.qkv_width()) + static_cast<double>(c.attention_width()) * d +
                         d * static_cast<double>(c.fc_width()) + static_cast<double>(c.n_inner) * d);
  // q·k and a·v over the causal half, every query head.
  const double attention = 2 * 2 * static_cast<double>(c.attention_width()) * tokens * (tokens + 1) / 2;
  return static_cast<double>(c.n_layer) * (linear + attention) +
         2 * double(logit_rows(n, logits)) * d * static_cast<double>(c.vocab_size);
}

std::size_t forward_buffer_bytes(const ModelConfig& c, std::size_t n, LogitRows logits) {
  const std::size_t d = c.n_embd, zw = c.attention_width();
  // q | k | v, z (the kernel reads the one and writes the other where they lie), the projection, the MLP's
  // input, hidden and act.
  const std::size_t block = c.qkv_width() + zw + 2 * d + c.fc_width() + c.n_inner;
  // The logits, the residual stream, the attention's input, the final norm's.
  return sizeof(float) * (logit_rows(n, logits) * c.vocab_size + n * (3 * d + block));
}

std::size_t decoder_buffer_bytes(const ModelConfig& c, std::size_t n) {
  // A batch's rows as a forward's, and the new tokens' queries gathered for the decode kernel.
  const std::size_t batch = std::min(n, kPrefillBatch);
  return forward_buffer_bytes(c, batch, LogitRows::last) + sizeof(float) * batch * c.attention_width();
}

double log_sum_exp(std::span<const float> logits) {
  const double largest = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits)
    sum += std::exp(static_cast<double>(x) - largest);
  return largest + std::log(sum);
}

std::vector<TokenProbability> top_k(std::span<const float> logits, std::size_t k) {
  const double normalizer = log_sum_exp(logits);
  std::vector<int> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(i);
  k = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<TokenProbability> out;
  for (std::size_t r = 0; r < k; ++r)
    out.push_back({order[r], std::exp(static_cast<double>(logits[order[r]]) - normalizer)});
  return out;
}

double next_token_loss(const ForwardResult& result, std::span<const int> ids, std::size_t first, std::size_t last) {
  double total = 0;
  for (std::size_t i = first; i < last; ++i) {
    const std::span<const float> row = result.logits_at(i);
    total += log_sum_exp(row) - row[ids[i + 1]];  // -log softmax(row)[next]
  }
  return last > first ? total / static_cast<double>(last - first) : 0.0;
}

AttentionInput head_attention_input(const Model& model, const ForwardResult& result, HeadRef head) {
  const ModelConfig& c = model.config;
  check_head(c, head, "head");
  const std::size_t n = result.n, d = c.n_embd, dh = c.head_dim();
  if (result.block_inputs.size() != c.n_layer)
    throw std::logic_error("head_attention_input: the forward kept no block inputs; run it with keep_attention");
  const std::vector<float>& a = result.block_inputs[head.layer];
  const Block& b = model.blocks[head.layer];
  const Heads at = heads_of(c, head.layer);
  AttentionInput input;
  input.queries_from = Matrix(n, d);
  for (std::size_t k = 0; k < n * d; ++k)
    input.queries_from.data[k] = a[k];
  input.keys_from = input.queries_from;
  input.mask.causal = true;
  if (c.window(head.layer)) input.mask.window = c.window(head.layer);
  if (c.rotary) input.rope = Rope{true, rope_frequencies(c, head.layer)};  // split halves, the model's frequencies
  // The head's columns of W_qkv: its query's, and its KV head's key and value.
  const auto slice = [&](std::size_t first) {
    Matrix w(d, dh);
    const std::vector<float> columns = b.attn_weight.columns(d, at.width, first, dh);
    std::copy(columns.begin(), columns.end(), w.data.begin());
    return w;
  };
  const auto bias = [&](std::size_t first) {
    if (b.attn_bias.empty()) return std::vector<double>(dh, 0.0);
    return std::vector<double>(b.attn_bias.begin() + static_cast<std::ptrdiff_t>(first),
                               b.attn_bias.begin() + static_cast<std::ptrdiff_t>(first + dh));
  };
  const std::size_t q0 = at.q(head.head), k0 = at.k(at.kv_of(head.head)), v0 = at.v(at.kv_of(head.head));
  HeadWeights w{to_string(head), slice(q0), slice(k0), slice(v0)};
  w.b_q = bias(q0), w.b_k = bias(k0), w.b_v = bias(v0);
  if (c.qk_norm) {  // γ as the forward applies it: 1 + w where the family stores w − 1
    const auto gamma = [&](const Tensor& weight) {
      std::vector<double> g(weight.begin(), weight.end());
      if (c.norm_plus_one)
        for (double& x : g)
          x += 1.0;
      return g;
    };
    w.q_norm = gamma(b.q_norm_weight), w.k_norm = gamma(b.k_norm_weight);
    w.norm_epsilon = c.layer_norm_epsilon;
  }
  input.score_scale = c.query_scale;
  input.heads.push_back(std::move(w));
  return input;
}

}  // namespace attnlab
