// The attnlab command as a user runs it: the worked examples' numbers on stdout, and for every kind
// of bad input one message on stderr, exit code 2, and nothing on stdout.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../sanitizers.hpp"
#include "run_attnlab.hpp"

using namespace attnlab_cli_test;

TEST(Cli, ExplainWithNoArgumentsWorksSeed000) {
  const Result r = run_attnlab("explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"2×1 + 1×2 = 4", "2.12", "8.34 + 2.03 + 16.92 = 27.29", "= 0.69 0.93", "Query 2 \"t3\""})
    EXPECT_CONTAINS(r.out, s);
}

TEST(Cli, ExplainSoftmaxRowWorksSeed001AtThreeDecimals) {
  const Result r = run_attnlab("explain softmax-row");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "e^2 = 7.389,   e^0.500 = 1.649,   e^-1 = 0.368");
  EXPECT_CONTAINS(r.out, "= 9.406");
  EXPECT_CONTAINS(r.out, "7.389 / 9.406 = 0.786,   1.649 / 9.406 = 0.175,   0.368 / 9.406 = 0.039");
}

TEST(Cli, PrecisionFlagShowsMoreDecimals) {
  const Result r = run_attnlab("explain --precision 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "e^2.1213 = 8.3421");
}

TEST(Cli, ExplainPreviousTokenQueryFour) {
  const Result r = run_attnlab("explain previous-token --query 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "largest weight: key 3 \"fox\"");
}

TEST(Cli, ExplainAUserFileWithFlagsOverridingIt) {
  const auto file = write_temp("mine.json", R"({"format": "attnlab-scenario/1", "tokens": ["a", "b"],
    "embeddings": [[1, 0], [0, 1]], "heads": [{"w_q": [[1, 0], [0, 1]], "w_k": [[1, 0], [0, 1]], "w_v": [[1, 0], [0, 1]]}]})");
  const Result r = run_attnlab("explain " + file.string() + " --causal --temperature 0.1 --query 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "mask: causal, temperature T = 0.10");
  EXPECT_CONTAINS(r.out, "masked: -inf");
}

TEST(Cli, RunJsonFollowsTheTraceContract) {
  const Result r = run_attnlab("run three-tokens --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"], nlohmann::json::parse(R"(["t1","t2","t3"])"));
  EXPECT_EQ(j["source_tokens"], j["tokens"]);
  EXPECT_NEAR(j["heads"][0]["weights"][2][2].get<double>(), 0.62, 0.005);
  EXPECT_NEAR(j["output"][2][0].get<double>(), 0.69, 0.005);
}

TEST(Cli, RunTakesTheSameFlagsAsExplain) {
  const Result r = run_attnlab("run three-tokens --json --causal --mask-token 0 --window 2 --temperature 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["heads"][0]["logits"][2][0].is_null());
  EXPECT_TRUE(j["heads"][0]["fully_masked"][0].get<bool>());
  EXPECT_EQ(j["temperature"].get<double>(), 2.0);
}

TEST(Cli, ScenariosListsTheBundledOnesOneLineEach) {
  const Result r = run_attnlab("scenarios");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s :
       {"three-tokens", "softmax-row", "previous-token", "random-head", "multi-head", "cross-attention"})
    EXPECT_CONTAINS(r.out, s);
  EXPECT_EQ(r.out.rfind("three-tokens", 0), 0u) << "the default comes first";
}

TEST(Cli, PermuteShowsOutputsUnchangedWithoutPositions) {
  const Result r = run_attnlab("explain three-tokens --permute 2,0,1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "only its row moved");
}

TEST(CliBadInput, UnknownScenarioFlagAndSubcommand) {
  expect_refused("explain three-tokenz", "unknown scenario \"three-tokenz\"; the bundled ones are:");
  expect_refused("explain --bogus", "--bogus");
  expect_refused("frobnicate", "frobnicate");
}

TEST(CliBadInput, MalformedAndInvalidFiles) {
  expect_refused("explain " + write_temp("broken.json", "{\"format\": ").string(), "malformed JSON at line 1");
  expect_refused("explain " + write_temp("nan.json", "{\"embeddings\": [[NaN]]}").string(), "malformed JSON");
  expect_refused("explain /no/such/scenario.json", "cannot open the file");
  expect_refused("explain " + write_temp("ragged.json", R"({"format": "attnlab-scenario/1", "tokens": ["a", "b"],
    "embeddings": [[1, 0], [0]], "heads": [{"random": 1}]})")
                                  .string(),
                 "embeddings[1]: ragged matrix");
}

TEST(CliBadInput, BadFlagValues) {
  expect_refused("explain --temperature 0", "temperature: must be a finite number > 0");
  expect_refused("explain --temperature -2", "temperature");
  expect_refused("explain --temperature abc", "--temperature");
  expect_refused("explain --temperature inf", "temperature: must be a finite number > 0");
  expect_refused("explain --temperature nan", "temperature");
  expect_refused("explain --mask-token 9", "--mask-token 9: token 9 does not exist");
  expect_refused("explain --query 3", "query: token 3 does not exist");
  expect_refused("explain --head 1", "--head: head 1 does not exist");
  expect_refused("explain --permute 0,0,1", "permute: index 0 appears twice");
  expect_refused("explain --causal --no-causal", "contradict");
  expect_refused("explain cross-attention --causal", "causal: a causal mask needs as many queries as keys");
  expect_refused("explain --precision 40", "--precision: must be 0 to 12");
}

// ---- interventions and probe -------------------------------------------------------

TEST(CliInterventions, ExplainShowsTheIntervenedStepsAndWhatMoved) {
  const Result r = run_attnlab("explain three-tokens --ablate-head 0:uniform --mask-token 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "Intervention on head 0 \"worked example\": uniform ablation");
  EXPECT_CONTAINS(r.out, "uniform weights instead: 1/2 = 0.50");
  EXPECT_CONTAINS(r.out, "- knock out key 1 \"t2\"");
  EXPECT_CONTAINS(r.out, "- ablate head 0 \"worked example\": its weights replaced by a uniform row");
  EXPECT_CONTAINS(r.out, "0.69 0.93");  // the worked example's output for t3, before
  EXPECT_CONTAINS(r.out, "‖Δ‖");
}

TEST(CliInterventions, RunJsonCarriesBeforeAfterAndDeltaPerToken) {
  const Result r = run_attnlab(
      "run multi-head --json --ablate-head 1:mean --scale-head 2:0.5 --replace-token 3:cat --permute "
      "1,0,2,3,4,5,6,7,8,9");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["heads"][1]["ablation"], "mean");
  EXPECT_EQ(j["heads"][2]["scale"].get<double>(), 0.5);
  EXPECT_EQ(j["heads"][0]["ablation"], nullptr);
  const auto& iv = j["intervention"];
  EXPECT_EQ(iv["applied"].size(), 4u);
  EXPECT_EQ(iv["tokens_after"][3], "cat");
  EXPECT_EQ(iv["after_row"][0], 1) << "token 0 is row 1 after the permutation";
  ASSERT_EQ(iv["delta_norm"].size(), 10u);
  for (std::size_t i = 0; i < 10; ++i)
    for (std::size_t c = 0; c < 6; ++c)
      EXPECT_NEAR(iv["delta"][i][c].get<double>(), iv["after"][i][c].get<double>() - iv["before"][i][c].get<double>(),
                  1e-12);
  const Result plain = run_attnlab("run three-tokens --json");
  EXPECT_TRUE(nlohmann::json::parse(plain.out)["intervention"].is_null());
}

TEST(CliInterventions, RunSummaryAddsTheBeforeAfterTable) {
  const Result r = run_attnlab("run three-tokens --scale-head 0:2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "scale head 0 \"worked example\" by 2");
  EXPECT_CONTAINS(r.out, "1.389 1.851");  // t3: 2 × (0.694 0.926)
}

TEST(CliProbe, WeightsMisleadShowsAllFiveMeasuresAndTheCounterfactual) {
  const Result r = run_attnlab("probe weights-mislead");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"query 5 \"good\", readout p(negative)", "decision negative", "weight·‖v‖", "erasure Δ",
                        "grad×input", "Kendall τ", "0.288 (positive, flips)",
                        "Knocking out the highest-weighted key 0 \"<s>\" (weight 0.50) leaves the decision negative",
                        "here the largest weight misleads", "Jain & Wallace", "Jensen–Shannon divergence",
                        "decision negative → negative", "plausible", "faithful"})
    EXPECT_CONTAINS(r.out, s);
}

TEST(CliProbe, WeightsAgreeAndJsonMatchTheApiContract) {
  const Result r = run_attnlab("probe weights-agree --json --epsilon 0.02");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["serrano_smith"]["weights_agree"], true);
  EXPECT_EQ(j["serrano_smith"]["top_flips"], true);
  EXPECT_EQ(j["source_tokens"][j["serrano_smith"]["top_weight"].get<std::size_t>()], "not");
  EXPECT_EQ(j["counterfactual"]["epsilon"].get<double>(), 0.02);
  double sum = 0;
  for (const auto& w : j["counterfactual"]["found"])
    sum += w.get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_LE(std::abs(j["counterfactual"]["readout_after"].get<double>() - j["value"].get<double>()), 0.02);
}

TEST(CliProbe, TakesTheInterventionFlagsAndAReadout) {
  const Result r = run_attnlab("probe three-tokens --query 1 --readout coordinate:0 --mask-token 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "knock out key 0 \"t1\"");
  EXPECT_CONTAINS(r.out, "query 1 \"t2\", readout output[0]");
  EXPECT_CONTAINS(r.out, "0 t1 (hidden)");
}

TEST(CliBadInput, BadInterventionAndProbeFlags) {
  expect_refused("explain --ablate-head 3", "--ablate-head 3: head 3 does not exist; three-tokens has heads 0 to 0");
  expect_refused("explain --ablate-head 0:half", "--ablate-head 0:half: unknown ablation \"half\"; use zero");
  expect_refused("run --scale-head 0", "--scale-head 0: \"0\" is not H:F");
  expect_refused("run --scale-head 0:x", "\"x\" is not a finite number");
  expect_refused("run --replace-token 7:dog", "--replace-token 7:dog: token 7 does not exist");
  expect_refused("run --replace-token 1", "is not J:WORD");
  expect_refused("run --replace-embedding 0:1,2,3", "the embedding has 3 numbers but d_model is 2");
  expect_refused("probe --readout class", "--readout: three-tokens has no readout matrix");
  expect_refused("probe --readout direction:1", "--readout: the direction has 1 numbers");
  expect_refused("probe weights-agree --readout class:maybe", "unknown class \"maybe\"");
  expect_refused("probe --epsilon -1", "--epsilon: must be a finite number >= 0");
  expect_refused("probe --head 2", "--head: head 2 does not exist");
  expect_refused("probe --query 5", "query: token 5 does not exist");
}

// ---- attnlab cost and attnlab kv ------------------------------------------------------

namespace {
// The number after `prefix` in `text` (e.g. "time grows as n^" -> 2.03), or NaN.
double number_after(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find(prefix);
  return at == std::string::npos ? std::nan("") : std::stod(text.substr(at + prefix.size()));
}
}  // namespace

// ---- operations described once ------------------------------------------------------

// docs/operations.md's tables are what `attnlab operations --markdown` prints from the
// descriptions, between its two markers: a field added, renamed or re-defaulted in the
// library and not in the docs fails here.
TEST(Cli, DocsOperationsTablesAreTheOperationsOwnDescriptions) {
  const Result r = run_attnlab("operations --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string docs = read_file(std::filesystem::path(ATTNLAB_DOCS_DIR) / "operations.md");
  const std::string begin = "<!-- generated by `attnlab operations --markdown`: begin -->\n",
                    end = "<!-- generated: end -->";
  const std::size_t from = docs.find(begin), to = docs.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/operations.md has no begin marker";
  ASSERT_NE(to, std::string::npos) << "docs/operations.md has no end marker";
  EXPECT_EQ(docs.substr(from + begin.size(), to - from - begin.size()), r.out)
      << "regenerate: build/attnlab operations --markdown, between the markers of docs/operations.md";
}

// The command's flags are the description's fields: each one offered on the command line
// appears in --help with its default, and one the command does not offer is refused.
TEST(Cli, EachOperationsFlagsAndDefaultsComeFromItsDescription) {
  const Result described = run_attnlab("operations");
  ASSERT_EQ(described.exit_code, 0) << described.err;
  const nlohmann::json operations = nlohmann::json::parse(described.out)["operations"];
  ASSERT_GE(operations.size(), 3u);
  for (const nlohmann::json& op : operations) {
    const Result help = run_attnlab(op["name"].get<std::string>() + " --help");
    ASSERT_EQ(help.exit_code, 0) << help.err;
    for (const nlohmann::json& field : op["fields"]) {
      const std::vector<std::string> faces = field["faces"];
      const bool offered = std::find(faces.begin(), faces.end(), "cli") != faces.end();
      // train's task is the API's choice of one; the command's own --task also takes text FILE.
      if (!offered && op["name"] == "train" && field["name"] == "task") continue;
      if (!offered) {
        EXPECT_EQ(help.out.find(field["flag"].get<std::string>() + " "), std::string::npos) << "not the command's";
        continue;
      }
      EXPECT_CONTAINS(help.out, field["flag"].get<std::string>());
      const nlohmann::json& d = field["default"];
      if (d.is_number_unsigned() && d.get<std::uint64_t>() > 0) EXPECT_CONTAINS(help.out, "default " + d.dump());
    }
  }
  // cost's JSON is the reply POST /api/cost gives: the shape with its defaults, one row per n.
  const Result cost = run_attnlab("cost --tokens 3,6 --json");
  ASSERT_EQ(cost.exit_code, 0) << cost.err;
  const nlohmann::json reply = nlohmann::json::parse(cost.out);
  EXPECT_EQ(reply["shape"]["d_model"], 4096);
  EXPECT_EQ(reply["rows"].size(), 2u);
  EXPECT_EQ(reply["rows"][1]["dense_cells"], 36);
  EXPECT_TRUE(reply["measured"].is_null());
  const Result kv = run_attnlab("kv --model gpt2 --json");
  ASSERT_EQ(kv.exit_code, 0) << kv.err;
  const nlohmann::json kv_reply = nlohmann::json::parse(kv.out);
  std::vector<std::uint64_t> contexts;
  for (const nlohmann::json& row : kv_reply["rows"])
    contexts.push_back(row["context"].get<std::uint64_t>());
  EXPECT_EQ(contexts, (std::vector<std::uint64_t>{4096, 32768, 131072}));
}

TEST(Cli, CostPrintsTheWorkedExamplesGridCountsFlopsAndBytes) {
  const Result r = run_attnlab("cost --tokens 3,6,100000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"d_model 4096 = 32 heads × d_k 128, 32 layers", "10,000,000,000", "5,000,050,000", "147,456",
                        "163,840,000,000,000", "20,000,000,000 (18.63 GiB)", "strided √n (Child)", "window w=4,096"})
    EXPECT_CONTAINS(r.out, s);
  EXPECT_EQ(r.out.find("Measured"), std::string::npos) << "measuring only on request";
}

TEST(Cli, CostMeasureFitsAnExponentNearTwoAndPlotsIt) {
  const auto plot = std::filesystem::path(ATTNLAB_TEST_TMP) / (std::to_string(getpid()) + "-cost.svg");
  const Result r = run_attnlab("cost --tokens 512 --d-model 64 --heads 1 --measure --plot " + plot.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The shape of the output, never its wall-clock time: a fitted exponent is printed (its
  // value is the machine's), and the chart's line is that fit.
  const double time_exponent = number_after(r.out, "time grows as n^");
  EXPECT_TRUE(std::isfinite(time_exponent)) << r.out;
  EXPECT_CONTAINS(r.out, "kernel memory grows as n^2.00");
  EXPECT_CONTAINS(r.out, "wrote " + plot.string());
  const std::string svg = read_file(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_CONTAINS(svg, "n (tokens)");
  EXPECT_CONTAINS(svg, fmt::format("least-squares fit: n^{:.2f}", time_exponent)) << "the line is the fit printed";
  // One measured length has no fit: the chart draws no line claiming one.
  const Result one = run_attnlab("cost --tokens 16 --d-model 64 --heads 1 --measure --plot " + plot.string());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_CONTAINS(one.out, "one length only: no exponent to fit");
  EXPECT_EQ(read_file(plot).find("least-squares fit"), std::string::npos);
}

TEST(Cli, PlotsAlsoComeAsPng) {
  const auto plot = std::filesystem::path(ATTNLAB_TEST_TMP) / (std::to_string(getpid()) + "-kv.png");
  const Result r = run_attnlab("kv --model gpt2 --context 1024,4096 --plot " + plot.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string png = read_file(plot);
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << "a PNG signature";
  EXPECT_FALSE(std::filesystem::exists(plot.string() + ".tmp.svg")) << "the intermediate SVG is removed";
}

TEST(Cli, KvLlama3At8192TokensInF16IsExactlyOneGiB) {
  const Result r = run_attnlab("kv --model llama-3-8b --context 8192,131072 --dtype f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "2 × 32 × 8 × 128 × context × 2 = 131,072 bytes (128 KiB) per token");
  EXPECT_CONTAINS(r.out, "1,073,741,824 (1 GiB)");
  EXPECT_CONTAINS(r.out, "8,030,261,248 parameters × 2 bytes (f16) = 16,060,522,496 bytes (14.96 GiB)");
  EXPECT_CONTAINS(r.out, "the cache is larger than the weights");
  EXPECT_CONTAINS(r.out, "The cache outgrows the weights from 122,533 tokens on.");
}

TEST(Cli, KvBudgetGivesTheLongestContextAndAnyShapeWorks) {
  const Result r = run_attnlab("kv --model llama-3-8b --budget 24GiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "leaving 9.04 GiB for the cache: the longest context that fits is 74,075 tokens.");
  const Result custom = run_attnlab("kv --layers 2 --kv-heads 1 --head-dim 64 --context 10 --dtype f32");
  ASSERT_EQ(custom.exit_code, 0) << custom.err;
  EXPECT_CONTAINS(custom.out, "10,240 (10 KiB)");
  EXPECT_CONTAINS(custom.out, "weights: unknown");
}

TEST(Cli, KvMeasureDecodesAndItsHeapBytesAgreeWithTheFormulaWithinFivePercent) {
  const auto plot = std::filesystem::path(ATTNLAB_TEST_TMP) / (std::to_string(getpid()) + "-kv.svg");
  const Result r = run_attnlab("kv --model gpt2 --context 4096 --measure --plot " + plot.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "decoded with random weights (d_model 768) in 12 of its 12 layers");
#if ATTNLAB_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator keeps its own books: malloc's counts mean nothing under it";
#endif
  const double malloc_percent = number_after(r.out, "differs from the formula by ");
  EXPECT_LT(std::abs(malloc_percent), 5.0) << r.out;
  // The resident-memory figure is printed beside it; it depends on the machine, so only its
  // presence is checked.
  EXPECT_CONTAINS(r.out, "% (malloc) and ");
  EXPECT_CONTAINS(read_file(plot), "resident (RSS)");
}

TEST(CliBadInput, CostAndKvRefuseBadSizesNamingTheFlag) {
  expect_refused("kv --model llama-9",
                 "--model: unknown model \"llama-9\"; the known models are: gpt2, gpt2-xl, "
                 "llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b, qwen2.5-7b, gemma-2-9b");
  expect_refused("kv", "--model: give a model");
  expect_refused("kv --layers 2 --head-dim 64", "--kv-heads: missing");
  expect_refused("cost --tokens 0", "--tokens: 0 tokens has no grid");
  expect_refused("cost --tokens 3,-6", "--tokens: expected a whole number >= 1 in digits (e.g. 4096) but got \"-6\"");
  expect_refused("cost --tokens 3 --d-model -5", "--d-model: expected a whole number >= 1 in digits");
  expect_refused("cost --tokens 3 --heads 0", "--heads: 0 is outside 1..65,536");
  expect_refused("cost --tokens 3 --heads 3", "--heads: 3 heads do not divide d_model 4096");
  expect_refused("kv --model gpt2 --context 0", "--context: 0 tokens has no cache");
  expect_refused("kv --model gpt2 --layers 0", "--layers: 0 is outside 1..65,536");
  expect_refused("kv --model llama-3-8b --kv-heads 3", "--kv-heads: 3 KV heads do not divide 32 query heads");
  expect_refused("kv --model gpt2 --measure-layers 2", "--measure-layers: only means something when measure is on");
}

TEST(CliBadInput, CostAndKvRefuseCountsThatOverflow64Bits) {
  expect_refused("cost --tokens 100000000", "--tokens: 100,000,000 tokens make the FLOPs");
  expect_refused("cost --tokens 100000000", "the largest n with this shape is 5,931,641");
  expect_refused("kv --model llama-3-70b --context 18446744073709551615",
                 "--context: 18,446,744,073,709,551,615 tokens "
                 "× 327,680 bytes per token overflows 64 bits");
  expect_refused("kv --model gpt2 --context 99999999999999999999",
                 "--context: 99999999999999999999 is more than 2^64 - 1");
}

TEST(CliBadInput, CostAndKvRefuseBadDtypesBudgetsAndPlots) {
  expect_refused("kv --model gpt2 --dtype f8",
                 "--dtype: unknown dtype \"f8\"; use f32 (4 bytes), f16 (2 bytes) or bf16");
  expect_refused("cost --tokens 3 --dtype int4", "--dtype: unknown dtype \"int4\"");
  expect_refused("kv --model gpt2 --budget 24parsecs", "--budget: \"24parsecs\" has an unknown unit \"parsecs\"");
  expect_refused("kv --model gpt2 --budget -1GiB", "--budget: \"-1GiB\" is negative");
  expect_refused("kv --model gpt2 --budget 0GiB", "--budget: \"0GiB\" is 0 bytes");
  expect_refused("cost --tokens 3 --plot chart.gif", "--plot: \"chart.gif\" ends in neither .svg nor .png");
  expect_refused("cost --tokens 3 --plot /no/such/dir/chart.svg", "--plot: cannot write \"/no/such/dir/chart.svg\"");
  expect_refused("cost --tokens 3 --kernel fast", "--kernel: unknown kernel \"fast\"; the kernels are: grid, tiled");
}

TEST(CliBadInput, MeasuresThatWouldNotFitAreRefusedUpFront) {
  expect_refused("cost --tokens 1000000 --measure",
                 "--measure: timing the grid kernel at n = 1,000,000 (d_k 128) needs");
  expect_refused("cost --tokens 1000000 --measure", "available (MemAvailable in /proc/meminfo)");
  expect_refused("kv --model llama-3-70b --context 10000000 --measure --measure-layers 80",
                 "--measure: decoding 80 layers to 10,000,000 tokens needs");
  expect_refused("kv --model gpt2 --context 1000 --measure --measure-layers 13",
                 "--measure-layers: 13 is outside 1..12");
}

TEST(CliKernels, RunWithTheTiledKernelMatchesTheReference) {
  const Result r = run_attnlab("run previous-token --kernel tiled --causal");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "output (tiled kernel");
  const auto at = r.out.find("largest |tiled - reference| = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_LT(std::stod(r.out.substr(at + 30)), 1e-4) << r.out;
  const Result j = run_attnlab("run three-tokens --kernel tiled --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto trace = nlohmann::json::parse(j.out);
  EXPECT_EQ(trace["kernel"], "tiled");
  EXPECT_NEAR(trace["output"][2][0].get<double>(), 0.6943, 1e-4);
  EXPECT_NEAR(trace["output"][2][1].get<double>(), 0.9257, 1e-4);
  expect_refused("run --kernel warp", "--kernel: \"warp\" is not a kernel");
  expect_refused("run --kernel tiled --mask-token 1", "--kernel tiled: interventions run on the reference kernel");
}

TEST(CliKernels, BenchQuickPrintsConsistentFigures) {
  const Result r = run_attnlab("bench --quick --json --repeats 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double peak = j["machine"]["f32_peak_gflops"].get<double>();
  EXPECT_GT(peak, 0);
  EXPECT_GT(j["machine"]["read_gbps"].get<double>(), 0);
  ASSERT_GE(j["results"].size(), 5u);
  for (const auto& c : j["results"]) {
    SCOPED_TRACE(c["case"].get<std::string>());
    ASSERT_TRUE(c["ran"].get<bool>());
    const double seconds = c["median_seconds"].get<double>();
    ASSERT_GT(seconds, 0);
    if (c["kernel"] == "decode") {
      // Bytes over time, and the share of reading the same bytes (timed in the same run).
      const double gbps = c["gbps"].get<double>(), stream = c["stream_gbps"].get<double>();
      EXPECT_GT(gbps, 0);
      EXPECT_GT(stream, 0);
      EXPECT_NEAR(c["percent_of_stream"].get<double>(), 100 * gbps / stream, 1e-6 * 100);
      EXPECT_NEAR(gbps, c["bytes"].get<double>() / seconds / 1e9, 1e-6 * gbps);
      // The roofline: the slower of reading the bytes and doing the multiply-adds at peak.
      const double read_s = c["bytes"].get<double>() / (stream * 1e9), math_s = c["flops"].get<double>() / (peak * 1e9);
      EXPECT_NEAR(c["roofline_seconds"].get<double>(), std::max(read_s, math_s), 1e-6 * std::max(read_s, math_s));
      EXPECT_EQ(c["flops"].get<double>(), 4.0 * 1 * 32 * 8192 * 128) << "scores and mixing: 4·n·H·m·d";
      continue;
    }
    // GFLOP/s is the counted FLOPs over the median time, and % of peak its share.
    EXPECT_NEAR(c["gflops"].get<double>(), c["flops"].get<double>() / seconds / 1e9, 1e-6 * c["gflops"].get<double>());
    EXPECT_NEAR(c["percent_of_peak"].get<double>(), 100 * c["gflops"].get<double>() / peak, 1e-6 * 100);
    // The tiled kernel's extra memory is a few tiles per thread, not the 1024² grid (8 MiB per head in doubles).
    EXPECT_LT(c["extra_bytes"].get<double>(), 4.0 * (1 << 20));
  }
  EXPECT_EQ(j["results"][0]["flops"].get<double>(), 4.0 * 1024 * 1024 * 128 * 16);
  EXPECT_EQ(j["results"][1]["flops"].get<double>(), 4.0 * 1024 * 1024 * 128 * 16 / 2) << "causal halves the count";
}

TEST(CliBadInput, ADeeplyNestedScenarioFileIsRefusedNotACrash) {
  const auto file =
      write_temp(std::to_string(getpid()) + "-deep.json", std::string(100000, '[') + std::string(100000, ']'));
  for (const char* command : {"run", "explain", "probe"})
    expect_refused(std::string(command) + " " + file.string(), "nested more than 64 levels deep");
}

// ---- scenario files priced before the work, and read within their limit ------------------

TEST(CliBadInput, AScenarioFileIsSizedBeforeItIsRead) {
  // A sparse file: 1 GiB long, no disk and, since its size is checked first, no memory.
  const auto big = std::filesystem::path(ATTNLAB_TEST_TMP) / (std::to_string(getpid()) + "-big.json");
  { std::ofstream(big) << ' '; }
  std::filesystem::resize_file(big, std::uint64_t{1} << 30);
  expect_refused("run " + big.string(), "the file is 1073741824 bytes, more than the limit of 67108864 bytes");
  std::filesystem::remove(big);
  // A device or a pipe has no size: it is read only until it passes the limit.
  expect_refused("run /dev/zero", "/dev/zero: it holds more than the limit of 67108864 bytes (64 MiB)");
}

TEST(CliBadInput, RandomHeadsArePricedBeforeTheyAreDrawn) {
  // One token 4096 wide and 64 heads of d_k = d_v = 4096: 402 MB of weights each, 25 GB in all.
  nlohmann::json doc = {{"format", "attnlab-scenario/1"},
                        {"tokens", {"a"}},
                        {"embeddings", {std::vector<int>(4096, 0)}},
                        {"heads", std::vector<nlohmann::json>(64, {{"random", 1}, {"d_k", 4096}, {"d_v", 4096}})}};
  const auto file = write_temp(std::to_string(getpid()) + "-wide.json", doc.dump());
  for (const char* command : {"run", "explain", "probe"})
    expect_refused(std::string(command) + " " + file.string(),
                   "heads[5]: drawing this head's 50331648 weights (d_in × (2·d_k + d_v)) would bring the heads' "
                   "weights to 2415919104 bytes, more than the limit of 2147483648");
}

TEST(CliBadInput, AWindowTooLargeAndOverflowingComputationsAreRefusedNamingTheField) {
  expect_refused("run --window 18446744073709551615", "window: 18446744073709551615 is more than the limit of 4096");
  expect_refused("run --temperature 1e-320", "temperature: 1e-320 makes head 0's logits");
  const auto file = write_temp(std::to_string(getpid()) + "-huge.json", R"({"format": "attnlab-scenario/1",
    "tokens": ["a", "b"], "embeddings": [[1e308, 1e308], [1, 0]], "heads": [{"w_q": [[1, 0], [0, 1]],
    "w_k": [[1, 0], [0, 1]], "w_v": [[1, 0], [0, 1]]}]})");
  expect_refused("run " + file.string(), "embeddings: head 0's scores overflow (the largest |number| here is 1e+308)");
}

namespace {

// `attnlab ARGS...` started directly (no shell, so a signal reaches it), its stdout a pipe.
struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};
Child start_attnlab(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv{const_cast<char*>(ATTNLAB_BIN)};
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(ATTNLAB_BIN, argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  return {pid, fdopen(pipe_fds[0], "r")};
}

// The reply to one HTTP request on a fresh connection to 127.0.0.1:`port`, read until the
// server closes it ("" when it closed without a reply).
std::string http_exchange(int port, const std::string& request) {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      send(sock, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    for (ssize_t got; (got = recv(sock, buffer, sizeof buffer, 0)) > 0;)
      reply.append(buffer, static_cast<std::size_t>(got));
  }
  close(sock);
  return reply;
}

}  // namespace

// SIGTERM while a heavy probe runs (64 tokens, d_model 512, seven 256-wide random heads: many
// seconds of work): the probe stops at its next check and is answered with the shutdown 503
// (or its connection closed), never its results, and the command exits 0.
TEST(CliServe, SigtermWhileAHeavyRequestRunsStopsItAndExitsZero) {
  Child child = start_attnlab({"serve", "--port", "0", "--runs", std::string(ATTNLAB_TEST_TMP) + "/serve-runs"});
  ASSERT_GT(child.pid, 0);
  ASSERT_NE(child.out, nullptr);
  char line[256] = {};
  ASSERT_NE(std::fgets(line, sizeof line, child.out), nullptr);  // the URL, http://127.0.0.1:PORT/
  const std::string url = line;
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  nlohmann::json tokens = nlohmann::json::array(), embeddings = nlohmann::json::array(),
                 heads = nlohmann::json::array();
  for (int i = 0; i < 64; ++i) {
    tokens.push_back("t" + std::to_string(i));
    std::vector<double> row(512);
    for (int j = 0; j < 512; ++j)
      row[j] = double((i * 7 + j * 3) % 11 - 5) / 5.0;
    embeddings.push_back(row);
  }
  for (int h = 0; h < 7; ++h)
    heads.push_back({{"random", h + 1}, {"d_k", 256}, {"d_v", 256}});
  const std::string body =
      nlohmann::json{
          {"scenario",
           {{"format", "attnlab-scenario/1"}, {"tokens", tokens}, {"embeddings", embeddings}, {"heads", heads}}}}
          .dump();
  std::string reply;
  std::thread asker([&] {
    reply = http_exchange(port, fmt::format("POST /api/probe HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: "
                                            "application/json\r\nContent-Length: {}\r\n\r\n{}",
                                            port, body.size(), body));
  });
  // The server's own sign that the probe's work has started (GET /api/health's
  // heavy_work.running), then the signal: no guess at how long starting takes.
  const auto probe_running = [&] {
    const std::string r = http_exchange(
        port, fmt::format("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", port));
    const std::size_t body = r.find("\r\n\r\n");
    const nlohmann::json health =
        body == std::string::npos ? nlohmann::json() : nlohmann::json::parse(r.substr(body + 4), nullptr, false);
    return health.is_object() && health.contains("heavy_work") && health["heavy_work"]["running"].get<int>() >= 1;
  };
  bool started = false;
  for (int k = 0; k < 6000 && !started; ++k)  // polled, at most a minute
    if (!(started = probe_running())) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(started) << "the probe's work never started";
  kill(child.pid, SIGTERM);
  int status = 0;
  waitpid(child.pid, &status, 0);
  asker.join();
  std::string rest;
  for (char buffer[256]; std::fgets(buffer, sizeof buffer, child.out);)
    rest += buffer;
  std::fclose(child.out);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_CONTAINS(rest, "attnlab lab: stopped");
  // The signal came while the probe ran: it is refused, never answered with results.
  if (!reply.empty()) {
    EXPECT_EQ(reply.rfind("HTTP/1.1 503", 0), 0u) << reply.substr(0, 300);
    EXPECT_CONTAINS(reply, "the server is shutting down");
  }
  EXPECT_EQ(reply.find("\"tokens\""), std::string::npos) << "the probe's results came back";
}

TEST(CliBadInput, ServeRefusesHeavySlotsOutsideOneTo1024) {
  for (const char* slots : {"0", "1025", "-1", "two"})
    expect_refused(std::string("serve --port 0 --heavy-slots ") + slots, "--heavy-slots");
}

TEST(CliBadInput, ServeRefusesAnAllowHostThatIsNotAHostName) {
  for (const char* name : {"http://lab.example", "lab.example:8080", "lab.example/x", "''"})
    expect_refused(std::string("serve --port 0 --allow-host ") + name, "--allow-host: ");
}
