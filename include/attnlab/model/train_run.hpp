// A training run: a small GPT-2 trained on this CPU on the induction task (repeated random
// tokens), with the loss, the in-context loss and every head's detector scores logged as it
// goes, so the previous-token and induction heads can be watched as they form.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "attnlab/model/detectors.hpp"
#include "attnlab/model/gpt2.hpp"
#include "attnlab/model/training.hpp"

namespace attnlab {

struct TrainSettings {
  std::size_t layers = 2, heads = 2, d_model = 32, context = 32, vocab = 28;  // vocab includes BOS (the last id)
  std::size_t steps = 1500, batch = 16, warmup = 50, log_every = 50, checkpoint_every = 500;
  double learning_rate = 1e-2, clip = 1.0, weight_decay = 0.0;
  std::uint64_t seed = 0;
  bool attention_only = false;
};

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
  double loss_first_half = 0, loss_second_half = 0;  // held-out [BOS, r, r]: first copy vs the repeat
  std::vector<HeadScores> heads;                     // on held-out [BOS, r, r] sequences
};

// Mean next-token loss of the first copy (r_2..r_k predicted) and of the repeat, on fixed
// held-out [BOS, r_1..r_k, r_1..r_k] sequences.
std::pair<double, double> in_context_losses(const Gpt2Model& model, std::uint64_t seed, std::size_t count = 16,
                                            const std::vector<HeadRef>& ablate = {});

// A fresh model of these settings: GPT-2's initialisation (N(0, 0.02), residual projections
// scaled by 1/√(2L), LayerNorms 1 and 0), seeded.
Gpt2Model initial_model(const TrainSettings& settings);

// Trains, calling `on_log` every log_every steps (and at the end) with the model as it is;
// stops early when `stop()` turns true. Returns the trained model.
Gpt2Model train_induction(const TrainSettings& settings,
                          const std::function<void(const TrainLog&, const Gpt2Model&)>& on_log,
                          const std::function<bool()>& stop = {});

}  // namespace attnlab
