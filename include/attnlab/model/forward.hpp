// The transformer's forward pass, one for every family (model.hpp), showing its work.
//
//   x = wte[ids] · s_emb (+ wpe[0..n) with learned positions)    the residual stream [n × d]
//   per block:  a = norm_1(x);  q | k | v = a · W_qkv + b
//               q, k per head: QK-norm, then rotated by position (rotary families)
//               z_h = softmax(q_h · k_g(h)ᵀ · scale, causal [, window]) · v_g(h)   g(h) = h / (H / H_kv)
//               x += [norm](z · W_o + b_o)
//               x += [norm](act(norm_2(x) · W_fc + b_fc) · W_mlp + b_mlp)     GELU, SwiGLU or GeGLU
//   logits = norm_f(x) · Uᵀ, U = wte (tied) or lm_head                          [n × vocab]
//
// Every head of a model becomes the engine's own attention problem (head_attention_input):
// its input is the block's LN'd residual stream `a`, its W_Q, W_K, W_V the head's slices of
// c_attn with their biases, causal. So explain, the maths panel, interventions and the
// probe work on a trained head as they do on a hand-built one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/kv_cache.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/survey.hpp"

namespace attnlab {

// A head of a model, written L.H (0-based), as TransformerLens and the literature write it.
struct HeadRef {
  std::size_t layer = 0, head = 0;
  bool operator==(const HeadRef&) const = default;
};
std::string to_string(HeadRef head);                                    // "5.1"
HeadRef parse_head_ref(std::string_view text, std::string_view field);  // "5.1"; InputError otherwise

// Interventions on the forward: a head's output rows replaced (mean ablation, patching), an
// MLP's (patching), a key hidden from every query (erasure).
struct HeadReplacement {
  HeadRef head;
  std::vector<float> z;  // [n × hd] the head's output at every position, before W_O
};
struct MlpReplacement {
  std::size_t layer = 0;
  std::vector<float> added;  // [n × d] what the block's MLP adds to the stream instead
};
// One head's query, key or value read from another residual stream (path patching): the head's
// q (or its KV head's k or v, which the heads sharing it read too) is computed from `x` [n × d],
// normed and projected as the block does it; every other input reads the stream itself.
struct InputReplacement {
  HeadRef head;
  char input = 'q';      // 'q', 'k' or 'v'
  std::vector<float> x;  // [n × d] the stream that input reads
};

// Which positions' logits a forward computes. The LM head is a large share of a forward's
// work (29% of GPT-2 small's over 1,024 tokens), and its n × vocab floats its largest buffer.
enum class LogitRows {
  every,  // [n × vocab]: the next token's odds after every prefix
  last,   // [1 × vocab]: after the whole text (the lab's next-token list, the lens, patching)
  none,   // none: for a caller that reads the weights or the stream alone
};

// Which of a head's weights a map shows: queries [row0, row0 + rows) and keys [col0, col0 +
// cols), in cells of tile × tile tokens (tile 1: a cell is a weight).
struct HeadMapWindow {
  HeadRef head;
  std::size_t row0 = 0, col0 = 0, rows = 0, cols = 0, tile = 1;
  std::size_t cells_down() const { return (rows + tile - 1) / tile; }
  std::size_t cells_across() const { return (cols + tile - 1) / tile; }
};

struct ForwardOptions {
  LogitRows logits = LogitRows::every;
  bool keep_attention = false;  // every head's weights, [L][H × n × n]
  bool keep_stream = false;     // what every block wrote into the residual stream (LayerStream); keeps the weights too
  std::vector<HeadRef> ablate;  // heads whose output is zeroed before c_proj
  std::vector<HeadReplacement> replace_heads;
  std::vector<MlpReplacement> replace_mlps;
  std::vector<InputReplacement> replace_inputs;
  // Token j hidden as a key from every query of every layer (its weight 0, the rest
  // renormalised); a query left with no other key (j's own at the first position, or in a
  // window of one) still sees it. The token's own row still carries it up the stream.
  std::optional<std::size_t> hidden_key;
  // > 0: every head's rows in brief (ForwardResult::sparse), this many keys a row; no n × n kept.
  std::size_t sparse_top = 0;
  // One head's weights pooled (ForwardResult::head_map), from its scores block by block: no n × n kept.
  std::optional<HeadMapWindow> head_map;
  // Stop after this block (the stream is then not the last block's): LogitRows::none only.
  std::optional<std::size_t> last_layer;
  // Every head's rows added to a survey's sums (model/survey.hpp), as this window of the corpus.
  SurveyWindow* survey = nullptr;
};

// A head's weights at any length, pooled: each cell the largest weight a_ij of the query i and
// key j it covers that the query sees (the strongest link in a block stays visible where a mean
// would wash it out), and where that weight is. A cell none of whose keys its queries see
// (above the diagonal, outside a sliding window) is NaN, its query and key `none`.
struct HeadMap {
  HeadMapWindow window;
  std::vector<float> weights;             // [cells_down × cells_across]
  std::vector<std::uint32_t> query, key;  // [cells_down × cells_across] where each cell's weight is
  static constexpr std::uint32_t none = 0xffffffffu;
};

// Each head's rows of weights in brief, for a context too long to keep n × n weights: per
// head and query, the keys it weighs most (largest first), its weight on the first token (the
// sink) and the row's entropy in bits, −Σ_j a_ij log₂ a_ij. From the scores s_j = q·k_j ·
// scale in one pass over the keys: m = max s, Σ e^(s−m), Σ e^(s−m) s and the `top` largest
// s (the largest scores are the largest weights), then lse = m + log Σ e^(s−m), a_ij =
// e^(s_j − lse) and the entropy (lse − Σ a_ij s_j) / ln 2.
struct SparseAttention {
  std::size_t top = 0;  // keys a row; a query that sees fewer lists all it sees
  // Per layer, [H × n × top]: head h, query i's k-th key at (h·n + i)·top + k; a key past what
  // the query sees is `none` with weight 0.
  std::vector<std::vector<std::uint32_t>> keys;
  std::vector<std::vector<float>> weights;
  std::vector<std::vector<float>> sink, entropy;  // per layer, [H × n]
  // The head detectors (model/detectors.hpp) from the same pass: per layer, [H × 4] each
  // detector's score, the mean over the rows that have a key in its pattern of the row's
  // weight on those keys (previous-token, duplicate-token, induction, sink; NaN where no row
  // has one): what score_heads gives from the n × n weights.
  std::vector<std::vector<double>> detectors;
  static constexpr std::uint32_t none = 0xffffffffu;
};

// What one block read from and wrote into the residual stream, kept for attribution
// (attnlab/model/stream.hpp takes it apart). Z = H·head_dim.
struct LayerStream {
  std::vector<float> x_in;            // [n × d] the stream entering the block
  std::vector<float> qkv;             // [n × qkv_width] q | k | v as the heads read them (v: norm_1(x)·W_V + b_V)
  std::vector<float> z;               // [n × Z] the heads' outputs side by side, before W_O
  std::vector<float> attention;       // [n × d] what the attention added to the stream
  std::vector<float> mlp;             // [n × d] what the MLP added
  std::vector<float> attention_rstd;  // [n] sandwich norms only: the 1/rms the attention's output was normed by
};

// Memory for `bytes` on transparent huge pages (2 MiB: a 206 MB block of logits faults in
// 100 times instead of 50,000, and the LM head's writes miss the TLB less), aligned to them and
// asked for with madvise(MADV_HUGEPAGE), which the kernel honours in its default "madvise" mode;
// std::bad_alloc where there is none. A program need not start with glibc's
// GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (what the command does) for the logits to get them.
void* allocate_huge_pages(std::size_t bytes);
void free_huge_pages(void* p, std::size_t bytes);
// The whole 2 MiB pages inside [p, p + bytes) madvised for transparent huge pages: for a
// buffer some other allocator gave, before its pages are first touched. Nothing below
// kHugePagesFrom.
void advise_huge_pages(void* p, std::size_t bytes);
// The size from which the forward's buffers go on huge pages (a smaller one would be half
// its own page or less).
constexpr std::size_t kHugePagesFrom = std::size_t(4) << 20;  // bytes

// An allocator whose elements start unset (no value-initialization): for the logits, [n ×
// vocab] floats, hundreds of MB for a long text, every one written by the LM head. A
// std::vector<float> would zero them first on one thread, the kernel faulting in its fresh
// pages one after another; the forward touches them first on all of its threads instead.
// From kHugePagesFrom up, on huge pages (allocate_huge_pages).
//
// Every buffer starts on a cache line (64 bytes; malloc's own is 16): oneDNN's AMX products read
// their input's rows as tiles, and rows that straddle cache lines slowed a 256 × 2560 × 2048
// bf16 product by a quarter on Sapphire Rapids (1.90 ms against 1.51; the f32 products on
// AVX-512 the same either way).
inline constexpr std::size_t kUnsetAlignment = 64;
template <class T>
struct UnsetAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UnsetAllocator<U>;
  };
  UnsetAllocator() = default;
  template <class U>
  UnsetAllocator(const UnsetAllocator<U>&) noexcept {}
  T* allocate(std::size_t count) {
    if (count > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    if (count * sizeof(T) < kHugePagesFrom)
      return static_cast<T*>(::operator new(count * sizeof(T), std::align_val_t(kUnsetAlignment)));
    return static_cast<T*>(allocate_huge_pages(count * sizeof(T)));
  }
  void deallocate(T* p, std::size_t count) noexcept {
    if (count * sizeof(T) < kHugePagesFrom)
      ::operator delete(p, std::align_val_t(kUnsetAlignment));
    else
      free_huge_pages(p, count * sizeof(T));
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(p)) U;  // default-initialized: a float left as it is
    else
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Logits = std::vector<float, UnsetAllocator<float>>;  // [n × vocab], row by row

struct ForwardResult {
  std::size_t n = 0;
  Logits logits;                // [(n − logits_from) × vocab]: positions logits_from..n−1
  std::size_t logits_from = 0;  // 0 for LogitRows::every, n − 1 for last, n for none
  // The logits after position `position` [vocab]; std::out_of_range for one not computed.
  std::span<const float> logits_at(std::size_t position) const;
  // [L][n × d] LN_1(x), what each block's heads read: kept with the weights (keep_attention).
  std::vector<std::vector<float>> block_inputs;
  std::vector<std::vector<float>> attention;  // [L][H × n × n] weights, when kept
  std::vector<LayerStream> stream;            // [L], when kept
  std::vector<float> final_stream;            // [n × d] the stream after the last block, when kept
  SparseAttention sparse;                     // with options.sparse_top
  HeadMap head_map;                           // with options.head_map
};

// InputError naming `field` unless 0 ≤ id < vocab_size: a target, a contrast, a token of ids.
void check_token_id(const ModelConfig& config, int id, std::string_view field);
// Throws InputError naming `field` unless the model has head `head` ("head 2.0 does not
// exist; the model has layers 0 to 1 and heads 0 to 3").
void check_head(const ModelConfig& config, HeadRef head, std::string_view field);

// Runs the model on token ids (each < vocab_size, at most n_positions of them; InputError
// naming "ids" otherwise).
ForwardResult model_forward(const Model& model, std::span<const int> ids, const ForwardOptions& options = {});

// The tokens a prompt goes through the decoder at a time: its buffers (forward_buffer_bytes) are
// then 256 rows' instead of n's (1.3 GiB at 16,384 tokens of a 0.5B model: more than its
// weights), and its products run as fast (4,096 tokens of a 0.5B model through the cache: 20.0 s
// in batches of 256, 19.7 s of 512, 21.4 s all at once, on 2 AVX-512 cores).
inline constexpr std::size_t kPrefillBatch = 256;

// Generation through a KV cache: each step runs only the new tokens, appending their keys and
// values to the cache and attending with the decode kernel (kernels/flash_decode.hpp) to
// everything cached. The logits equal a full forward pass over all tokens so far.
class Decoder {
 public:
  explicit Decoder(const Model& model, CacheType cache_type = CacheType::f32);
  // Runs `ids` (the next tokens, at positions length()..) and returns the last one's logits
  // [vocab]; InputError naming "ids" past the model's positions or vocabulary. A long input
  // (a prompt) goes through kPrefillBatch tokens at a time: its buffers are a batch's, not n's.
  std::vector<float> step(std::span<const int> ids);
  std::size_t length() const { return length_; }  // tokens run so far
  // Room for `tokens` in all, where the caller knows how many it will run (a prompt and the new
  // tokens): the cache then holds its formula's bytes, without step's doubling (which, from a
  // prompt of n, makes room for 2n at the first new token and holds both while it moves).
  void reserve(std::size_t tokens) { cache_.reserve(std::min(tokens, model_.config.n_positions)); }
  const KVCache& cache() const { return cache_; }
  // With weights kept, each step also writes the last new token's attention weights over the
  // whole cache, itself included: last_weights()[l] is [H × length()] (head h's row at
  // h·length()), what softmax(q·kᵀ · scale) gives from the cached keys (0 outside a window).
  void keep_weights(bool keep) { keep_weights_ = keep; }
  const std::vector<std::vector<float>>& last_weights() const { return last_weights_; }

 private:
  // One batch of at most kPrefillBatch tokens through every layer; its last token's logits
  // where `logits` asks for them (the batches before a prompt's last need none).
  std::vector<float> step_batch(std::span<const int> ids, bool logits);
  const Model& model_;
  KVCache cache_;  // n_layer layers, n_head KV heads of d_head
  std::size_t length_ = 0;
  bool keep_weights_ = false;
  std::vector<std::vector<float>> last_weights_;  // [L][H × length]
};

// The forward from block `layer` on (0 to L): x [n × d] the stream entering it (a run's
// stream[layer].x_in, patched; at L, its final_stream), through the remaining blocks (with the
// options' interventions) and the LM head: logits [(n − first_row) × vocab], the tokens at
// positions first_row..n−1. What activation patching and the interventions rerun.
std::vector<float> forward_from(const Model& model, std::size_t layer, std::vector<float> x,
                                const ForwardOptions& options = {}, std::size_t first_row = 0);

// The same for a run whose rows before `first` are unchanged (activation patching at row
// `first`): x [(n − first) × d] the stream entering block `layer` at rows first..n−1, and
// `run` the kept stream of the run it was taken from ([L] LayerStream, model_forward with
// keep_stream): its rows before `first` enter through their keys and values alone, as a KV
// cache, so the rerun costs rows (n − first) instead of n. Returns the last row's logits [vocab].
std::vector<float> forward_suffix(const Model& model, std::size_t layer, std::span<const LayerStream> run,
                                  std::size_t first, std::vector<float> x);

// The gradient of m = logit(target) − logit(contrast) (contrast −1: the target's logit alone) at
// row `position` with respect to the stream entering block 0, x [n × d] (the input
// embeddings): the forward kept, then every block's backward (the one training runs), the
// weights read where they lie. Priced like keep_stream; InputError naming "position",
// "target" or "contrast".
struct StreamGradient {
  double metric = 0;            // m at x
  std::vector<float> gradient;  // [n × d] ∂m/∂x
};
StreamGradient stream_gradient(const Model& model, std::span<const float> x, std::size_t position, int target,
                               int contrast = -1);

// logits [n × vocab] of residual-stream rows x [n × d]: the final norm, then the LM head (the
// forward's own last step; the logit lens applies it to the stream after every block).
std::vector<float> unembed(const Model& model, std::span<const float> x, std::size_t n);

// The rotary frequencies f_i of a layer's heads (i < rotated / 2): θ^(−2i/rotated), divided
// by the factor for "linear" scaling, and for "llama3" divided where the wavelength 2π/f_i
// is longer than original / low_freq_factor, kept where shorter than original /
// high_freq_factor, blended between; window layers with rope.local_theta (Gemma 3) use it, unscaled.
// Pair (x_i, x_{i + rotated/2}) of a head at position p is rotated by the angle p · f_i.
std::vector<double> rope_frequencies(const ModelConfig& config, std::size_t layer);

// FLOPs of one forward pass over n tokens: 2 per multiply-add of every linear layer, the
// causal half of q·kᵀ and a·v, and the logits of the positions asked.
double forward_flops(const ModelConfig& config, std::size_t n, LogitRows logits = LogitRows::every);

// Bytes model_forward's own buffers take at their largest over n tokens without kept weights:
// the logits [n × vocab], the residual stream, and one block's temporaries (q | k | v, the
// heads' outputs, the MLP's hidden and activated rows). What memory a forward needs beyond
// the weights, for the bench's memory check.
std::size_t forward_buffer_bytes(const ModelConfig& config, std::size_t n, LogitRows logits = LogitRows::every);
// What a Decoder's step over n new tokens needs beyond the weights and the cache: a batch's
// buffers (at most kPrefillBatch rows) and the last token's logits.
std::size_t decoder_buffer_bytes(const ModelConfig& config, std::size_t n);
// The positions whose logits a forward over n tokens computes.
inline std::size_t logit_rows(std::size_t n, LogitRows logits) {
  return logits == LogitRows::every ? n : logits == LogitRows::last ? std::min<std::size_t>(n, 1) : 0;
}

// The next-token distribution at a position: the k most probable ids, softmax of the logits.
struct TokenProbability {
  int id = 0;
  double probability = 0;
};
std::vector<TokenProbability> top_k(std::span<const float> logits, std::size_t k);

// log Σ_v exp(logits_v), summed from the largest down so that nothing overflows: the softmax
// over the vocabulary is exp(logits_v − log_sum_exp(logits)), a token's loss
// log_sum_exp(logits) − logits_target. Every softmax over the vocabulary outside training's
// backward goes through it.
double log_sum_exp(std::span<const float> logits);

// Mean next-token cross-entropy (nats) of positions [first, last) predicting ids[i + 1].
double next_token_loss(const ForwardResult& result, std::span<const int> ids, std::size_t first, std::size_t last);

// Head L.H as the engine's attention problem, from the block inputs of a forward pass that kept
// the weights (keep_attention).
AttentionInput head_attention_input(const Model& model, const ForwardResult& result, HeadRef head);

}  // namespace attnlab
