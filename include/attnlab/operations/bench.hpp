// `bench`, described once (operations/request.hpp): what `attnlab bench` times, a kernel
// case, a model's forward pass, generation, attribution or training steps, each as a share
// of this machine's peaks measured in the same run. Only the command line offers it: a
// timing needs the machine to itself, which a server shared with the lab does not have.
#pragma once

#include <optional>
#include <string>

#include "attnlab/model/train_run.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

struct BenchRequest {
  static constexpr std::string_view kName = "bench";
  static constexpr std::string_view kHelp =
      "Measure this machine's peaks, then time attention kernels, a model or training as a share of them";
  static constexpr std::string_view kCaseDtypes[] = {"f32", "bf16"};
  static constexpr std::string_view kKernels[] = {"tiled", "reference"};
  static constexpr std::string_view kCacheDtypes[] = {"f32", "f16", "bf16", "q8_0"};
  static constexpr std::string_view kLogitRows[] = {"every", "last"};
  static constexpr std::uint64_t kMaxTokens = std::uint64_t{1} << 22;
  static constexpr std::uint64_t kKernelHeads = 16, kTrainHeads = 2;  // heads' default for each

  bool quick = false;
  std::optional<std::uint64_t> n;  // none: the standard case list
  std::optional<std::uint64_t> heads, kv_heads;
  std::uint64_t d_k = 128;
  bool causal = false;
  std::string dtype = "f32", kernel = "tiled";
  bool decode = false;
  std::uint64_t cache = 32768, new_tokens = 1;
  std::optional<std::string> cache_dtype;  // a kernel case's default f16, a model's generation's f32
  std::uint64_t threads = 0;               // 0: all cores
  std::string model;                       // time its forward pass instead of the kernels
  std::uint64_t tokens = 1024;
  std::string logits = "every";
  bool f32 = false, bf16 = false;
  std::optional<std::uint64_t> generate;
  bool attribute = false, train = false, survey = false, products = false;
  TrainSettings shape{.steps = 20};  // with train: attnlab train's defaults, 20 timed steps
  std::uint64_t repeats = 5;

  // The heads of a kernel case (16 by default) or of a training step (2).
  std::uint64_t heads_or_default() const { return heads.value_or(train ? kTrainHeads : kKernelHeads); }

  template <class Field>
  void for_each(Field&& field) {
    const auto info = [](FieldInfo i) {
      i.faces = kCommandLine;
      return i;
    };
    field(quick, info({.name = "quick", .help = "A subset that runs in about a minute"}));
    field(n, info({.name = "n",
                   .help = "One case: n = m tokens (default: the standard case list)",
                   .unit = "tokens",
                   .range = {1, kMaxTokens}}));
    field(heads, info({.name = "heads",
                       .help = "One case: query heads H (default 16; with train: heads per layer, default 2)",
                       .range = {1, 1024}}));
    field(kv_heads,
          info({.name = "kv_heads", .help = "One case: key/value heads H_kv (default H)", .range = {1, 1024}}));
    field(d_k, info({.name = "d_k", .help = "One case: head width d_k = d_v", .range = {1, 1024}}));
    field(causal, info({.name = "causal", .help = "One case: causal mask"}));
    field(dtype, info({.name = "dtype", .help = "One case: the dtype of q, k and v", .choices = kCaseDtypes}));
    field(kernel, info({.name = "kernel", .help = "One case: the kernel timed", .choices = kKernels}));
    field(decode,
          info({.name = "decode", .help = "One case: decode new tokens against a KV cache (instead of prefill)"}));
    field(cache, info({.name = "cache", .help = "Decode: cached tokens", .unit = "tokens", .range = {1, kMaxTokens}}));
    field(new_tokens, info({.name = "new_tokens", .help = "Decode: new tokens per step", .range = {1, 8}}));
    field(cache_dtype, info({.name = "cache_dtype",
                             .help = "Decode: the cache's storage (default f16; q8_0 with model only); with model "
                                     "and generate: the generating cache's (default f32)",
                             .choices = kCacheDtypes}));
    field(threads, info({.name = "threads", .help = "Threads (0: all cores)", .range = {0, 1024}}));
    field(model, info({.name = "model",
                       .help = "Time this model's forward pass instead, and measure its memory (a folder, a .gguf "
                               "file or ollama:NAME; docs/models.md)"}));
    field(tokens, info({.name = "tokens",
                        .help = "With model: tokens per forward pass (at most the model's positions)",
                        .unit = "tokens",
                        .range = {1, std::uint64_t{1} << 20}}));
    field(logits, info({.name = "logits",
                        .help = "With model: the logits of every position (what a loss needs) or of the last alone "
                                "(prompt processing, as llama.cpp does it)",
                        .choices = kLogitRows}));
    field(f32, info({.name = "f32", .help = "With model: widen 16-bit weights to f32 in memory first"}));
    field(bf16, info({.name = "bf16",
                      .help = "With model or train: multiply in bf16 with f32 sums (AVX-512 BF16, or AMX tiles where "
                              "the CPU has them): the forward's and the prompt's products, not generation's, or the "
                              "training step's; with model timed against the bf16 peak too"}));
    field(generate, info({.name = "generate",
                          .help = "With model: also time generating this many tokens, one at a time through the KV "
                                  "cache, after the prompt's tokens (tokens/s, and bytes read per token against the "
                                  "read bandwidth)",
                          .unit = "tokens",
                          .range = {1, std::uint64_t{1} << 16}}));
    field(attribute, info({.name = "attribute",
                           .help = "With model: time attributing the prediction at the last of the tokens (DLA, the "
                                   "lens, context mixing, the gradient, one patching site) as multiples of one "
                                   "forward pass"}));
    field(survey, info({.name = "survey",
                        .help = "With model: also time the corpus survey's pass (model survey) over the tokens, as a "
                                "share of the plain forward's tokens/s (goal: 50% or more)"}));
    field(products,
          info({.name = "products",
                .help = "Time the f32 matrix products of a model's layers instead (GPT-2 small's at 1024 "
                        "tokens, a 1.1B Llama's at 256): oneDNN's, attnlab's own with f32 and f16 weights, "
                        "and OpenBLAS's, each as a share of the f32 peak; then oneDNN's on operands already bf16 "
                        "and int8, as shares of those units' peaks (with quick: the Q, K, V products alone)"}));
    field(train, info({.name = "train",
                       .help = "Time training steps of a small GPT-2 instead (attnlab train's model "
                               "and task)"}));
    field(shape.layers, info({.name = "layers", .help = "With train: layers", .range = {1, 48}}));
    field(shape.d_model, info({.name = "d_model", .help = "With train: width", .range = {4, 4096}}));
    field(
        shape.context,
        info({.name = "context", .help = "With train: positions per sequence", .unit = "tokens", .range = {12, 4096}}));
    field(shape.vocab, info({.name = "vocab", .help = "With train: vocabulary, BOS included", .range = {8, 65536}}));
    field(shape.batch, info({.name = "batch", .help = "With train: sequences per step", .range = {1, 4096}}));
    field(shape.steps, info({.name = "steps", .help = "With train: timed steps per run", .range = {1, 100000}}));
    field(shape.attention_only, info({.name = "attn_only", .help = "With train: no MLPs"}));
    field(repeats, info({.name = "repeats", .help = "Timed runs per case (median reported)", .range = {1, 1000}}));
  }
};

}  // namespace attnlab
