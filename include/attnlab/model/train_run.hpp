// A training run: a small GPT-2 trained on this CPU, on the induction task (repeated random
// tokens) or on a text, with the loss, the held-out loss, the in-context loss and every
// head's detector scores logged as it goes, so the previous-token and induction heads can be
// watched as they form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/model/bpe.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/training.hpp"

namespace attnlab {

// ---- training (`attnlab train`, `attnlab bench --train`) ---------------------------------

// The memory a training run holds, priced from its shape flags before anything is allocated
// (attnlab/model/train_run.hpp, price_training): the parameters' state (six float copies:
// weights, gradients, AdamW's moments, the model a checkpoint writes), one sequence's
// activations and the batch's token ids. The lab's own runs have narrower limits
// (attnlab/server/training_jobs.hpp).
inline constexpr std::uint64_t kMaxTrainBytes = std::uint64_t{4} << 30;  // 4 GiB

// A text to train on, as token ids: the first nine tenths are trained on, the last tenth
// (at least one window) is held out. Its tokenizer's files are written beside the model, so
// a run on text is a model directory that `attnlab model` and the lab read as text.
struct TextCorpus {
  std::string file;       // where the text came from, for train.json
  std::string tokenizer;  // "bytes" (one token per byte of the text) or "gpt2" (byte-level BPE)
  std::vector<int> ids;
  std::size_t vocab = 0;  // the model's vocabulary: every id, BOS (<|endoftext|>, the last) included
  std::string vocab_json, merges_txt;
};

// The largest text `attnlab train --task text FILE` reads.
inline constexpr std::size_t kMaxTrainTextBytes = std::size_t{64} << 20;

// One token per byte: the distinct bytes of `text`, in increasing order, are ids 0..m−1
// (vocab.json names each by GPT-2's byte symbol, so "a" is "a" and a space "Ġ"), and
// <|endoftext|> is id m. merges.txt has no merges, so GPT-2's tokenizer reads the same ids.
TextCorpus byte_corpus(std::string_view text, std::string file);

// GPT-2's byte-level BPE with the given tokenizer (its files' contents are copied beside the
// model); <|endoftext|> must be its last id (BOS).
TextCorpus bpe_corpus(std::string_view text, std::string file, const BpeTokenizer& tokenizer, std::string vocab_json,
                      std::string merges_txt);

// The architectures `attnlab train` builds: GPT-2's, or Llama's (RMSNorm, rotary positions,
// grouped-query attention with kv_heads KV heads, a SwiGLU MLP, no biases; the unembedding
// tied to the embedding as SmolLM2's is).
enum class TrainArchitecture { gpt2, llama };
// "gpt2" or "llama", as train.json, the API and --arch write it.
std::string_view train_architecture_name(TrainArchitecture architecture);
// The architecture called `name`; InputError naming `field` for any other name.
TrainArchitecture parse_train_architecture(std::string_view name, std::string_view field);

struct TrainSettings {
  TrainArchitecture architecture = TrainArchitecture::gpt2;
  std::size_t layers = 2, heads = 1, d_model = 32, context = 32, vocab = 28;  // vocab includes BOS (the last id)
  std::size_t kv_heads = 0;  // llama: H_kv, dividing heads (0: heads, full multi-head attention)
  std::size_t steps = 1200, batch = 64, warmup = 50, log_every = 50, checkpoint_every = 100;
  double learning_rate = 3e-3, clip = 1.0, weight_decay = 0.0;
  double attention_init = 0.1;  // the attention weights' initial standard deviation (GPT-2's is 0.02)
  std::uint64_t seed = 0;
  bool attention_only = false;
  bool bf16 = false;                       // the products in bf16 with f32 sums (TrainingOptions::bf16)
  std::shared_ptr<const TextCorpus> text;  // the text task; null: the induction task (vocab as above)
  // The induction task's first phase (docs/training.md): for the first prev_token_steps
  // steps only layer 0 and the embeddings learn, on look-back sequences, which a
  // previous-token head predicts; then layer 0 is kept as it is, its outputs (attention and
  // MLP) scaled by layer0_output_scale so that they sit beside the token embeddings instead
  // of drowning them, and the other layers and the embeddings learn the induction task.
  // 0, a text, or a single layer: one phase, every parameter on the task throughout.
  std::size_t prev_token_steps = 300;
  double layer0_output_scale = 0.05;
};

// The first phase's look-back sequences, `context` tokens each: BOS, then random tokens of
// which, from the third on, four in five are the token two places back plus kLookBackShift
// (mod the vocabulary without BOS). A head that reads the previous token predicts them.
inline constexpr int kLookBackShift = 7;
std::vector<int> look_back_sequence(std::uint64_t seed, std::size_t context, std::size_t vocab);

// Whether a run of these settings has the previous-token phase.
bool has_prev_token_phase(const TrainSettings& settings);

// The induction task's sequences, `context` tokens each: BOS, random tokens, then a random
// stretch r_1..r_k and its repeat, then random tokens. k and where the stretch starts vary
// per sequence, so the repeat can be predicted only by looking back at what followed the
// last occurrence of the current token, never by position alone.
struct InductionSequence {
  std::vector<int> ids;
  std::size_t repeat_start = 0, length = 0;  // the second copy is ids[repeat_start .. repeat_start + length)
};
InductionSequence induction_sequence(std::uint64_t seed, std::size_t context, std::size_t vocab);

struct TrainLog {
  std::size_t step = 0;
  double seconds = 0;
  double loss = 0;                                   // the training batch's, at this step
  double loss_held_out = 0;                          // fixed held-out sequences of the task (seeded)
  double loss_first_half = 0, loss_second_half = 0;  // held-out [BOS, r, r]: first copy vs the repeat
  std::vector<HeadScores> heads;                     // on held-out [BOS, r, r] sequences
};

// Mean next-token loss of the first copy (r_2..r_k predicted) and of the repeat, on fixed
// held-out [BOS, r_1..r_k, r_1..r_k] sequences.
std::pair<double, double> in_context_losses(const Model& model, std::uint64_t seed, std::size_t count = 16,
                                            const std::vector<HeadRef>& ablate = {});

// The model these settings train: GPT-2 (LayerNorm ε 1e-5, MLP 4·d wide) or Llama (RMSNorm
// ε 1e-5, rotary θ 10000 over all of head_dim = d / H, SwiGLU MLP of 8·d/3, rounded down to a
// multiple of 8, tied unembedding), the vocabulary the task's or the text's.
ModelConfig training_config(const TrainSettings& settings);

// A fresh model of these settings: GPT-2's initialisation (N(0, 0.02), residual projections
// scaled by 1/√(2L), norms' weights 1 and biases 0), seeded, except the attention weights
// (queries, keys, values and the output projection): N(0, attention_init).
Model initial_model(const TrainSettings& settings);

// The memory a training run of these settings holds, priced from its shape before anything
// is allocated (`attnlab train` and `attnlab bench --train`). Floats throughout:
// - state: six copies of the parameters: the model, the flat weights, the gradients,
//   AdamW's two moments, and the model a log or checkpoint makes from the weights;
// - activations: what one sequence's forward and backward hold (the batch's sequences run
//   one after another), per layer 3·n·d + n·W + H·n² + n·Z + 4n (+ n·d + n·F + n·I + 2n
//   with the MLP), then 8·n·d + n·W + n·Z + n·F + n·I + n·V + 2n for the final norm, the
//   logits and the backward's buffers (n the context, d the width, V the vocabulary, H the
//   query heads, W = qkv_width, Z = H·head_dim, F = fc_width, I the MLP's width);
// - the batch: its token ids, batch × (context + 1).
// The evaluations a log makes hold less than a training step.
struct TrainingPrice {
  double parameters = 0, state_bytes = 0, activation_bytes = 0, batch_bytes = 0;
  double total_bytes() const { return state_bytes + activation_bytes + batch_bytes; }
};
TrainingPrice price_training(const TrainSettings& settings);

// Refuses settings whose price is over kMaxTrainBytes (above) with an
// InputError naming the setting that drives the larger part of it (d_model, vocab or
// tokenizer for the parameters' state, context for the activations), the price and the limit.
void check_training_price(const TrainSettings& settings);

// The ranges of a run's settings, and what a run may log, checkpoint and compute. kTrainLimits
// holds `attnlab train` and Python to them; the lab's runs have narrower ones
// (server/training_jobs.hpp's kLabTrainLimits); `bench --train` times larger shapes, held to
// the price alone.
struct TrainLimits {
  std::size_t max_layers = 12, max_heads = 16, min_d_model = 4, max_d_model = 512, min_context = 12, max_context = 256,
              min_vocab = 8, max_vocab = 4096, max_steps = 1'000'000, max_batch = 1024, max_warmup = 1'000'000;
  double min_lr = 1e-6, max_lr = 1.0;
  std::uint64_t max_seed = std::numeric_limits<std::uint64_t>::max();
  // The log's entries and the checkpoints a run writes (besides the first and the last), the
  // FLOPs of its steps (about 6 × parameters × steps × batch × context) and its checkpoints' bytes.
  std::size_t max_logs = std::numeric_limits<std::size_t>::max(), max_checkpoints = max_logs;
  double max_flops = std::numeric_limits<double>::infinity();
  std::uint64_t max_checkpoint_bytes = std::numeric_limits<std::uint64_t>::max();
  std::string_view hint = "";  // after a range's message: whose limit it is
};
inline constexpr TrainLimits kTrainLimits{};

// The one check of a run's settings as a whole, for every face, before anything is
// allocated: each setting within `limits` (when given), d_model divisible by heads, kv_heads
// only for Llama and dividing heads, the log's entries, the checkpoints, the FLOPs and the
// checkpoints' bytes within `limits`, then the price in memory (check_training_price). Errors name the
// setting as train.json and the API spell it ("d_model", "kv_heads"); the CLI says the flag
// (--d-model, --kv-heads).
void check_train_settings(const TrainSettings& settings, const TrainLimits* limits = nullptr);

// Trains on the task (settings.text, or induction), calling `on_log` every log_every steps
// (and at the end) with the model as it is; stops early when `stop()` turns true. Returns
// the trained model.
Model train_model(const TrainSettings& settings, const std::function<void(const TrainLog&, const Model&)>& on_log,
                  const std::function<bool()>& stop = {});

}  // namespace attnlab
