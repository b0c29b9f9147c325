// A training run on the induction task or a text (attnlab/model/train_run.hpp).
#include "attnlab/model/train_run.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/core/limits.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

std::string_view train_architecture_name(TrainArchitecture a) {
  return a == TrainArchitecture::llama ? "llama" : "gpt2";
}

TrainArchitecture parse_train_architecture(std::string_view name, std::string_view field) {
  for (TrainArchitecture a : {TrainArchitecture::gpt2, TrainArchitecture::llama})
    if (name == train_architecture_name(a)) return a;
  fail(field, fmt::format("\"{}\" is not an architecture attnlab trains; give gpt2 or llama", text_excerpt(name, 40)));
}

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

std::vector<int> look_back_sequence(std::uint64_t seed, std::size_t context, std::size_t vocab) {
  SplitMix64 rng(seed);
  const int tokens = static_cast<int>(vocab - 1);  // BOS is never drawn
  std::vector<int> ids{tokens};
  while (ids.size() < context) {
    const int random = static_cast<int>(rng.next() % static_cast<std::uint64_t>(tokens));
    const bool follows_rule = ids.size() >= 3 && rng.next() % 5 != 0;
    ids.push_back(follows_rule ? (ids[ids.size() - 2] + kLookBackShift) % tokens : random);
  }
  return ids;
}

bool has_prev_token_phase(const TrainSettings& s) { return !s.text && s.layers > 1 && s.prev_token_steps > 0; }

TextCorpus byte_corpus(std::string_view text, std::string file) {
  std::array<int, 256> id;
  id.fill(-1);
  for (unsigned char b : text)
    id[b] = 0;
  TextCorpus corpus{.file = std::move(file), .tokenizer = "bytes"};
  nlohmann::json vocab = nlohmann::json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b)
    if (id[b] == 0) {
      id[b] = next;
      std::string symbol;
      const char32_t c = byte_to_unicode(static_cast<std::uint8_t>(b));  // U+0021..U+0143: one or two UTF-8 bytes
      if (c < 0x80)
        symbol += static_cast<char>(c);
      else
        symbol += static_cast<char>(0xC0 | (c >> 6)), symbol += static_cast<char>(0x80 | (c & 0x3F));
      vocab[symbol] = next++;
    }
  vocab[std::string(kEndOfText)] = next;
  corpus.vocab = static_cast<std::size_t>(next) + 1;
  corpus.ids.reserve(text.size());
  for (unsigned char b : text)
    corpus.ids.push_back(id[b]);
  corpus.vocab_json = vocab.dump();
  corpus.merges_txt = "#version: 0.2\n";
  return corpus;
}

TextCorpus bpe_corpus(std::string_view text, std::string file, const BpeTokenizer& tokenizer, std::string vocab_json,
                      std::string merges_txt) {
  const std::optional<TokenId> bos = tokenizer.end_of_text();
  if (!bos || static_cast<std::size_t>(*bos) + 1 != tokenizer.id_limit())
    fail("vocab.json", "the text task needs <|endoftext|> as the vocabulary's last id (BOS), as GPT-2's has");
  TextCorpus corpus{.file = std::move(file), .tokenizer = "gpt2", .vocab = tokenizer.id_limit()};
  // The encoder takes at most kMaxEncodeBytes at a time: the text goes in pieces cut after
  // a newline (or, in a line longer than that, anywhere), so merges rarely meet a cut.
  while (!text.empty()) {
    std::size_t cut = std::min(text.size(), kMaxEncodeBytes);
    if (cut < text.size())
      if (const std::size_t newline = text.substr(0, cut).rfind('\n'); newline != std::string_view::npos)
        cut = newline + 1;
    for (const TokenId id : tokenizer.encode_ordinary(text.substr(0, cut)))
      corpus.ids.push_back(id);
    text.remove_prefix(cut);
  }
  corpus.vocab_json = std::move(vocab_json);
  corpus.merges_txt = std::move(merges_txt);
  return corpus;
}

std::pair<double, double> in_context_losses(const Model& model, std::uint64_t seed, std::size_t count,
                                            const std::vector<HeadRef>& ablate) {
  double first = 0, second = 0;
  for (const std::vector<int>& ids : default_detector_sequences(model.config, seed, count)) {
    const std::size_t k = (ids.size() - 1) / 2;
    const ForwardResult r = model_forward(model, ids, {.ablate = ablate});
    first += next_token_loss(r, ids, 1, k);
    second += next_token_loss(r, ids, k + 1, 2 * k);
  }
  return {first / double(count), second / double(count)};
}

namespace {

std::size_t vocab_of(const TrainSettings& s) { return s.text ? s.text->vocab : s.vocab; }

// The task's sequences of context + 1 tokens, each from a seed: induction sequences, or
// [BOS, a window of the text]. Training windows start anywhere in the first nine tenths of
// the text; held-out windows lie in the last tenth (at least one window long).
class TaskData {
 public:
  explicit TaskData(const TrainSettings& s) : s_(s) {
    if (!s.text) return;
    const std::size_t window = s.context, n = s.text->ids.size();
    if (n < 2 * window)
      fail(s.text->file,
           fmt::format("has {} tokens; training with --context {} needs at least {} (a window to train on "
                       "and one held out)",
                       n, window, 2 * window));
    held_out_start_ = std::min(n - window, n - n / 10);
  }

  // A training sequence; in the previous-token phase, a look-back sequence.
  std::vector<int> training(std::uint64_t seed, bool prev_token_phase = false) const {
    if (prev_token_phase) return look_back_sequence(seed, s_.context + 1, s_.vocab);
    if (!s_.text) return induction_sequence(seed, s_.context + 1, s_.vocab).ids;
    return window(SplitMix64(seed).next() % (held_out_start_ - s_.context + 1));
  }

  std::vector<int> held_out(std::uint64_t seed) const {
    if (!s_.text) return training(seed);
    return window(held_out_start_ + SplitMix64(seed).next() % (s_.text->ids.size() - s_.context - held_out_start_ + 1));
  }

 private:
  std::vector<int> window(std::size_t start) const {  // [BOS, context tokens of the text from start]
    std::vector<int> ids{static_cast<int>(s_.text->vocab - 1)};
    ids.insert(ids.end(), s_.text->ids.begin() + static_cast<std::ptrdiff_t>(start),
               s_.text->ids.begin() + static_cast<std::ptrdiff_t>(start + s_.context));
    return ids;
  }

  const TrainSettings& s_;
  std::size_t held_out_start_ = 0;
};

// The mean next-token loss over fixed held-out sequences.
double held_out_loss(const Model& model, const std::vector<std::vector<int>>& sequences) {
  double total = 0;
  for (const std::vector<int>& ids : sequences) {
    const ForwardResult r = model_forward(model, std::span(ids).first(ids.size() - 1));
    total += next_token_loss(r, ids, 0, ids.size() - 1);
  }
  return total / double(sequences.size());
}

}  // namespace

ModelConfig training_config(const TrainSettings& s) {
  ModelConfig c{s.layers, s.heads, s.d_model, s.context, vocab_of(s), 4 * s.d_model, 1e-5};
  if (s.architecture == TrainArchitecture::gpt2) return c;
  c.family = Family::llama;
  c.n_kv_head = s.kv_heads ? s.kv_heads : s.heads;
  c.n_inner = std::max<std::size_t>(8, 8 * s.d_model / 3 / 8 * 8);
  c.norm = NormKind::rms_norm;
  c.rotary = true;
  c.qkv_bias = c.out_bias = c.mlp_bias = false;
  c.mlp = MlpKind::swiglu;
  return c;
}

Model initial_model(const TrainSettings& s) {
  check_train_settings(s);
  const ModelConfig c = training_config(s);
  SplitMix64 rng(s.seed);
  std::vector<float> p(parameter_count(c));
  const double residual = 0.02 / std::sqrt(2.0 * double(s.layers));
  using S = TensorSlot;
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const bool gain = is_norm_weight(t);
    const bool bias = t.name.ends_with(".bias");
    const bool mlp = is_mlp_tensor(t);
    const bool attention = t.slot == S::attn_weight || t.slot == S::attn_proj_weight;
    const double scale = attention ? s.attention_init : t.slot == S::mlp_proj_weight ? residual : 0.02;
    for (std::size_t k = 0; k < t.size; ++k)
      p[t.offset + k] = gain                                ? (c.norm_plus_one ? 0.0f : 1.0f)
                        : bias || (mlp && s.attention_only) ? 0.0f
                                                            : float(scale * rng.normal());
  }
  return unflatten(c, p);
}

TrainingPrice price_training(const TrainSettings& s) {
  const ModelConfig c = training_config(s);
  const double L = double(s.layers), H = double(s.heads), d = double(s.d_model), n = double(s.context),
               V = double(c.vocab_size), W = double(c.qkv_width()), Z = double(c.attention_width()),
               F = double(c.fc_width()), I = double(c.n_inner);
  TrainingPrice price;
  price.parameters = double(c.parameters());
  price.state_bytes = 6 * price.parameters * 4;
  const double per_layer =
      3 * n * d + n * W + H * n * n + n * Z + 4 * n + (s.attention_only ? 0 : n * d + n * F + n * I + 2 * n);
  price.activation_bytes = (L * per_layer + 8 * n * d + n * W + n * Z + n * F + n * I + n * V + 2 * n) * 4;
  price.batch_bytes = double(s.batch) * (n + 1) * double(sizeof(int));
  return price;
}

namespace {

// "1.5 GiB", "12.0 MiB".
std::string bytes_text(double bytes) {
  constexpr double MiB = 1 << 20, GiB = 1 << 30;
  return bytes >= GiB ? fmt::format("{:.1f} GiB", bytes / GiB) : fmt::format("{:.1f} MiB", bytes / MiB);
}

// A whole number with thousands separators: 9,666,486,272.
std::string count_text(double count) {
  const std::string digits = fmt::format("{:.0f}", count);
  std::string text;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) text += ',';
    text += digits[k];
  }
  return text;
}

}  // namespace

void check_training_price(const TrainSettings& s) {
  const TrainingPrice price = price_training(s);
  if (price.total_bytes() <= double(kMaxTrainBytes)) return;
  // The flag that drives the larger part: the context (activations: H·n² a layer), else the
  // vocabulary when the embedding table is most of the parameters (the tokenizer's, for a
  // text), else the width (12·d² a layer).
  const double embeddings = double(vocab_of(s)) * double(s.d_model);
  const char* field = price.activation_bytes > price.state_bytes ? "context"
                      : embeddings > price.parameters / 2        ? (s.text ? "tokenizer" : "vocab")
                                                                 : "d_model";
  fail(field,
       fmt::format("{} layers × {} heads, d_model {}, context {}, vocabulary {}, batch {} would hold about {}: "
                   "{} parameters, six copies as floats (weights, gradients, AdamW's two moments, the model a "
                   "checkpoint writes) {}, one sequence's activations {}, the batch's tokens {}; the limit is {} "
                   "GiB: a smaller d_model, layers, vocabulary or context",
                   s.layers, s.heads, s.d_model, s.context, vocab_of(s), s.batch, bytes_text(price.total_bytes()),
                   count_text(price.parameters), bytes_text(price.state_bytes), bytes_text(price.activation_bytes),
                   bytes_text(price.batch_bytes), kMaxTrainBytes >> 30));
}

namespace {

// The number of log entries (or checkpoints) a run of `steps` makes every `every` steps:
// steps 0, every, 2·every, ... and the last.
std::size_t every_count(std::size_t steps, std::size_t every) {
  if (every >= steps) return 2;  // the first step and the last
  return steps / every + 1 + (steps % every != 0);
}

// What a run writes and computes, against the limits: its log, its checkpoints, its FLOPs
// and its checkpoints' bytes.
void check_training_work(const TrainSettings& s, const TrainLimits& L) {
  if (every_count(s.steps, s.log_every) - 1 > L.max_logs)
    fail("log_every", fmt::format("{} steps logged every {} is {} log entries; at most {} (log less often)", s.steps,
                                  s.log_every, every_count(s.steps, s.log_every), L.max_logs + 1));
  const std::size_t checkpoints = every_count(s.steps, s.checkpoint_every);
  if (checkpoints - 1 > L.max_checkpoints)
    fail("checkpoint_every", fmt::format("{} steps with a checkpoint every {} is {} checkpoints; at most {}", s.steps,
                                         s.checkpoint_every, checkpoints, L.max_checkpoints + 1));
  const double parameters = double(training_config(s).parameters());
  const double flops = 6.0 * parameters * double(s.steps) * double(s.batch) * double(s.context);
  if (flops > L.max_flops)
    fail("steps", fmt::format("{} steps × batch {} × context {} × {} parameters is about {:.2g} training FLOPs; at "
                              "most {:.0g} {} (fewer steps, a smaller batch or model)",
                              s.steps, s.batch, s.context, std::size_t(parameters), flops, L.max_flops, L.hint));
  const double bytes = parameters * 4.0 * double(checkpoints + 1);
  if (bytes > double(L.max_checkpoint_bytes))
    fail("checkpoint_every",
         fmt::format("{} checkpoints (and the final model) of {} parameters is {:.0f} MiB; at most {} MiB (checkpoint "
                     "less often)",
                     checkpoints, std::size_t(parameters), bytes / (1 << 20), L.max_checkpoint_bytes >> 20));
}

}  // namespace

void check_train_settings(const TrainSettings& s, const TrainLimits* limits) {
  if (limits) {
    const TrainLimits& L = *limits;
    const auto within = [&](std::uint64_t value, std::string_view field, std::uint64_t low, std::uint64_t high) {
      check_count(value, field, {.low = low, .high = high, .hint = L.hint});
    };
    within(s.layers, "layers", 1, L.max_layers);
    within(s.heads, "heads", 1, L.max_heads);
    if (s.kv_heads) within(s.kv_heads, "kv_heads", 1, L.max_heads);
    within(s.d_model, "d_model", L.min_d_model, L.max_d_model);
    within(s.context, "context", L.min_context, L.max_context);
    if (!s.text) within(s.vocab, "vocab", L.min_vocab, L.max_vocab);
    within(s.steps, "steps", 1, L.max_steps);
    within(s.prev_token_steps, "prev_token_steps", 0, L.max_steps);
    within(s.batch, "batch", 1, L.max_batch);
    within(s.warmup, "warmup", 0, L.max_warmup);
    within(s.seed, "seed", 0, L.max_seed);
    within(s.log_every, "log_every", 1, L.max_steps);
    within(s.checkpoint_every, "checkpoint_every", 1, L.max_steps);
    if (!(s.learning_rate >= L.min_lr && s.learning_rate <= L.max_lr))
      fail("lr", fmt::format("{} is not a learning rate from {} to {}", s.learning_rate, L.min_lr, L.max_lr));
  }
  if (s.heads == 0 || s.d_model % s.heads != 0)
    fail("d_model",
         fmt::format("{} is not divisible by heads {}; each head gets d_model / heads dimensions", s.d_model, s.heads));
  if (s.kv_heads && s.architecture != TrainArchitecture::llama)
    fail("kv_heads", "GPT-2 has one KV head per query head; grouped-query attention needs the llama architecture");
  if (s.kv_heads && s.heads % s.kv_heads != 0)
    fail("kv_heads", fmt::format("{} does not divide heads {}: each KV head serves the same number of query heads",
                                 s.kv_heads, s.heads));
  if (s.bf16) check_bf16_products("bf16");
  if (limits) check_training_work(s, *limits);
  check_training_price(s);
}

Model train_model(const TrainSettings& s, const std::function<void(const TrainLog&, const Model&)>& on_log,
                  const std::function<bool()>& stop) {
  const TaskData data(s);
  std::vector<std::vector<int>> held_out;
  for (std::size_t k = 0; k < 16; ++k)
    held_out.push_back(data.held_out((s.seed + 1) * 0xD1B54A32D192ED03ull + k));  // far from the training seeds
  Model model = initial_model(s);
  const ModelConfig& c = model.config;
  std::vector<float> p = flatten<float>(model), g(p.size());
  // Which parameters learn in each phase (one flag each): in the previous-token phase
  // layer 0 and what no block owns (embeddings, the final LayerNorm); after it, all but layer 0.
  const bool phases = has_prev_token_phase(s);
  std::vector<std::uint8_t> first_phase(p.size(), 1), second_phase(p.size(), 1);
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const bool layer0 = t.layer == 0, block = t.layer != kNotInABlock;
    std::fill_n(first_phase.begin() + t.offset, t.size, std::uint8_t(!block || layer0));
    std::fill_n(second_phase.begin() + t.offset, t.size, std::uint8_t(!layer0));
  }
  AdamW adam;
  adam.weight_decay = s.weight_decay;
  const auto start = std::chrono::steady_clock::now();
  const auto log = [&](std::size_t step, double loss) {
    Model now = unflatten(c, p);
    TrainLog entry;
    entry.step = step;
    entry.loss = loss;
    entry.loss_held_out = held_out_loss(now, held_out);
    std::tie(entry.loss_first_half, entry.loss_second_half) = in_context_losses(now, s.seed + 1'000'000);
    entry.heads = detect_heads(now, default_detector_sequences(c, s.seed + 2'000'000, 4));
    entry.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    on_log(entry, now);
  };
  double loss = std::log(double(c.vocab_size));
  std::size_t step = 0;
  for (; step < s.steps && !(stop && stop()); ++step) {
    if (step % s.log_every == 0) log(step, loss);
    const bool first = phases && step < s.prev_token_steps;
    if (phases && step == s.prev_token_steps)  // layer 0's outputs (attention, MLP), weights and biases, scaled down
      for (const ParameterTensor& t : parameter_tensors(c))
        if (t.layer == 0 && (t.slot == TensorSlot::attn_proj_weight || t.slot == TensorSlot::attn_proj_bias ||
                             t.slot == TensorSlot::mlp_proj_weight || t.slot == TensorSlot::mlp_proj_bias))
          for (std::size_t k = 0; k < t.size; ++k)
            p[t.offset + k] = float(p[t.offset + k] * s.layer0_output_scale);
    const std::vector<std::uint8_t>& learns = first ? first_phase : second_phase;
    Batch batch;
    for (std::size_t b = 0; b < s.batch; ++b)
      batch.push_back(data.training(s.seed * 1'000'003 + step * s.batch + b, first));
    loss = loss_and_gradients<float>(c, p, batch, g, {.attention_only = s.attention_only, .bf16 = s.bf16});
    if (phases)  // what does not learn now does not count in the gradient's norm either
      for (std::size_t k = 0; k < g.size(); ++k)
        g[k] = learns[k] ? g[k] : 0.0f;
    clip_gradients(g, s.clip);
    const double rate = s.learning_rate * std::min(1.0, double(step + 1) / double(std::max<std::size_t>(s.warmup, 1)));
    adam.step(p, g, rate, phases ? std::span<const std::uint8_t>(learns) : std::span<const std::uint8_t>());
    if (s.attention_only)  // the MLPs stay zero: the checkpoint then computes the same function anywhere
      for (const ParameterTensor& t : parameter_tensors(c))
        if (is_mlp_tensor(t)) std::fill_n(p.begin() + t.offset, t.size, 0.0f);
  }
  log(step, loss);
  return unflatten(c, p);
}

}  // namespace attnlab
