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
#include "attnlab/operations/train.hpp"
#include "common.hpp"
#include "numbers.hpp"
#include "operation_flags.hpp"

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
  // The run's settings come from the train operation's description (operations/train.hpp);
  // where the run goes and what it reads are the command's own.
  struct State {
    std::string out, tokenizer;
    std::vector<std::string> task{"induction"};
    bool force = false;
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand("train", std::string(TrainRequest::kHelp));
  app->add_option("--out", state->out, "Directory for the model, its checkpoints and train.json")->required();
  app->add_option("--task", state->task,
                  "induction (random tokens with a repeated stretch), or text FILE (one token per byte, or GPT-2's "
                  "BPE with --tokenizer)")
      ->expected(1, 2)
      ->capture_default_str();
  app->add_option("--tokenizer", state->tokenizer,
                  "With --task text: a directory with GPT-2's vocab.json and merges.txt (default: bytes)");
  auto flags = std::make_shared<OperationFlags>(*app, describe_operation<TrainRequest>());
  app->add_flag("--force", state->force, "Write into DIR even when it is not empty");
  return {
      app, [state, flags]() {
        const nlohmann::json body = flags->body();
        const TrainRequest request = read_flags<TrainRequest>(*flags);
        TrainSettings s = naming_flags([&] { return request.train_settings(); });
        const std::vector<std::string>& task = state->task;
        if (task[0] == "text") {
          if (task.size() != 2) fail("--task", "text needs the file to train on: --task text FILE");
          if (body.contains("vocab"))
            fail("--vocab", "the text task takes its vocabulary from the text; leave --vocab out");
          if (body.contains("prev_token_steps") && s.prev_token_steps > 0)
            fail("--prev-token-steps", "only the induction task has the previous-token phase; leave it out");
          s.text = load_corpus(task[1], state->tokenizer);
        } else if (task[0] != "induction" || task.size() != 1) {
          fail("--task", fmt::format("\"{}\" is not a task; give induction, or text FILE", fmt::join(task, " ")));
        } else if (!state->tokenizer.empty()) {
          fail("--tokenizer", "is for --task text FILE");
        }
        if (s.layers == 1 && body.contains("prev_token_steps") && s.prev_token_steps > 0)
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
