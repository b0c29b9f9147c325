// `model generate`, described once (operations/request.hpp): a prompt, then new tokens
// through the KV cache. The command, Python's Model.generate() and POST
// /api/model/generate read this request, call generate_tokens() and write generate_json().
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "attnlab/model/generate.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/operations/model.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

struct GenerateRequest {
  static constexpr std::string_view kName = "model generate";
  static constexpr std::string_view kHelp = "Generate tokens through a KV cache and the decode kernel";

  TokenInput text;          // the prompt
  GenerateOptions options;  // its defaults are the library's (model/generate.hpp)

  template <class Field>
  void for_each(Field&& field) {
    field(text, {.name = "text",
                 .help = "The prompt (text for the model's tokenizer; ids: token ids instead)",
                 .required = true,
                 .example = "\"The cat\" or ids 464,3797"});
    field(options.tokens, {.name = "tokens", .help = "New tokens to generate", .unit = "tokens"});
    field(options.temperature, {.name = "temperature", .help = "0: the most probable token each step; > 0: sample"});
    field(options.top_k, {.name = "top_k", .help = "Sample among the k most probable (0: all)"});
    field(options.top_p,
          {.name = "top_p", .help = "Then among the fewest most probable whose probabilities reach p (1: all)"});
    field(options.seed, {.name = "seed", .help = "Seed of the sampling"});
    field(options.bf16,
          {.name = "bf16",
           .help = "The prompt's products in bf16 with f32 sums (AVX-512 BF16, or AMX tiles where the CPU "
                   "has them): a long prompt about twice as fast, each logit within bf16's rounding"});
    field(options.trace, {.name = "trace",
                          .help = "Each step's most probable tokens and every head's attention weights over the "
                                  "cache, and the cache's bytes (layers × heads × cache numbers a step)"});
    field(options.cache, {.name = "cache",
                          .help = "How the KV cache stores keys and values: f32, f16, bf16, or q8_0 (llama.cpp's "
                                  "blocks of 32 int8 and a scale, about a quarter of f32)"});
    field(options.alternatives, {.name = "alternatives",
                                 .help = "With trace: how many of each step's most probable tokens to list",
                                 .range = {1, 100}});
  }
};

struct GenerateLimits {
  double max_trace_numbers = double(1 << 26);  // a trace's weights (trace_numbers)
  std::string_view elsewhere = "generate fewer tokens, after a shorter prompt";
};

struct GenerateResult {
  std::vector<int> prompt;
  std::vector<GeneratedToken> generated;
  GenerateOptions options;
};

// The prompt's ids and the options checked against the model (check_generate), before any work.
// With trace, its weights priced against the limits.
GenerateResult price_generate(const ModelDir& model, const GenerateRequest& request, const GenerateLimits& limits = {});
// Generates; `each` sees every token as it is made.
void generate_tokens(const ModelDir& model, GenerateResult& result,
                     const std::function<void(const GeneratedToken&)>& each = {});
// generation_json (model/model_dir.hpp): what --json prints, the API answers and Python returns.
nlohmann::json generate_json(const ModelDir& model, const GenerateResult& result);

}  // namespace attnlab
