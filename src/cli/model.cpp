// attnlab model info | tokenize | run | heads | eval | generate: a real checkpoint (any family model.hpp
// reads, in Hugging Face's layout, from the user's own directory) inspected, tokenized, run and its heads scored.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/attribution_json.hpp"
#include "attnlab/analysis/machine_memory.hpp"
#include "attnlab/analysis/model_head.hpp"
#include "attnlab/analysis/model_kv.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/generate.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/safetensors.hpp"
#include "attnlab/model/train_run.hpp"
#include "attnlab/operations/evict.hpp"
#include "attnlab/operations/generate.hpp"
#include "attnlab/operations/model.hpp"
#include "attnlab/operations/survey.hpp"
#include "attnlab/report/explain.hpp"
#include "common.hpp"
#include "numbers.hpp"
#include "operation_flags.hpp"

namespace attnlab::cli {

namespace {

using nlohmann::json;

// The most attention numbers `model run --json` writes (L × H × n²): GPT-2 small at 256
// tokens is 9.4 million; 1024 tokens would be 151 million, some 1.5 GB of JSON.
constexpr std::size_t kMaxAttentionNumbers = std::size_t{1} << 24;

// What every model subcommand takes besides its operation's flags: the model, and --json.
struct ModelFlags {
  std::string dir;
  bool json = false;
};

CLI::Option* add_dir(CLI::App& app, ModelFlags& f) {
  return app.add_option("model", f.dir, kModelPathHelp)->required()->check(kModelPath);
}

// A subcommand of `model` made from operation R's description ("model kv" is `model kv`):
// the model, the operation's flags, and --json (`json_help` says what it prints); `run`
// runs it.
template <class R>
Command model_operation(CLI::App& model, const std::shared_ptr<ModelFlags>& f,
                        int (*run)(const ModelFlags&, const OperationFlags&), const std::string& json_help) {
  const std::string name(R::kName.substr(std::string_view("model ").size()));
  CLI::App* app = model.add_subcommand(name, std::string(R::kHelp));
  add_dir(*app, *f);
  auto flags = std::make_shared<OperationFlags>(*app, describe_operation<R>());
  app->add_flag("--json", f->json, "The reply as JSON (docs/operations.md): " + json_help);
  return {app, [f, flags, run] { return run(*f, *flags); }};
}

// A token in text output: its display form (valid UTF-8, "�" for a byte that does not
// complete a character), spaces and newlines made visible, in quotes.
std::string quoted_token(const std::string& bytes) { return fmt::format("\"{}\"", visible_token(valid_utf8(bytes))); }

// ---- info ---------------------------------------------------------------------------------

int info(const ModelFlags& f, const OperationFlags& flags) {
  (void)read_flags<InfoRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  const ModelConfig& c = m.model.config;
  const InfoResult result = run_info(m);
  if (f.json) {
    fmt::print("{}\n", info_json(m, result).dump(2));
    return 0;
  }
  const CheckpointSummary& file = result.file;
  const std::vector<TensorKind>& kinds = result.kinds;
  const std::size_t weight_bytes = result.weight_bytes, f32_bytes = result.f32_bytes;
  fmt::print("{}: {}\n", f.dir, describe(c));
  fmt::print("file: {}{}, {} in {} file{}, {} tensors\n", file.format,
             file.architecture.empty() ? "" : fmt::format(" (architecture {})", file.architecture),
             format_bytes(file.bytes), file.files, file.files == 1 ? "" : "s", file.tensors.size());
  fmt::print("parameters: {}; in memory {} as stored ({}), {} if widened to f32\n", format_count(c.parameters()),
             format_bytes(weight_bytes), ggml_type_name(m.model.stored_type), format_bytes(f32_bytes));
  fmt::print("tensors by kind:\n");
  for (const TensorKind& k : kinds) {
    std::string types;  // "Q4_K", or "Q4_K ×20, Q6_K ×4" when the kind is stored in more than one type
    for (const auto& [type, count] : k.types)
      types += k.types.size() == 1 ? type : fmt::format("{}{} ×{}", types.empty() ? "" : ", ", type, count);
    fmt::print("  {:<28} {:>4} × {:<16} {:>10}\n", k.kind, k.count, types, format_bytes(k.bytes));
  }
  fmt::print("tokenizer: {}\n", m.tokenizer ? fmt::format("{}, {} tokens, {} merges", m.tokenizer->source(),
                                                          m.tokenizer->vocab_size(), m.tokenizer->merge_count())
                                : file.format.starts_with("GGUF")
                                    ? "none (the file's metadata has no tokenizer.ggml.*): give --ids"
                                    : "none (no tokenizer.json, nor vocab.json and merges.txt): give --ids");
  return 0;
}

// ---- tokenize -----------------------------------------------------------------------------

int tokenize(const ModelFlags& f, const OperationFlags& flags) {
  const TokenizeRequest request = read_flags<TokenizeRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  const std::vector<int> ids = run_tokenize(m, request);  // its errors name the positional text
  if (f.json) {
    fmt::print("{}\n", tokenize_json(m, ids).dump());
    return 0;
  }
  const std::vector<std::string> tokens = token_texts(m, ids);
  fmt::print("{} tokens\n", ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    fmt::print("  {:>4} {:>6}  {}\n", i, ids[i], quoted_token(tokens[i]));
  return 0;
}

// ---- run ----------------------------------------------------------------------------------

void print_top_k(const ModelDir& m, const ForwardResult& r, const std::vector<std::string>& tokens, std::size_t k) {
  fmt::print("next token, the {} most probable at each position:\n", k);
  for (std::size_t i = 0; i < r.n; ++i) {
    std::vector<std::string> guesses;
    for (const TokenProbability& t : top_k(r.logits_at(i), k))
      guesses.push_back(fmt::format("{} {:.3f}", quoted_token(token_texts(m, {t.id})[0]), t.probability));
    fmt::print("  {:>4} {:<14} → {}\n", i, quoted_token(tokens[i]), fmt::join(guesses, ", "));
  }
}

// Each head in brief: for the last token, the key it weighs most and that weight.
void print_heads_in_brief(const ModelDir& m, const ForwardResult& r, const std::vector<std::string>& tokens) {
  const std::size_t n = r.n, heads = m.model.config.n_head, last = n - 1;
  fmt::print("heads, for the last token {}: the key each weighs most\n", quoted_token(tokens[last]));
  for (std::size_t l = 0; l < r.attention.size(); ++l) {
    std::vector<std::string> cells;
    for (std::size_t h = 0; h < heads; ++h) {
      const float* row = r.attention[l].data() + h * n * n + last * n;
      const std::size_t top = static_cast<std::size_t>(std::max_element(row, row + n) - row);
      cells.push_back(fmt::format("{} {} {:.2f}", to_string(HeadRef{l, h}), quoted_token(tokens[top]), row[top]));
    }
    fmt::print("  {}\n", fmt::join(cells, " | "));
  }
}

// Each head in brief from its sparse rows (a long context): the last token's most weighed key,
// and over every query the mean weight on the first token (the sink) and the mean entropy.
void print_sparse_heads(const ModelDir& m, const ForwardResult& r, const std::vector<std::string>& tokens) {
  const SparseAttention& s = r.sparse;
  const std::size_t n = r.n, heads = m.model.config.n_head, last = n - 1;
  fmt::print(
      "heads in brief (sparse rows, no n × n weights kept): for the last token {} the key each weighs most; over "
      "every query, the mean weight on the first token (sink) and the mean entropy\n",
      quoted_token(tokens[last]));
  for (std::size_t l = 0; l < s.keys.size(); ++l) {
    std::vector<std::string> cells;
    for (std::size_t h = 0; h < heads; ++h) {
      const std::uint32_t top = s.keys[l][(h * n + last) * s.top];
      double sink = 0, entropy = 0;
      for (std::size_t i = 0; i < n; ++i)
        sink += s.sink[l][h * n + i], entropy += s.entropy[l][h * n + i];
      cells.push_back(fmt::format("{} {} {:.2f}, sink {:.2f}, {:.1f} bits", to_string(HeadRef{l, h}),
                                  quoted_token(tokens[top]), s.weights[l][(h * n + last) * s.top], sink / double(n),
                                  entropy / double(n)));
    }
    fmt::print("  {}\n", fmt::join(cells, " | "));
  }
}

int run(const ModelFlags& f, const OperationFlags& flags) {
  const RunRequest request = read_flags<RunRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  const ModelConfig& c = m.model.config;
  RunPlan plan = naming_flags([&] { return price_run(m, request); });
  const std::vector<int>& ids = plan.ids;
  const std::size_t numbers = c.n_layer * c.n_head * ids.size() * ids.size();
  if (f.json && !plan.head && !request.sparse && numbers > kMaxAttentionNumbers)
    fail("--json",
         fmt::format("{} tokens give {} attention weights ({} layers × {} heads × n²), more than the {} "
                     "`model run --json` writes; use fewer tokens, or --sparse 8 for each head's rows in brief",
                     ids.size(), numbers, c.n_layer, c.n_head, kMaxAttentionNumbers));
  ForwardOptions options = plan.options;
  options.keep_attention = !request.sparse || plan.head;
  if (plan.head) {  // one head, explained like any scenario's (in the run with the heads ablated, if any)
    const ForwardResult r = model_forward(m.model, ids, options);
    std::vector<std::string> texts;
    for (const TokenShown& t : show_tokens(m, ids))
      texts.push_back(t.text);
    const Scenario s = model_head_scenario(m.model, r, texts, *plan.head);
    fmt::print("{}", explain(s, run_scenario(s), {0, plan.query, s.precision}));
    return 0;
  }
  // Every head from the run as it is; with heads ablated, that run's next token beside it.
  // The reply needs the last position's logits only, computed as the server computes them.
  options.ablate.clear();
  if (f.json || request.sparse) options.logits = LogitRows::last;
  const ForwardResult r = model_forward(m.model, ids, options);
  std::optional<ForwardResult> ablated;
  if (!plan.options.ablate.empty())
    ablated = model_forward(m.model, ids, {.logits = LogitRows::last, .ablate = plan.options.ablate});
  if (f.json) {
    fmt::print("{}\n", run_json(m, plan, r, ablated ? &*ablated : nullptr, !r.attention.empty(), WeightDigits::every));
    return 0;
  }
  const std::vector<std::string> tokens = token_texts(m, ids);
  // A plain loop rather than std::views::transform: clang 14 cannot read libstdc++ 12's ranges.
  std::vector<std::string> quoted;
  for (const std::string& t : tokens)
    quoted.push_back(quoted_token(t));
  fmt::print("{} tokens: {}\n", ids.size(), fmt::join(quoted, " "));
  if (request.sparse) {  // the last position's odds alone: n × vocabulary logits may not fit a long context
    std::vector<std::string> guesses;
    for (const TokenProbability& t : top_k(r.logits_at(r.n - 1), plan.top_k))
      guesses.push_back(fmt::format("{} {:.3f}", quoted_token(token_texts(m, {t.id})[0]), t.probability));
    fmt::print("next token after the last, the {} most probable: {}\n", plan.top_k, fmt::join(guesses, ", "));
  } else {
    print_top_k(m, r, tokens, plan.top_k);
  }
  if (ablated) {
    std::vector<std::string> heads, guesses;
    for (const HeadRef& h : plan.options.ablate)
      heads.push_back(to_string(h));
    for (const TokenProbability& t : top_k(ablated->logits_at(ablated->n - 1), plan.top_k))
      guesses.push_back(fmt::format("{} {:.3f}", quoted_token(token_texts(m, {t.id})[0]), t.probability));
    fmt::print("with {} ablated, the next token → {}\n", fmt::join(heads, ", "), fmt::join(guesses, ", "));
  }
  if (request.sparse)
    print_sparse_heads(m, r, tokens);
  else
    print_heads_in_brief(m, r, tokens);
  return 0;
}

// ---- heads --------------------------------------------------------------------------------

int heads(const ModelFlags& f, const OperationFlags& flags) {
  const HeadsRequest request = read_flags<HeadsRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  HeadsResult result = naming_flags([&] { return price_heads(m, request); });
  run_heads(m, result);
  if (f.json) {
    fmt::print("{}\n", heads_json(result).dump(2));
    return 0;
  }
  const std::vector<HeadScores>& scores = result.scores;
  fmt::print("detector scores (1: all of a head's weight where the pattern says), on {}\n",
             result.given ? fmt::format("the given {} tokens", result.sequences[0].size())
                          : fmt::format("{} seeded repeated random sequences of {} tokens", result.sequences.size(),
                                        result.sequences[0].size()));
  std::vector<std::vector<std::string>> rows{{"head", "previous-token", "duplicate-token", "induction", "sink"}};
  for (const HeadScores& s : scores)
    rows.push_back({to_string(s.head), fmt::format("{:.3f}", s.previous_token),
                    fmt::format("{:.3f}", s.duplicate_token), fmt::format("{:.3f}", s.induction),
                    fmt::format("{:.3f}", s.sink)});
  fmt::print("{}", format_table(rows, true));
  const auto best = [&](double HeadScores::*field) {
    return *std::max_element(scores.begin(), scores.end(), [&](auto& a, auto& b) { return a.*field < b.*field; });
  };
  for (const auto& [name, field] : {std::pair{"previous-token", &HeadScores::previous_token},
                                    {"duplicate-token", &HeadScores::duplicate_token},
                                    {"induction", &HeadScores::induction},
                                    {"sink", &HeadScores::sink}})
    fmt::print("strongest {} head: {} ({:.3f})\n", name, to_string(best(field).head), best(field).*field);
  return 0;
}

// ---- eval ---------------------------------------------------------------------------------

int eval(const ModelFlags& f, const OperationFlags& flags) {
  const EvalRequest request = read_flags<EvalRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  EvalResult result = naming_flags([&] { return price_eval(m, request); });
  run_eval(m, result);
  if (f.json) {
    fmt::print("{}\n", eval_json(result).dump());
    return 0;
  }
  const std::size_t vocab = m.model.config.vocab_size;
  fmt::print("induction task: {} seeded sequences [BOS, r_1..r_k, r_1..r_k], k from {} down to {}{}\n",
             result.sequences, result.longest, result.shortest,
             result.ablate.empty()
                 ? ""
                 : fmt::format(", heads {} ablated (output zeroed)", fmt::join(field_json(result.ablate), ", ")));
  // The task's tokens are drawn from every id but BOS, so guessing scores ln(vocab − 1).
  fmt::print("mean next-token loss, first half:  {:.4f} nats (chance: ln {} = {:.4f})\n", result.loss_first_half,
             vocab - 1, std::log(static_cast<double>(vocab - 1)));
  fmt::print("mean next-token loss, second half: {:.4f} nats (in-context: the repeat can be copied)\n",
             result.loss_second_half);
  return 0;
}

// ---- generate -----------------------------------------------------------------------------

int generate_and_print(const ModelFlags& f, const ModelDir& m, const GenerateRequest& request) {
  const ModelConfig& c = m.model.config;
  GenerateResult result = price_generate(m, request);
  if (!f.json)
    fmt::print("prompt: {} tokens; each step runs one new token against the KV cache\n", result.prompt.size());
  const std::size_t per_token = 2 * c.n_layer * c.kv_heads() * c.head_dim() * sizeof(float);
  std::size_t step = 0;
  generate_tokens(m, result, [&](const GeneratedToken& t) {
    if (f.json) return;
    fmt::print(
        "  step {:>3}: {:<16} p {:.3f}  cache {:>5} tokens, {:>12} (2 × {} layers × {} {}heads × {} × tokens × 4 bytes "
        "= {})\n",
        ++step, quoted_token(show_token(m, t.id).bytes), t.probability, t.cache_tokens, format_bytes(t.cache_bytes),
        c.n_layer, c.kv_heads(), c.kv_heads() == c.n_head ? "" : "KV ", c.head_dim(),
        format_count(per_token * t.cache_tokens));
    if (!request.options.trace) return;
    std::vector<std::string> cells;
    for (const TokenProbability& a : t.alternatives)
      cells.push_back(fmt::format("{} {:.3f}", quoted_token(show_token(m, a.id).bytes), a.probability));
    fmt::print("            chosen after position {}, among {}\n", t.position, fmt::join(cells, ", "));
    cells.clear();  // each head's most weighed key
    const std::size_t row = t.position + 1;
    for (std::size_t l = 0; l < c.n_layer; ++l)
      for (std::size_t h = 0; h < c.n_head; ++h) {
        const float* w = t.attention.data() + (l * c.n_head + h) * row;
        const std::size_t top = std::size_t(std::max_element(w, w + row) - w);
        cells.push_back(fmt::format("{}.{}→{} ({:.2f})", l, h, top, w[top]));
      }
    fmt::print("            each head's most weighed position: {}\n", fmt::join(cells, "  "));
  });
  const json out = generate_json(m, result);
  if (f.json)
    fmt::print("{}\n", out.dump());
  else if (out["text"].is_string())
    fmt::print("text: {}\n", out["text"].get<std::string>());
  else
    fmt::print("ids: {}\n", fmt::join(out["ids"].get<std::vector<int>>(), ","));
  return 0;
}

int generate(const ModelFlags& f, const OperationFlags& flags) {
  const GenerateRequest request = read_flags<GenerateRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  try {  // the library names its fields as JSON does ("tokens"); the flags are --tokens
    return generate_and_print(f, m, request);
  } catch (const InputError& e) {
    throw with_flag_name(e);
  }
}

// ---- kv -----------------------------------------------------------------------------------

int kv(const ModelFlags& f, const OperationFlags& flags) {
  const ModelKvRequest request = read_flags<ModelKvRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  const ModelConfig& c = m.model.config;
  ModelKvResult result = naming_flags([&] {
    ModelKvResult priced = price_model_kv(m, request);
    run_model_kv(m, priced);
    return priced;
  });
  if (request.report) {  // written whole or not at all
    const std::string report = model_kv_report(result);
    write_file_whole(*request.report, [&](std::FILE* out) {
      return std::fwrite(report.data(), 1, report.size(), out) == report.size();
    });
    if (!f.json)
      fmt::print(stderr, "wrote {}: the measure as Markdown, to paste where you share it\n", *request.report);
  }
  if (f.json) {
    fmt::print("{}\n", model_kv_json(result).dump(2));
    return 0;
  }
  const std::vector<ModelKvPoint>& points = result.points;
  const std::uint64_t weights = result.weight_bytes;
  fmt::print("{}: {}\n", f.dir, describe(c));
  fmt::print("KV cache = {} layers × 2 × {} KV heads × tokens × a row of {} values in {} bytes ({}) = {} per token{}\n",
             c.n_layer, c.kv_heads(), c.head_dim(), cache_row_bytes(result.dtype, c.head_dim()),
             cache_type_name(result.dtype), format_bytes(points.front().formula_bytes / points.front().tokens),
             c.kv_heads() < c.n_head
                 ? fmt::format(" ({}× less than {} heads would need)", c.n_head / c.kv_heads(), c.n_head)
                 : "");
  fmt::print("weights in memory: {} as stored ({})\n", format_bytes(weights), result.weight_type);
  std::vector<std::vector<std::string>> rows{
      {"tokens", "formula", "cache holds", "allocated", "resident (measured)", "share of weights"}};
  for (const ModelKvPoint& p : points)
    rows.push_back(
        {format_count(p.tokens), format_bytes(p.formula_bytes), format_bytes(p.used_bytes),
         format_bytes(p.reserved_bytes), p.resident_bytes ? format_bytes(p.resident_bytes) : "unknown",
         fmt::format("{:.1f}%", 100.0 * static_cast<double>(p.formula_bytes) / static_cast<double>(weights))});
  fmt::print("{}", format_table(rows, true));
  const json reply = model_kv_json(result);
  if (reply["longest_context"].get<std::uint64_t>() > 0)
    fmt::print("the longest context this machine's available memory holds: {} tokens{}\n",
               format_count(reply["longest_context"].get<std::uint64_t>()),
               reply["longest_context"] == c.n_positions ? " (the model's own positions)" : "");
  return 0;
}

// ---- attribute, lens -----------------------------------------------------------------------

// A share as a whole percentage, never "-0%".
std::string percent(double share) { return fmt::format("{:.0f}%", std::round(100 * share) + 0.0); }

std::string part_name(const PartContribution& p) {
  switch (p.kind) {
    case PartKind::head: return fmt::format("head {}", to_string(HeadRef{p.layer, p.head}));
    case PartKind::attention_bias: return fmt::format("attention bias {}", p.layer);
    case PartKind::mlp: return fmt::format("mlp {}", p.layer);
    default: return part_kind_name(p.kind);
  }
}

int attribute(const ModelFlags& f, const OperationFlags& flags) {
  const AttributeRequest request = read_flags<AttributeRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  AttributeResult result = naming_flags([&] {
    AttributeResult priced = price_attribute(m, request);
    run_attribute(m, priced);
    return priced;
  });
  if (f.json) {
    fmt::print("{}\n", attribute_json(m, result).dump());
    return 0;
  }
  const LogitAttribution& a = result.attribution;
  const std::vector<std::string> tokens = token_texts(m, result.ids);
  const auto token = [&](int id) { return token_texts(m, {id})[0]; };
  fmt::print("at position {} ({}), the logit of {}{} is {:.4f}\n", a.position, quoted_token(tokens[a.position]),
             quoted_token(token(a.target)),
             a.contrast >= 0 ? fmt::format(" minus that of {}", quoted_token(token(a.contrast))) : "", a.logit);
  fmt::print(
      "direct logit attribution: what each part of the residual stream writes along the answer's "
      "direction, the final norm's scale frozen (the parts add up to the logit)\n");
  // The parts, largest first; equal ones in stream order.
  std::vector<std::size_t> rank(a.parts.size());
  for (std::size_t i = 0; i < rank.size(); ++i)
    rank[i] = i;
  std::sort(rank.begin(), rank.end(), [&](std::size_t x, std::size_t y) {
    const double ax = std::abs(a.parts[x].logit), ay = std::abs(a.parts[y].logit);
    return ax != ay ? ax > ay : x < y;
  });
  std::vector<PartContribution> order;
  for (std::size_t i : rank)
    order.push_back(a.parts[i]);
  std::vector<std::vector<std::string>> rows{{"part", "logit"}};
  for (std::size_t i = 0; i < std::min<std::size_t>(order.size(), 10); ++i)
    rows.push_back({part_name(order[i]), fmt::format("{:+.4f}", order[i].logit)});
  if (a.final_bias != 0) rows.push_back({"final norm's bias", fmt::format("{:+.4f}", a.final_bias)});
  fmt::print("{}", format_table(rows, true));
  if (order.size() > 10) fmt::print("({} more parts; --json has them all)\n", order.size() - 10);
  std::vector<std::vector<std::string>> sources{{"source", "token", "through every head"}};
  for (std::size_t j = 0; j <= a.position; ++j)
    sources.push_back({std::to_string(j), quoted_token(tokens[j]), fmt::format("{:+.4f}", a.by_source[j])});
  fmt::print("by source token (the heads' parts split over the tokens they read, a_ij · v_j W_O):\n{}",
             format_table(sources, true));
  return 0;
}

// ---- survey: what every head does across a corpus -------------------------------------------

int survey_command(const ModelFlags& f, const OperationFlags& flags) {
  const SurveyRequest request = read_flags<SurveyRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  const ModelConfig& c = m.model.config;
  const SurveyPlan plan = naming_flags([&] { return price_survey(m, request); });
  for (const SkippedLine& s : plan.skipped)
    fmt::print(stderr, "skipped line {}: {}\n", s.line, s.error);
  fmt::print(stderr,
             "survey: {} documents, {} windows of at most {} tokens, {} tokens × {} heads ({:.3g} GFLOP, {} of "
             "memory){}\n",
             format_count(plan.documents.size()), format_count(plan.windows), plan.max_tokens,
             format_count(plan.tokens), c.n_layer * c.n_head, plan.flops / 1e9, format_bytes(plan.memory),
             plan.shards > 1 ? fmt::format(", in {} shards", plan.shards) : "");
  // Progress: tokens and documents done of the plan's, and the time left at this pace (on a terminal).
  std::size_t tokens = 0, documents = 0;
  const auto line = progress_line("survey", "tokens", [&] {
    return fmt::format("{} of {} documents", format_count(documents), format_count(plan.documents.size()));
  });
  SurveyTotals totals = naming_flags([&] {
    return run_survey(m, plan, request.out, [&](std::size_t d, std::size_t t) {
      tokens += t, documents += d;
      if (line) line(double(tokens), double(plan.tokens));
    });
  });
  if (request.partial) {
    fmt::print("{}\n", survey_partial_json(totals, plan.corpus_id).dump());
    return 0;
  }
  const nlohmann::json survey = survey_json(m, plan, totals);
  if (request.html) {
    naming_flags([&] { write_survey_finder(*request.html, survey); });
    fmt::print(stderr, "the head finder: {} (opens from disk)\n", *request.html);
  }
  if (f.json) {
    fmt::print("{}\n", survey.dump());
    return 0;
  }
  const auto number = [](const nlohmann::json& x, int digits) {
    return x.is_null() ? std::string("–") : fmt::format("{:.{}f}", x.get<double>(), digits);
  };
  fmt::print("{} documents, {} windows, {} tokens; every head's mean over its query rows (past each window's first)\n",
             format_count(totals.documents), format_count(totals.windows), format_count(totals.tokens));
  std::vector<std::vector<std::string>> rows{
      {"head", "previous", "self", "sink", "induction", "entropy (bits)", "distance", "± (sd)"}};
  for (const nlohmann::json& h : survey["heads"])
    rows.push_back(
        {h["head"].get<std::string>(), number(h["previous_token"], 3), number(h["self"], 3), number(h["sink"], 3),
         number(h["induction"], 3), number(h["entropy"], 2), number(h["distance_mean"], 1),
         h["distance_variance"].is_null() ? "–"
                                          : fmt::format("{:.1f}", std::sqrt(h["distance_variance"].get<double>()))});
  fmt::print("{}", format_table(rows, true));
  for (const char* metric : {"previous_token", "self", "sink", "induction"}) {
    const nlohmann::json* best = nullptr;
    for (const nlohmann::json& h : survey["heads"])
      if (!h[metric].is_null() && (!best || h[metric].get<double>() > (*best)[metric].get<double>())) best = &h;
    if (!best) continue;
    fmt::print("strongest {} head: {} ({:.3f})", metric, (*best)["head"].get<std::string>(),
               (*best)[metric].get<double>());
    const nlohmann::json& top = (*best)["examples"]["top"];
    if (!top.empty() && !top[0]["keys"].empty())
      fmt::print("; its top example, document {} position {} {} → {} ({:.2f})", top[0]["document"].get<std::size_t>(),
                 top[0]["position"].get<std::size_t>(), quoted_token(top[0]["token"].get<std::string>()),
                 quoted_token(top[0]["keys"][0]["token"].get<std::string>()),
                 top[0]["keys"][0]["weight"].get<double>());
    fmt::print("\n");
  }
  return 0;
}

// ---- map: one head's weights at any length --------------------------------------------------

int map_command(const ModelFlags& f, const OperationFlags& flags) {
  const MapRequest request = read_flags<MapRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  MapResult result = naming_flags([&] {
    MapResult priced = price_map(m, request);
    run_map(m, priced);
    return priced;
  });
  if (f.json) {
    fmt::print("{}\n", map_json(m, result).dump());
    return 0;
  }
  const HeadMap& map = result.map;
  const HeadMapWindow& w = map.window;
  const std::size_t down = w.cells_down(), across = w.cells_across(), n = result.ids.size();
  float largest = 0;
  for (std::size_t cell = 0; cell < map.weights.size(); ++cell)
    if (map.query[cell] != HeadMap::none) largest = std::max(largest, map.weights[cell]);
  fmt::print("head {} over {} tokens: ", to_string(w.head), format_count(n));
  if (w.tile > 1)
    fmt::print("{} × {} cells of {} × {} tokens, each the largest weight in its block\n", down, across, w.tile, w.tile);
  else
    fmt::print("queries {} to {}, keys {} to {}, a weight a cell\n", w.row0, w.row0 + w.rows - 1, w.col0,
               w.col0 + w.cols - 1);
  // Nine shades from a weight near 0 to the largest; blank where the queries see none of the keys.
  static constexpr std::string_view kShades = ".:-=+*#%@";
  fmt::print(
      "(shades . to @ from 0 to the largest weight, {:.3f}; blank: not seen by the queries; keys from {} "
      "across)\n",
      largest, w.col0);
  for (std::size_t i = 0; i < down; ++i) {
    std::string row;
    for (std::size_t j = 0; j < across; ++j) {
      const std::size_t cell = i * across + j;
      if (map.query[cell] == HeadMap::none) {
        row += ' ';
        continue;
      }
      const double t = largest > 0 ? map.weights[cell] / largest : 0.0;
      row += kShades[std::min(kShades.size() - 1, std::size_t(t * double(kShades.size())))];
    }
    fmt::print("{:>7} |{}\n", w.row0 + i * w.tile, row);
  }
  // The strongest links away from the first token and the query itself (HeadVis's top examples).
  std::vector<std::size_t> order;
  for (std::size_t cell = 0; cell < map.weights.size(); ++cell)
    if (map.query[cell] != HeadMap::none && map.key[cell] != 0 && map.key[cell] != map.query[cell])
      order.push_back(cell);
  const std::size_t shown = std::min<std::size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(shown), order.end(),
                    [&](std::size_t a, std::size_t b) { return map.weights[a] > map.weights[b]; });
  if (shown == 0) return 0;
  const std::vector<std::string> tokens = token_texts(m, result.ids);
  fmt::print("the heaviest links off the first token and the diagonal:\n");
  for (std::size_t k = 0; k < shown; ++k) {
    const std::size_t cell = order[k], i = map.query[cell], j = map.key[cell];
    fmt::print("  query {} {} → key {} {}: {:.4f}\n", i, quoted_token(tokens[i]), j, quoted_token(tokens[j]),
               map.weights[cell]);
  }
  return 0;
}

// ---- qk: a head's score taken apart ---------------------------------------------------------

int qk(const ModelFlags& f, const OperationFlags& flags) {
  const QkRequest request = read_flags<QkRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  QkResult result = naming_flags([&] {
    QkResult priced = price_qk(m, request);
    run_qk(m, priced);
    return priced;
  });
  if (f.json) {
    fmt::print("{}\n", qk_json(m, result).dump());
    return 0;
  }
  const QkDecomposition& q = result.decomposition;
  const std::vector<std::string> tokens = token_texts(m, result.ids);
  fmt::print("head {}: query {} ({}) on key {} ({}): score {:.4f}, weight {:.4f}\n", to_string(q.head), q.query,
             quoted_token(tokens[q.query]), q.key, quoted_token(tokens[q.key]), q.score, q.weight);
  fmt::print(
      "the score as pairs (query side × key side) of what the residual stream holds, the input norm's scale "
      "frozen (they add up to the score){}:\n",
      q.rotary ? "; beside each, the pair unrotated (position taken out)" : "");
  const std::size_t shown = result.top == 0 ? q.pairs.size() : std::min<std::size_t>(result.top, q.pairs.size());
  std::vector<std::vector<std::string>> rows{{"query side", "key side", "score"}};
  if (q.rotary) rows[0].push_back("unrotated");
  double rest = 0, unrotated = 0;
  for (std::size_t k = 0; k < q.pairs.size(); ++k) {
    const QkPair& p = q.pairs[k];
    unrotated += p.unrotated;
    if (k >= shown) {
      rest += p.score;
      continue;
    }
    rows.push_back({p.query_side, p.key_side, fmt::format("{:+.4f}", p.score)});
    if (q.rotary) rows.back().push_back(fmt::format("{:+.4f}", p.unrotated));
  }
  if (shown < q.pairs.size())
    rows.push_back({"the other", fmt::format("{} pairs", q.pairs.size() - shown), fmt::format("{:+.4f}", rest)});
  fmt::print("{}", format_table(rows, true));
  const auto marginal = [](const std::vector<QkSide>& sides, std::size_t k) {
    std::vector<QkSide> top = sides;
    std::stable_sort(top.begin(), top.end(),
                     [](const QkSide& a, const QkSide& b) { return std::abs(a.score) > std::abs(b.score); });
    std::vector<std::string> cells;
    for (std::size_t i = 0; i < std::min(k, top.size()); ++i)
      cells.push_back(fmt::format("{} {:+.3f}", top[i].name, top[i].score));
    return fmt::format("{}", fmt::join(cells, ", "));
  };
  fmt::print("query side (each part with the whole key): {}\n", marginal(q.query_sides, 6));
  fmt::print("key side (the whole query with each part): {}\n", marginal(q.key_sides, 6));
  if (q.rotary)
    fmt::print("unrotated, the score would be {:.4f}: the rotation by the offset {} makes {:+.4f} of it\n", unrotated,
               q.query - q.key, q.score - unrotated);
  return 0;
}

// ---- circuits: every head's QK and OV circuits, and the composition between heads ---------------

int circuits(const ModelFlags& f, const OperationFlags& flags) {
  const CircuitsRequest request = read_flags<CircuitsRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  CircuitsResult result = naming_flags([&] { return price_circuits(m, request); });
  run_circuits(m, result, [](std::size_t done, std::size_t total) {
    if (total >= 10) fmt::print(stderr, "\rcomposition: layer pairs {}/{}", done, total);
    if (total >= 10 && done == total) fmt::print(stderr, "\n");
  });
  if (f.json) {
    fmt::print("{}\n", circuits_json(m, result).dump());
    return 0;
  }
  const Circuits& c = result.circuits;
  fmt::print("every head's circuits, its input norm's γ folded in (docs/circuits.md)\n");
  std::vector<std::vector<std::string>> rows{{"head", "OV copying", "QK σ1, σ2, σ3", "OV σ1, σ2, σ3"}};
  const auto top3 = [](const std::vector<double>& s) {
    std::vector<std::string> cells;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, s.size()); ++i)
      cells.push_back(fmt::format("{:.3g}", s[i]));
    return fmt::format("{}", fmt::join(cells, ", "));
  };
  for (std::size_t i = 0; i < c.heads.size(); ++i)
    rows.push_back({to_string(c.heads[i]), fmt::format("{:+.3f}", c.ov_copying[i]), top3(c.qk_singular[i]),
                    top3(c.ov_singular[i])});
  fmt::print("{}", format_table(rows, true));
  const auto largest = [&](const char* kind, const std::vector<std::vector<double>>& scores, double baseline) {
    std::vector<std::tuple<double, std::size_t, std::size_t>> all;
    for (std::size_t a = 0; a < scores.size(); ++a)
      for (std::size_t b = 0; b < scores.size(); ++b)
        if (!std::isnan(scores[a][b])) all.emplace_back(scores[a][b], a, b);
    std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return std::get<0>(x) > std::get<0>(y); });
    std::vector<std::string> cells;
    for (std::size_t i = 0; i < std::min<std::size_t>(5, all.size()); ++i)
      cells.push_back(fmt::format("{} → {} {:.3f}", to_string(c.heads[std::get<1>(all[i])]),
                                  to_string(c.heads[std::get<2>(all[i])]), std::get<0>(all[i])));
    fmt::print("{}-composition, largest (random matrices: {:.3f}): {}\n", kind, baseline,
               all.empty() ? std::string("none (one layer)") : fmt::format("{}", fmt::join(cells, ", ")));
  };
  largest("Q", c.q, c.baseline_q);
  largest("K", c.k, c.baseline_k);
  largest("V", c.v, c.baseline_v);
  if (!c.qk_token_pairs.empty()) {
    fmt::print("the QK circuit on the token embeddings, its largest entries (query token → key token):\n");
    for (std::size_t i = 0; i < c.heads.size(); ++i) {
      std::vector<std::string> cells;
      for (const TokenPair& p : c.qk_token_pairs[i])
        cells.push_back(fmt::format("{} → {} {:.3g}", quoted_token(token_texts(m, {p.query})[0]),
                                    quoted_token(token_texts(m, {p.key})[0]), p.score));
      fmt::print("  {}: {}\n", to_string(c.heads[i]), fmt::join(cells, ", "));
    }
  }
  return 0;
}

int lens(const ModelFlags& f, const OperationFlags& flags) {
  const LensRequest request = read_flags<LensRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  LensResult result = naming_flags([&] {
    LensResult priced = price_lens(m, request);
    run_lens(m, priced);
    return priced;
  });
  if (f.json) {
    fmt::print("{}\n", lens_result_json(m, result).dump());
    return 0;
  }
  const LogitLens& l = result.lens;
  const std::vector<std::string> tokens = token_texts(m, result.ids);
  const auto token = [&](int id) { return token_texts(m, {id})[0]; };
  fmt::print(
      "the logit lens: the residual stream after each block read as if it were the last (the final norm, "
      "then the unembedding); each cell the top token and its probability, and {}'s probability\n",
      quoted_token(token(l.target)));
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"stream"};
  for (const std::string& t : tokens)
    header.push_back(quoted_token(t));
  rows.push_back(std::move(header));
  for (std::size_t r = 0; r < l.rows; ++r) {
    std::vector<std::string> row{lens_row_name(r)};
    for (std::size_t i = 0; i < l.n; ++i) {
      const LensCell& cell = l.cells[r * l.n + i];
      row.push_back(fmt::format("{} {:.2f} ({:.2f})", quoted_token(token(cell.top)), cell.top_probability,
                                cell.target_probability));
    }
    rows.push_back(std::move(row));
  }
  fmt::print("{}", format_table(rows, true));
  return 0;
}

int patch(const ModelFlags& f, const OperationFlags& flags) {
  const PatchRequest request = read_flags<PatchRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  PatchResult result = naming_flags([&] {
    PatchResult priced = price_patch(m, request);
    run_patch(m, priced);
    return priced;
  });
  if (f.json) {
    fmt::print("{}\n", patch_json(m, result).dump());
    return 0;
  }
  const ResidualPatching& p = result.patching;
  const std::vector<std::string> clean_tokens = token_texts(m, result.clean),
                                 corrupt_tokens = token_texts(m, result.corrupt);
  const auto token = [&](int id) { return token_texts(m, {id})[0]; };
  fmt::print(
      "activation patching: the corrupted run with the residual stream at one (layer, position) taken from "
      "the clean run;\nthe metric is logit({}) − logit({}) at the last position: {:.4f} clean, {:.4f} "
      "corrupted; each cell the share of that difference the one site restores\n",
      quoted_token(token(p.target)), quoted_token(token(p.contrast)), p.clean, p.corrupt);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"stream"};
  for (std::size_t i = 0; i < p.n; ++i)
    header.push_back(clean_tokens[i] == corrupt_tokens[i]
                         ? quoted_token(clean_tokens[i])
                         : fmt::format("{}/{}", quoted_token(clean_tokens[i]), quoted_token(corrupt_tokens[i])));
  rows.push_back(std::move(header));
  for (std::size_t r = 0; r < p.rows; ++r) {
    std::vector<std::string> row{patching_row_name(r, p.rows)};
    for (std::size_t i = 0; i < p.n; ++i)
      row.push_back(percent(p.restored[r * p.n + i]));
    rows.push_back(std::move(row));
  }
  fmt::print("{}", format_table(rows, true));
  fmt::print("each head's output and each MLP's, at every position, taken from the clean run:\n");
  std::vector<std::vector<std::string>> components{{"layer"}};
  for (std::size_t h = 0; h < p.heads; ++h)
    components[0].push_back(fmt::format("head {}", h));
  components[0].push_back("mlp");
  for (std::size_t l = 0; l < p.layers; ++l) {
    std::vector<std::string> row{std::to_string(l)};
    for (std::size_t h = 0; h < p.heads; ++h)
      row.push_back(percent(p.heads_restored[l * p.heads + h]));
    row.push_back(percent(p.mlps_restored[l]));
    components.push_back(std::move(row));
  }
  fmt::print("{}", format_table(components, true));
  for (std::size_t k = 0; k < p.paths.size(); ++k)
    fmt::print("path {}: head {}'s clean output into head {}'s {} alone restores {}\n", to_string(p.paths[k]),
               to_string(p.paths[k].sender), to_string(p.paths[k].receiver),
               p.paths[k].input == 'q'   ? "query"
               : p.paths[k].input == 'k' ? "key"
                                         : "value",
               percent(p.paths_restored[k]));
  return 0;
}

// ---- verdict ------------------------------------------------------------------------------

void print_verdict(const ModelDir& m, const std::vector<int>& ids, const Verdict& v) {
  const std::vector<std::string> tokens = token_texts(m, ids);
  const auto token = [&](int id) { return quoted_token(token_texts(m, {id})[0]); };
  fmt::print("at position {} ({}), m = logit({}){} = {:.4f}\n", v.position, quoted_token(tokens[v.position]),
             token(v.target), v.contrast >= 0 ? fmt::format(" − logit({})", token(v.contrast)) : "", v.metric);
  fmt::print(
      "each source token by every measure, and the intervention: erasure = m with the token hidden as a key "
      "in every layer − m\n");
  std::vector<std::vector<std::string>> rows{{"source", "token"}};
  for (const Scores& s : v.token_measures)
    rows[0].push_back(s.name);
  rows[0].push_back("erasure");
  for (std::size_t j = 0; j < v.n; ++j) {
    std::vector<std::string> row{std::to_string(j), quoted_token(tokens[j])};
    for (const Scores& s : v.token_measures)
      row.push_back(fmt::format("{:.4g}", s.values[j]));
    row.push_back(fmt::format("{:+.4f}", v.token_interventions[0].values[j]));
    rows.push_back(std::move(row));
  }
  fmt::print("{}", format_table(rows, true));
  // Heads: the ten the zero ablation moves most.
  const std::vector<double>& zero = v.head_interventions[0].values;
  std::vector<std::size_t> order(zero.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return std::abs(zero[a]) > std::abs(zero[b]); });
  std::vector<std::vector<std::string>> heads{{"head", "dla", "zero ablation", "mean ablation"}};
  for (std::size_t k = 0; k < std::min<std::size_t>(order.size(), 10); ++k) {
    const std::size_t i = order[k];
    heads.push_back({to_string(HeadRef{i / v.heads, i % v.heads}), fmt::format("{:+.4f}", v.head_measures[0].values[i]),
                     fmt::format("{:+.4f}", zero[i]), fmt::format("{:+.4f}", v.head_interventions[1].values[i])});
  }
  fmt::print(
      "heads, the ten that zeroing moves most (each effect: m with the head's output zeroed, or set to its "
      "mean over the positions, − m):\n{}",
      format_table(heads, true));
  fmt::print("agreement with the interventions (sizes ranked, the sign set aside; 1 the same order, 0 none):\n");
  std::vector<std::vector<std::string>> table{{"measure", "intervention", "Kendall τ", "Spearman ρ"}};
  const auto number = [](double x) { return std::isfinite(x) ? fmt::format("{:+.2f}", x) : std::string("undefined"); };
  for (const Agreement& a : v.agreements)
    table.push_back({a.measure, a.intervention, number(a.kendall), number(a.spearman)});
  fmt::print("{}", format_table(table, true));
  fmt::print("what each measure shows, and what it cannot (the interventions are what the model used):\n");
  for (const Scores& s : v.token_measures)
    fmt::print("  {}: {}\n", s.name, measure_meaning(s.name));
}

int verdict_command(const ModelFlags& f, const OperationFlags& flags) {
  const VerdictRequest request = read_flags<VerdictRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  const bool tty = isatty(fileno(stderr));
  const Progress progress = [&](std::string_view stage, std::size_t done, std::size_t total) {
    if (!tty) return;
    if (stage == "text")  // a text of many begins
      fmt::print(stderr, "{}", done < total ? fmt::format("text {}/{}\n", done + 1, total) : "");
    else
      fmt::print(stderr, "\r{}: {}/{}{}", stage, done, total, done == total ? "\n" : "");
  };
  VerdictResult result = naming_flags([&] {
    VerdictResult priced = price_verdict(m, request);
    run_verdict(m, priced, progress);
    return priced;
  });
  if (f.json) {
    fmt::print("{}\n", verdict_result_json(m, result).dump());
    return 0;
  }
  if (!result.many) {
    print_verdict(m, result.runs[0], result.verdicts[0]);
    return 0;
  }
  fmt::print("{} {}, each explained at its last token (its own top prediction{})\n", result.runs.size(),
             request.induction ? "repeated sequences [BOS, r, r] cut before their last token" : "texts",
             request.contrast.given() ? " against --contrast" : "");
  std::vector<std::vector<std::string>> table{{"measure", "intervention", "texts", "Kendall τ", "Spearman ρ"}};
  const auto spread_of = [](double mean, double sd) {
    return std::isfinite(mean) ? fmt::format("{:+.2f} ± {:.2f}", mean, sd) : std::string("undefined");
  };
  for (const AgreementSpread& s : agreement_spread(result.verdicts))
    table.push_back({s.measure, s.intervention, std::to_string(s.texts), spread_of(s.kendall_mean, s.kendall_sd),
                     spread_of(s.spearman_mean, s.spearman_sd)});
  fmt::print("agreement with the interventions over the texts (mean ± standard deviation):\n{}",
             format_table(table, true));
  return 0;
}

// ---- evict --------------------------------------------------------------------------------

int evict_command(const ModelFlags& f, const OperationFlags& flags) {
  const EvictRequest request = read_flags<EvictRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  EvictResult result = naming_flags([&] { return price_evict(m, request); });
  run_evict(m, result, progress_line("eviction", "single-token forwards"));
  if (f.json) {
    fmt::print("{}\n", evict_json(result).dump());
    return 0;
  }
  const EvictionResult& e = result.result;
  fmt::print("{} text{}, {} tokens, {} predicted; the cache in {} ({} a token)\n", e.texts, e.texts == 1 ? "" : "s",
             e.tokens, e.predicted, cache_type_name(result.options.cache), format_bytes(result.token_bytes));
  fmt::print("full cache (f32): loss {:.4f} nats a token, perplexity {:.3f}\n", e.full.loss, e.full.perplexity);
  std::vector<std::vector<std::string>> rows{
      {"policy", "budget", "loss", "Δ loss", "perplexity", "agreement", "kept", "evicted"}};
  for (const EvictionMeasure& r : e.results)
    rows.push_back({std::string(policy_name(r.policy)), std::to_string(r.budget), fmt::format("{:.4f}", r.loss),
                    fmt::format("{:+.4f}", r.loss - e.full.loss), fmt::format("{:.3f}", r.perplexity),
                    fmt::format("{:.1f}%", 100 * r.agreement), format_bytes(r.kept_bytes),
                    std::to_string(r.evictions)});
  fmt::print("{}", format_table(rows, true));
  fmt::print("agreement: the share of positions whose most probable next token is the full f32 cache's\n");
  return 0;
}

// ---- export -------------------------------------------------------------------------------

int export_gguf(const ModelFlags& f, const OperationFlags& flags) {
  const ExportRequest request = read_flags<ExportRequest>(flags);
  const ModelDir m = open_model_dir(f.dir);
  ExportResult result = naming_flags([&] { return price_export(m, request); });
  run_export(m, result);
  if (f.json) {
    fmt::print("{}\n", export_json(result).dump());
    return 0;
  }
  const GgufExport& out = result.written;
  const GgmlType type = result.type;
  fmt::print("{}: {} tensors, {} ({} matrices{})\n", result.file, out.tensors, format_bytes(out.bytes),
             ggml_type_name(type),
             out.kept_f16 ? fmt::format("; {} whose rows are not whole Q8_0 blocks as F16", out.kept_f16) : "");
  fmt::print("tokenizer: {}\n", out.tokenizer.empty()
                                    ? "none written (the model has no tokenizer files llama.cpp can use); llama.cpp "
                                      "and Ollama need one to take text"
                                    : out.tokenizer);
  return 0;
}

}  // namespace

Command model_command(CLI::App& parent) {
  auto f = std::make_shared<ModelFlags>();
  CLI::App* model = parent.add_subcommand(
      "model",
      "A real model (GPT-2, Llama, SmolLM, Mistral, Qwen2/3, Gemma 3 in Hugging Face's layout, or a GGUF file): info, "
      "tokenize, run, map, heads, survey, eval, generate, kv, evict, attribute, qk, circuits, lens, patch, verdict, "
      "export");
  model->require_subcommand(1);
  // Each subcommand is an operation: its flags from the description, the model, --json.
  const std::vector<Command> subcommands{
      model_operation<InfoRequest>(
          *model, f, info,
          "the config, \"format\", \"file_bytes\", \"weight_bytes\", \"tensor_kinds\", \"tensors\", ..."),
      model_operation<TokenizeRequest>(*model, f, tokenize,
                                       "{\"ids\": [...], \"tokens\": [...], \"token_bytes\": [[...]...]}"),
      model_operation<RunRequest>(
          *model, f, run,
          "POST /api/model/run's reply: {\"ids\", \"tokens\", \"token_bytes\", \"top_k\", \"ablated\", "
          "\"top_k_ablated\", \"heads\", \"last_logits\", \"weights\" [layer][head][n][n]}"),
      model_operation<SurveyRequest>(
          *model, f, survey_command,
          "{\"texts\", \"documents\", \"windows\", \"tokens\", \"max_tokens\", \"shards\", \"skipped\", "
          "\"heads\": [{\"head\", \"kv_head\", \"previous_token\", \"self\", \"sink\", \"induction\", "
          "\"entropy\", \"distance_mean\", \"distance_variance\", \"histogram\", \"top_query_tokens\", "
          "\"top_key_tokens\", \"examples\"}]} (docs/survey.md)"),
      model_operation<MapRequest>(*model, f, map_command,
                                  "{\"head\", \"kv_head\", \"tile\", \"row0\", \"col0\", \"rows\", \"cols\", "
                                  "\"weights\" [down][across], \"query\", \"key\", \"ids\", \"tokens\"}"),
      model_operation<HeadsRequest>(
          *model, f, heads,
          "{\"heads\": [{\"layer\", \"head\", \"previous_token\", \"duplicate_token\", \"induction\", "
          "\"sink\"}]}"),
      model_operation<EvictRequest>(*model, f, evict_command,
                                    "{\"texts\", \"tokens\", \"predicted\", \"cache\", \"token_bytes\", \"full\": "
                                    "{\"loss\", \"perplexity\", \"agreement\", \"kept_bytes\", \"budget\"}, "
                                    "\"results\": [{\"policy\", \"budget\", \"loss\", \"perplexity\", "
                                    "\"agreement\", \"kept_bytes\", \"evictions\"}]}"),
      model_operation<EvalRequest>(*model, f, eval, "{\"loss_first_half\", \"loss_second_half\", \"ablated\"}"),
      model_operation<GenerateRequest>(*model, f, generate,
                                       "{\"prompt\", \"generated\": [{\"id\", \"token\", \"probability\", "
                                       "\"cache_tokens\", \"cache_bytes\"; with --trace \"position\", "
                                       "\"alternatives\", \"attention\" [L][H][position + 1], "
                                       "\"cache_bytes_per_layer\"}], \"ids\", \"text\"; with --trace \"cache\"}"),
      model_operation<ModelKvRequest>(*model, f, kv,
                                      "{\"layers\", \"kv_heads\", \"head_dim\", \"dtype\", \"weights_bytes\", "
                                      "\"weights_type\", \"contexts\": [{\"tokens\", "
                                      "\"formula_bytes\", \"used_bytes\", \"reserved_bytes\", \"resident_bytes\"}]}"),
      model_operation<AttributeRequest>(
          *model, f, attribute,
          "{\"position\", \"target\", \"contrast\", \"logit\", \"final_bias\", \"parts\": [{\"kind\", \"layer\", "
          "\"head\", "
          "\"logit\"}], \"heads\" [L][H], \"sources\" [L][H][n], \"by_source\" [n], \"ids\", \"tokens\"}"),
      model_operation<QkRequest>(*model, f, qk,
                                 "{\"head\", \"query\", \"key\", \"score\", \"weight\", \"rotary\", "
                                 "\"unrotated_score\", \"parts\": [{\"query_side\", \"key_side\", \"score\", "
                                 "\"unrotated\"}], \"query_sides\", \"key_sides\", \"ids\", \"tokens\"}"),
      model_operation<CircuitsRequest>(*model, f, circuits,
                                       "{\"heads\", \"composition\": {\"q\", \"k\", \"v\"} [a][b], \"baseline\", "
                                       "\"ov_copying\", \"qk_singular_values\", \"ov_singular_values\"}"),
      model_operation<LensRequest>(
          *model, f, lens,
          "{\"target\", \"rows\": [{\"layer\", \"cells\": [{\"top\", \"top_token\", \"top_probability\", "
          "\"target_probability\", \"target_rank\"}]}], \"ids\", \"tokens\"}"),
      model_operation<PatchRequest>(
          *model, f, patch,
          "{\"target\", \"contrast\", \"clean_metric\", \"corrupt_metric\", \"rows\": [{\"layer\", \"restored\" [n]}], "
          "\"heads\" [L][H], \"mlps\" [L], \"clean\", \"corrupt\"}"),
      model_operation<VerdictRequest>(
          *model, f, verdict_command,
          "{\"metric\", \"tokens_measured\": {measure: [n]}, \"tokens_intervened\": {\"erasure\"}, \"heads_measured\": "
          "{\"dla\": [L·H]}, \"heads_intervened\", \"agreements\": [{\"measure\", \"intervention\", \"kendall\", "
          "\"spearman\"}]}; with texts or induction {\"texts\": [...], \"agreements\": [{..., \"kendall_mean\", "
          "\"kendall_sd\", ...}]}"),
      model_operation<ExportRequest>(*model, f, export_gguf,
                                     "{\"file\", \"bytes\", \"tensors\", \"type\", \"kept_f16\", \"tokenizer\"}")};
  return {model, [subcommands] {
            for (const Command& c : subcommands)
              if (c.app->parsed()) return c.run();
            return 2;  // require_subcommand(1): not reached
          }};
}

}  // namespace attnlab::cli
