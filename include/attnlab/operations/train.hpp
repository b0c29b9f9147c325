// `train`, described once (operations/request.hpp): a small GPT-2 or Llama-style model's
// shape and its run's settings. `attnlab train` and POST /api/training/start read this
// request; each face then holds it to its own limits (kTrainLimits, the lab's
// kLabTrainLimits) through check_train_settings. The ranges shown are the command's.
#pragma once

#include "attnlab/model/train_run.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

struct TrainRequest {
  static constexpr std::string_view kName = "train";
  static constexpr std::string_view kHelp = "Train a small GPT-2 or Llama-style model here and watch its heads form";
  static constexpr std::string_view kArchitectures[] = {"gpt2", "llama"};
  static constexpr std::string_view kTasks[] = {"induction"};
  static constexpr unsigned kFaces = kCommandLine | kHttpApi;  // Python does not train yet

  TrainSettings settings;  // its defaults are the library's (model/train_run.hpp)
  std::string arch = std::string(train_architecture_name(TrainSettings{}.architecture));
  std::string task = "induction";

  template <class Field>
  void for_each(Field&& field) {
    const TrainLimits& L = kTrainLimits;
    TrainSettings& s = settings;
    // A setting: the command's range shown, each face held to its own limits by check_train_settings.
    const auto setting = [](FieldInfo info) {
      info.faces = kFaces;
      info.range_checked_later = true;
      return info;
    };
    field(task,
          {.name = "task",
           .help = "The task: induction (random tokens with a repeated stretch; the command also takes text FILE)",
           .choices = kTasks,
           .faces = kHttpApi});
    field(arch, {.name = "arch",
                 .help = "gpt2 (LayerNorm, learned positions, GELU) or llama (RMSNorm, rotary positions, grouped-query "
                         "attention, SwiGLU)",
                 .choices = kArchitectures,
                 .faces = kFaces});
    field(s.layers, setting({.name = "layers", .help = "Layers L", .range = {1, L.max_layers}}));
    field(s.heads, setting({.name = "heads", .help = "Heads per layer H", .range = {1, L.max_heads}}));
    field(s.kv_heads, setting({.name = "kv_heads",
                               .help = "With arch llama: KV heads H_kv, dividing heads (0: as many as heads)",
                               .range = {0, L.max_heads}}));
    field(s.d_model, setting({.name = "d_model", .help = "Width d_model", .range = {L.min_d_model, L.max_d_model}}));
    field(s.context, setting({.name = "context",
                              .help = "Positions per sequence",
                              .unit = "tokens",
                              .range = {L.min_context, L.max_context}}));
    field(s.vocab, setting({.name = "vocab",
                            .help = "Vocabulary of the induction task, BOS included",
                            .range = {L.min_vocab, L.max_vocab}}));
    field(s.steps, setting({.name = "steps", .help = "Optimiser steps", .range = {1, L.max_steps}}));
    field(s.batch, setting({.name = "batch", .help = "Sequences per step", .range = {1, L.max_batch}}));
    field(s.learning_rate,
          setting({.name = "lr", .help = "AdamW's learning rate (after warm-up)", .low = L.min_lr, .high = L.max_lr}));
    field(s.warmup,
          setting({.name = "warmup", .help = "Steps of linear learning-rate warm-up", .range = {0, L.max_warmup}}));
    field(s.seed, setting({.name = "seed", .help = "Seed of the weights and the data"}));
    field(s.log_every,
          setting({.name = "log_every", .help = "Steps between logged evaluations", .range = {1, L.max_steps}}));
    field(s.checkpoint_every, setting({.name = "checkpoint_every",
                                       .help = "Steps between checkpoints (checkpoints/step-N)",
                                       .range = {1, L.max_steps}}));
    field(
        s.prev_token_steps,
        setting({.name = "prev_token_steps",
                 .help = "Induction task: the first N steps train layer 0 alone on look-back sequences (token i+1 is "
                         "token i-1 plus 7), so previous-token heads form; then layer 0 is kept, its outputs scaled by "
                         "1/20, and the other layers learn the task (0: one phase, every layer throughout)",
                 .range = {0, L.max_steps}}));
    field(s.attention_only,
          setting({.name = "attn_only", .help = "No MLPs (their weights stay zero in the checkpoint)"}));
    field(s.bf16, {.name = "bf16",
                   .help = "Every product of the forward and the backward in bf16 with f32 sums (AVX-512 BF16, or AMX "
                           "tiles where the CPU has them); the weights, the gradients' sums and AdamW stay f32",
                   .faces = kCommandLine});
  }

  // The settings the request asks for (the architecture by its name); check_train_settings
  // holds them to a face's limits.
  TrainSettings train_settings() const {
    TrainSettings s = settings;
    s.architecture = parse_train_architecture(arch, "arch");
    return s;
  }
};

}  // namespace attnlab
