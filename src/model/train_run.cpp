// A training run on the induction task (attnlab/model/train_run.hpp).
#include "attnlab/model/train_run.hpp"

#include <chrono>
#include <cmath>

#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

InductionSequence induction_sequence(std::uint64_t seed, std::size_t context, std::size_t vocab) {
  SplitMix64 rng(seed);
  const int bos = static_cast<int>(vocab - 1);
  const auto token = [&] { return static_cast<int>(rng.next() % (vocab - 1)); };
  // k from 4 to half of what follows BOS; the first copy starts anywhere that leaves room.
  const std::size_t room = context - 1, k = 4 + rng.next() % (room / 2 - 3);
  const std::size_t start = 1 + rng.next() % (room - 2 * k + 1);
  InductionSequence s;
  s.ids.push_back(bos);
  while (s.ids.size() < context)
    s.ids.push_back(token());
  for (std::size_t i = 0; i < k; ++i)
    s.ids[start + k + i] = s.ids[start + i];
  s.repeat_start = start + k;
  s.length = k;
  return s;
}

std::pair<double, double> in_context_losses(const Gpt2Model& model, std::uint64_t seed, std::size_t count,
                                            const std::vector<HeadRef>& ablate) {
  const std::size_t vocab = model.config.vocab_size;
  double first = 0, second = 0;
  for (const std::vector<int>& ids : default_detector_sequences(model.config, seed, count)) {
    const std::size_t k = (ids.size() - 1) / 2;
    const ForwardResult r = gpt2_forward(model, ids, {.ablate = ablate});
    first += next_token_loss(r, ids, vocab, 1, k);
    second += next_token_loss(r, ids, vocab, k + 1, 2 * k);
  }
  return {first / double(count), second / double(count)};
}

Gpt2Model initial_model(const TrainSettings& s) {
  if (s.d_model % s.heads != 0) fail("--d-model", "must be divisible by --heads");
  const Gpt2Config c{s.layers, s.heads, s.d_model, s.context, s.vocab, 4 * s.d_model, 1e-5};
  SplitMix64 rng(s.seed);
  std::vector<float> p(parameter_count(c));
  const double residual = 0.02 / std::sqrt(2.0 * double(s.layers));
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const bool gain = t.name.ends_with("ln_1.weight") || t.name.ends_with("ln_2.weight") || t.name == "ln_f.weight";
    const bool bias = t.name.ends_with(".bias");
    const bool mlp = t.name.find("mlp.") != std::string::npos;
    const double scale = t.name.ends_with("c_proj.weight") ? residual : 0.02;
    for (std::size_t k = 0; k < t.size; ++k)
      p[t.offset + k] = gain ? 1.0f : bias || (mlp && s.attention_only) ? 0.0f : float(scale * rng.normal());
  }
  return unflatten(c, p);
}

Gpt2Model train_induction(const TrainSettings& s, const std::function<void(const TrainLog&, const Gpt2Model&)>& on_log,
                          const std::function<bool()>& stop) {
  Gpt2Model model = initial_model(s);
  const Gpt2Config& c = model.config;
  std::vector<float> p = flatten<float>(model), g(p.size());
  AdamW adam;
  adam.weight_decay = s.weight_decay;
  const auto start = std::chrono::steady_clock::now();
  const auto log = [&](std::size_t step, double loss) {
    Gpt2Model now = unflatten(c, p);
    TrainLog entry;
    entry.step = step;
    entry.loss = loss;
    std::tie(entry.loss_first_half, entry.loss_second_half) = in_context_losses(now, s.seed + 1'000'000);
    entry.heads = detect_heads(now, default_detector_sequences(c, s.seed + 2'000'000, 4));
    entry.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    on_log(entry, now);
  };
  double loss = std::log(double(s.vocab));
  std::size_t step = 0;
  for (; step < s.steps && !(stop && stop()); ++step) {
    if (step % s.log_every == 0) log(step, loss);
    Batch batch;
    for (std::size_t b = 0; b < s.batch; ++b)
      batch.push_back(induction_sequence(s.seed * 1'000'003 + step * s.batch + b, s.context + 1, s.vocab).ids);
    loss = loss_and_gradients<float>(c, p, batch, g, {.attention_only = s.attention_only});
    clip_gradients(g, s.clip);
    const double rate = s.learning_rate * std::min(1.0, double(step + 1) / double(std::max<std::size_t>(s.warmup, 1)));
    adam.step(p, g, rate);
    if (s.attention_only)  // the MLPs stay zero: the checkpoint then computes the same function anywhere
      for (const ParameterTensor& t : parameter_tensors(c))
        if (t.name.find("mlp.") != std::string::npos) std::fill_n(p.begin() + t.offset, t.size, 0.0f);
  }
  log(step, loss);
  return unflatten(c, p);
}

}  // namespace attnlab
