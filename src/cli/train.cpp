// attnlab train --out DIR [...]: a small GPT-2 trained here on the induction task or on a
// text, with the loss, the held-out loss, the in-context loss and every head's detector
// scores logged as it trains.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/train_run.hpp"
#include "common.hpp"
#include "numbers.hpp"

namespace attnlab::cli {

namespace {

namespace fs = std::filesystem;

std::atomic<bool> interrupted{false};
void on_interrupt(int) { interrupted = true; }

// The strongest head of a detector, as "L.H score".
std::string strongest(const std::vector<HeadScores>& heads, double HeadScores::*score) {
  const auto best = std::max_element(heads.begin(), heads.end(), [&](auto& a, auto& b) { return a.*score < b.*score; });
  return fmt::format("{} {:.2f}", to_string(best->head), (*best).*score);
}

// The text task's corpus: bytes, or GPT-2's BPE with the tokenizer in `tokenizer_dir`.
std::shared_ptr<const TextCorpus> load_corpus(const std::string& file, const std::string& tokenizer_dir) {
  const std::string text = read_file_within(file, kMaxTrainTextBytes, "--task");
  if (tokenizer_dir.empty()) return std::make_shared<const TextCorpus>(byte_corpus(text, file));
  const fs::path dir(tokenizer_dir);
  std::error_code error;
  if (!fs::is_directory(dir, error))
    fail("--tokenizer", fmt::format("{} is not a directory; give the directory that holds GPT-2's vocab.json and "
                                    "merges.txt (or leave --tokenizer out to train on bytes)",
                                    dir.string()));
  for (const char* name : {"vocab.json", "merges.txt"})
    if (!fs::is_regular_file(dir / name, error))
      fail("--tokenizer", fmt::format("{} has no {}; a tokenizer directory holds GPT-2's vocab.json and merges.txt",
                                      dir.string(), name));
  // The tokenizer's errors name its file ("vocab.json: ..."): said here as the flag's, with the path.
  const BpeTokenizer tokenizer = [&] {
    try {
      return BpeTokenizer::load(dir / "vocab.json", dir / "merges.txt");
    } catch (const InputError& e) {
      throw InputError("--tokenizer", fmt::format("{}: {}", (dir / e.field()).string(), e.message()));
    }
  }();
  return std::make_shared<const TextCorpus>(
      bpe_corpus(text, file, tokenizer, read_file_within(dir / "vocab.json", kMaxVocabFileBytes, "--tokenizer"),
                 read_file_within(dir / "merges.txt", kMaxVocabFileBytes, "--tokenizer")));
}

}  // namespace

Command train_command(CLI::App& parent) {
  struct State {
    std::string out, tokenizer, arch = "gpt2";
    std::vector<std::string> task{"induction"};
    TrainSettings s;
    bool force = false;
  };
  auto state = std::make_shared<State>();
  TrainSettings& s = state->s;
  CLI::App* app =
      parent.add_subcommand("train", "Train a small GPT-2 or Llama-style model here and watch its heads form");
  app->add_option("--out", state->out, "Directory for the model, its checkpoints and train.json")->required();
  app->add_option("--task", state->task,
                  "induction (random tokens with a repeated stretch), or text FILE (one token per byte, or GPT-2's "
                  "BPE with --tokenizer)")
      ->expected(1, 2)
      ->capture_default_str();
  app->add_option("--tokenizer", state->tokenizer,
                  "With --task text: a directory with GPT-2's vocab.json and merges.txt (default: bytes)");
  // Each setting's range is kTrainLimits', checked with the rest by check_train_settings.
  const TrainLimits& L = kTrainLimits;
  app->add_option("--arch", state->arch,
                  "gpt2 (LayerNorm, learned positions, GELU) or llama (RMSNorm, rotary positions, grouped-query "
                  "attention, SwiGLU)")
      ->capture_default_str();
  app->add_option("--layers", s.layers, fmt::format("Layers L, 1 to {}", L.max_layers))->capture_default_str();
  app->add_option("--heads", s.heads, fmt::format("Heads per layer H, 1 to {}", L.max_heads))->capture_default_str();
  app->add_option("--kv-heads", s.kv_heads, "With --arch llama: KV heads H_kv, dividing --heads (default: --heads)");
  app->add_option("--d-model", s.d_model, fmt::format("Width d_model, {} to {}", L.min_d_model, L.max_d_model))
      ->capture_default_str();
  app->add_option("--context", s.context, fmt::format("Positions per sequence, {} to {}", L.min_context, L.max_context))
      ->capture_default_str();
  CLI::Option* vocab =
      app->add_option("--vocab", s.vocab,
                      fmt::format("Vocabulary of the induction task, BOS included, {} to {}", L.min_vocab, L.max_vocab))
          ->capture_default_str();
  app->add_option("--steps", s.steps, fmt::format("Optimiser steps, 1 to {}", L.max_steps))->capture_default_str();
  app->add_option("--batch", s.batch, fmt::format("Sequences per step, 1 to {}", L.max_batch))->capture_default_str();
  app->add_option("--lr", s.learning_rate,
                  fmt::format("AdamW's learning rate (after warm-up), {} to {}", L.min_lr, L.max_lr))
      ->capture_default_str();
  app->add_option("--warmup", s.warmup, "Steps of linear learning-rate warm-up")->capture_default_str();
  app->add_option("--seed", s.seed, "Seed of the weights and the data")->capture_default_str();
  app->add_option("--log-every", s.log_every, "Steps between logged evaluations")->capture_default_str();
  app->add_option("--checkpoint-every", s.checkpoint_every, "Steps between checkpoints (DIR/checkpoints/step-N)")
      ->capture_default_str();
  CLI::Option* prev_token_steps =
      app->add_option("--prev-token-steps", s.prev_token_steps,
                      "Induction task: the first N steps train layer 0 alone on look-back sequences (token i+1 is "
                      "token i-1 plus 7), so previous-token heads form; then layer 0 is kept, its outputs scaled by "
                      "1/20, and the other layers learn the task (0: one phase, every layer throughout)")
          ->capture_default_str();
  app->add_flag("--attn-only", s.attention_only, "No MLPs (their weights stay zero in the checkpoint)");
  app->add_flag("--bf16", s.bf16,
                "Every product of the forward and the backward in bf16 with f32 sums (AVX-512 BF16, or AMX tiles where "
                "the CPU has them); the weights, the gradients' sums and AdamW stay f32 (docs/training.md)");
  app->add_flag("--force", state->force, "Write into DIR even when it is not empty");
  return {
      app, [state, vocab, prev_token_steps]() {
        TrainSettings& s = state->s;
        s.architecture = parse_train_architecture(state->arch, "--arch");
        const std::vector<std::string>& task = state->task;
        if (task[0] == "text") {
          if (task.size() != 2) fail("--task", "text needs the file to train on: --task text FILE");
          if (vocab->count()) fail("--vocab", "the text task takes its vocabulary from the text; leave --vocab out");
          if (prev_token_steps->count() && s.prev_token_steps > 0)
            fail("--prev-token-steps", "only the induction task has the previous-token phase; leave it out");
          s.text = load_corpus(task[1], state->tokenizer);
        } else if (task[0] != "induction" || task.size() != 1) {
          fail("--task", fmt::format("\"{}\" is not a task; give induction, or text FILE", fmt::join(task, " ")));
        } else if (!state->tokenizer.empty()) {
          fail("--tokenizer", "is for --task text FILE");
        }
        if (s.layers == 1 && prev_token_steps->count() && s.prev_token_steps > 0)
          fail("--prev-token-steps",
               "a one-layer model has no later layer to learn after layer 0; give --layers 2 "
               "or more, or leave it out");
        const fs::path out(state->out);
        try {
          check_train_settings(s, &kTrainLimits);  // each setting's range, the shape, its memory
        } catch (const InputError& e) {
          throw with_flag_name(e);
        }
        if (fs::exists(out) && !fs::is_empty(out) && !state->force)
          fail("--out",
               fmt::format("{} is not empty; give a new directory, or --force to write into it", out.string()));
        if (has_prev_token_phase(s) && s.steps <= s.prev_token_steps)
          fmt::print(stderr,
                     "note: the run ends within the previous-token phase (--steps {} ≤ --prev-token-steps {}): only "
                     "layer 0 and the embeddings will learn\n",
                     s.steps, s.prev_token_steps);
        std::signal(SIGINT, on_interrupt);
        std::signal(SIGTERM, on_interrupt);
        const bool terminal = isatty(STDOUT_FILENO);
        // The directory (train.json, checkpoints, the final model) is written by
        // run_training, the same function a run started from the lab goes through.
        const auto on_log = [&](const TrainLog& log) {
          const double rate = log.step ? log.step * s.batch * s.context / log.seconds : 0;
          // Time left at the rate so far (logging included).
          const double left = log.step ? double(s.steps - log.step) * log.seconds / double(log.step) : 0;
          fmt::print(
              "{}step {:>6}/{}  loss {:.3f}  held-out {:.3f}  in-context {:.3f} (first copy {:.3f})  prev-token {}  "
              "induction {}  {:.0f} tokens/s  {:.1f} s, about {:.0f} s left{}",
              terminal ? "\r" : "", log.step, s.steps, log.loss, log.loss_held_out, log.loss_second_half,
              log.loss_first_half, strongest(log.heads, &HeadScores::previous_token),
              strongest(log.heads, &HeadScores::induction), rate, log.seconds, left, terminal ? "" : "\n");
          std::fflush(stdout);
        };
        const TrainingOutcome outcome = run_training(s, out, on_log, [] { return interrupted.load(); });
        if (terminal) fmt::print("\n");
        fmt::print(
            "{}: wrote config.json and model.safetensors ({}), checkpoints/ and train.json{}\n", out.string(),
            s.architecture == TrainArchitecture::llama ? "a Hugging Face Llama checkpoint" : "a GPT-2 checkpoint",
            outcome.stopped
                ? fmt::format(" (stopped early by a signal at step {}; that step is saved as the last checkpoint)",
                              outcome.last_step)
                : "");
        return outcome.stopped ? 130 : 0;
      }};
}

}  // namespace attnlab::cli
