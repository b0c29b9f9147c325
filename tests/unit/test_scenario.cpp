// Scenario loading: every bundled file is valid, overrides apply, random heads are
// reproducible, and each kind of bad input is refused with a message naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "compare.hpp"

using namespace attnlab;
using nlohmann::json;

namespace {

// A bundled scenario's file text.
std::string load_scenario_text(std::string_view name) {
  for (const auto& b : bundled_scenarios())
    if (b.name == name) return std::string(b.text);
  return {};
}

json three_tokens() { return json::parse(load_scenario_text("three-tokens")); }

// The InputError message parsing `doc` raises, or "" when it parses.
std::string error_of(const json& doc) {
  try {
    scenario_from_json(doc);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string error_of_text(std::string_view text) {
  try {
    parse_scenario(text, "my.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Bundled, TheSixScenariosOfTheIssueAreBundledAndValidDefaultFirst) {
  const auto all = bundled_scenarios();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().name, "three-tokens");
  for (const char* name :
       {"three-tokens", "softmax-row", "previous-token", "random-head", "multi-head", "cross-attention"}) {
    SCOPED_TRACE(name);
    const Scenario s = load_scenario(name);
    EXPECT_EQ(s.name, name) << "the file's name field matches its file name";
    EXPECT_FALSE(s.description.empty());
  }
}

TEST(Bundled, PreviousTokenHeadPeaksOnThePreviousTokenForEveryQuery) {
  const Trace t = run_scenario(load_scenario("previous-token"));
  const HeadTrace& h = t.heads[0];
  for (std::size_t i = 1; i < t.tokens.size(); ++i) {
    const auto row = h.weights.row(i);
    const std::size_t top = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(top, i - 1) << "query " << i;
    EXPECT_GT(row[i - 1], 0.9) << "near one-hot";
  }
}

TEST(Bundled, MultiHeadHasThreeDistinctPatterns) {
  const Trace t = run_scenario(load_scenario("multi-head"));
  ASSERT_GE(t.heads.size(), 3u);
  for (std::size_t i = 1; i < t.tokens.size(); ++i) {
    const auto argmax = [&](std::size_t h) {
      const auto row = t.heads[h].weights.row(i);
      return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
    };
    EXPECT_EQ(argmax(0), i - 1) << "previous token";
    EXPECT_EQ(argmax(1), i) << "same token";
    EXPECT_EQ(argmax(2), 0u) << "first token";
  }
}

TEST(Bundled, CrossAttentionAlignsEachWordWithItsTranslation) {
  const Trace t = run_scenario(load_scenario("cross-attention"));
  ASSERT_NE(t.tokens.size(), t.source_tokens.size());
  const std::vector<std::size_t> translation{0, 2, 1};  // le->the, chat->cat, noir->black
  for (std::size_t i = 0; i < t.tokens.size(); ++i) {
    const auto row = t.heads[0].weights.row(i);
    EXPECT_EQ(static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin()), translation[i]);
  }
}

TEST(RandomHeads, SameSeedSameWeightsOnEveryLoadAndDifferentSeedsDiffer) {
  json doc = three_tokens();
  doc["heads"] = json::array({{{"random", 7}}, {{"random", 7}}, {{"random", 8}, {"d_k", 3}, {"d_v", 1}}});
  const Scenario a = scenario_from_json(doc), b = scenario_from_json(doc);
  EXPECT_EQ(a.heads[0].w_q, b.heads[0].w_q);
  EXPECT_EQ(a.heads[0].w_v, a.heads[1].w_v);
  EXPECT_NE(a.heads[0].w_q(0, 0), a.heads[2].w_q(0, 0)) << "seed 8 draws other numbers than seed 7";
  EXPECT_EQ(a.heads[2].w_q.cols, 3u);
  EXPECT_EQ(a.heads[2].w_v.cols, 1u);
  EXPECT_EQ(a.heads[0].random_seed, 7u);
}

TEST(RandomHeads, FirstEntryFollowsTheDocumentedRecipe) {
  json doc = three_tokens();
  doc["heads"] = json::array({{{"random", 0}}});
  const Scenario s = scenario_from_json(doc);
  SplitMix64 rng(0);
  EXPECT_EQ(s.heads[0].w_q(0, 0), rng.normal() / std::sqrt(2.0));
}

TEST(Overrides, FlagsReplaceTheFileAndAreValidated) {
  Scenario s = load_scenario("three-tokens");
  apply_overrides(s, {.causal = true, .temperature = 0.5, .window = 2, .mask_tokens = {1}, .query = 0});
  EXPECT_TRUE(s.mask.causal);
  EXPECT_EQ(s.temperature, 0.5);
  EXPECT_EQ(s.mask.window, 2u);
  EXPECT_EQ(s.mask.hidden_keys, std::vector<std::size_t>{1});
  apply_overrides(s, {.window = 0});
  EXPECT_FALSE(s.mask.window) << "window 0 removes the window";
  EXPECT_THROW(apply_overrides(s, {.temperature = 0.0}), InputError);
  EXPECT_THROW(apply_overrides(s, {.mask_tokens = {3}}), InputError);
}

TEST(Permutation, WithoutPositionsOutputsOnlyMoveRows) {
  const Scenario s = load_scenario("three-tokens");
  const std::vector<std::size_t> order{2, 0, 1};
  const Trace before = run_scenario(s), after = run_scenario(permute_tokens(s, order));
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(after.tokens[k], before.tokens[order[k]]);
    for (std::size_t c = 0; c < 2; ++c)
      EXPECT_NEAR(after.output(k, c), before.output(order[k], c), 1e-12);
  }
}

TEST(Permutation, WithEachPositionKindOutputsChange) {
  for (const char* kind : {"sinusoidal", "rope"}) {
    json doc = three_tokens();
    doc["positions"] = kind;
    const Scenario s = scenario_from_json(doc);
    const std::vector<std::size_t> order{2, 0, 1};
    const Trace before = run_scenario(s), after = run_scenario(permute_tokens(s, order));
    double largest = 0;
    for (std::size_t k = 0; k < 3; ++k)
      for (std::size_t c = 0; c < 2; ++c)
        largest = std::max(largest, std::abs(after.output(k, c) - before.output(order[k], c)));
    EXPECT_GT(largest, 1e-3) << kind;
  }
  const Scenario prev = load_scenario("previous-token");  // sincos-pair
  std::vector<std::size_t> order(prev.n());
  for (std::size_t k = 0; k < order.size(); ++k)
    order[k] = order.size() - 1 - k;
  const Trace before = run_scenario(prev), after = run_scenario(permute_tokens(prev, order));
  EXPECT_GT(std::abs(after.output(0, 0) - before.output(order[0], 0)), 1e-3);
}

TEST(Permutation, ParsingRefusesWhatIsNotAPermutation) {
  EXPECT_EQ(parse_permutation("2,0,1", 3), (std::vector<std::size_t>{2, 0, 1}));
  for (const char* bad : {"2,0", "0,0,1", "0,1,3", "a,b,c", "-1,0,1", "0,1,2,3", ""})
    EXPECT_THROW(parse_permutation(bad, 3), InputError) << bad;
}

// ---- bad input: one message naming the field ----------------------------------------

TEST(BadInput, MalformedJsonNamesLineAndColumn) {
  const std::string message = error_of_text("{\n  \"format\": \"attnlab-scenario/1\",\n  \"tokens\": [\"a\" \"b\"]\n}");
  EXPECT_ERROR_CONTAINS(message, "my.json: malformed JSON at line 3");
}

TEST(BadInput, NaNIsNotJsonAndInfinityIsRefusedAsNotFinite) {
  EXPECT_ERROR_CONTAINS(error_of_text(R"({"embeddings": [[NaN]]})"), "malformed JSON");
  json doc = three_tokens();
  const std::string text = doc.dump();
  std::string huge = text;
  huge.replace(huge.find("[[1,0]"), 6, "[[1e999,0]");
  EXPECT_ERROR_CONTAINS(error_of_text(huge), "number overflow parsing '1e999'; every number must be finite");
}

TEST(BadInput, RaggedMatrix) {
  json doc = three_tokens();
  doc["embeddings"] = json::parse("[[1, 0], [0], [1, 1]]");
  EXPECT_ERROR_CONTAINS(error_of(doc), "embeddings[1]: ragged matrix: this row has 1 numbers but row 0 has 2");
}

TEST(BadInput, ShapesThatDoNotChainNameTheHeadAndMatrix) {
  json doc = three_tokens();
  doc["heads"].push_back(
      {{"w_q", json::parse("[[1],[1]]")}, {"w_k", json::parse("[[1],[1],[1]]")}, {"w_v", json::parse("[[1],[1]]")}});
  EXPECT_ERROR_CONTAINS(error_of(doc), "heads[1].w_k: expected 2 rows (d_in = d_model) but got 3");
  doc["heads"][1]["w_k"] = json::parse("[[1, 2],[1, 2]]");
  EXPECT_ERROR_CONTAINS(error_of(doc), "heads[1].w_k: expected 1 columns (d_k, as in w_q) but got 2");
  doc = three_tokens();
  doc["positions"] = {{"kind", "sincos-pair"}, {"omega", 0.5}};
  EXPECT_ERROR_CONTAINS(error_of(doc),
                        "heads[0].w_q: expected 4 rows (d_in = d_model 2 + 2 for the sincos-pair positions) but got 2");
  doc = three_tokens();
  doc["embeddings"] = json::parse("[[1, 0], [0, 1]]");
  EXPECT_ERROR_CONTAINS(error_of(doc), "embeddings: expected 3 rows (one per token) but got 2");
  doc = three_tokens();
  doc["w_o"] = json::parse("[[1], [1], [1]]");
  EXPECT_ERROR_CONTAINS(error_of(doc), "w_o: expected 2 rows (Σ d_v over the heads) but got 3");
}

TEST(BadInput, EmptyTokensTooManyTokensAndTooWide) {
  json doc = three_tokens();
  doc["tokens"] = json::array();
  EXPECT_ERROR_CONTAINS(error_of(doc), "tokens: the token list is empty");
  doc["tokens"] = std::vector<std::string>(4097, "w");
  EXPECT_ERROR_CONTAINS(error_of(doc), "tokens: 4097 tokens is more than the limit of 4096");
  doc = three_tokens();
  doc["embeddings"] = json::array({std::vector<double>(4097, 0.0)});
  EXPECT_ERROR_CONTAINS(error_of(doc), "embeddings[0]: width 4097 is more than the limit of 4096");
}

TEST(BadInput, TemperatureMustBePositiveAndFinite) {
  for (double t : {0.0, -1.0}) {
    json doc = three_tokens();
    doc["temperature"] = t;
    EXPECT_ERROR_CONTAINS(error_of(doc), "temperature: must be a finite number > 0");
  }
  json doc = three_tokens();
  doc["temperature"] = "hot";
  EXPECT_ERROR_CONTAINS(error_of(doc), "temperature: expected a number but got a string");
}

TEST(BadInput, UnknownScenarioListsTheBundledOnes) {
  try {
    load_scenario("three-tokenz");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_ERROR_CONTAINS(std::string(e.what()),
                          "unknown scenario \"three-tokenz\"; the bundled ones are: three-tokens");
  }
  EXPECT_THROW(load_scenario("/no/such/file.json"), InputError);
}

TEST(BadInput, UnknownFieldsAndWrongFormatAreRefused) {
  json doc = three_tokens();
  doc["temprature"] = 2;
  EXPECT_ERROR_CONTAINS(error_of(doc), "temprature: unknown field");
  doc = three_tokens();
  doc["format"] = "attnlab-scenario/9";
  EXPECT_ERROR_CONTAINS(error_of(doc), "format: \"attnlab-scenario/9\" is not a format this attnlab reads");
  doc = three_tokens();
  doc["heads"][0]["w_x"] = 1;
  EXPECT_ERROR_CONTAINS(error_of(doc), "heads[0].w_x: unknown field");
}

TEST(BadInput, CausalCrossAttentionWithDifferentLengthsIsRefused) {
  json doc = json::parse(load_scenario_text("cross-attention"));
  doc["causal"] = true;
  EXPECT_ERROR_CONTAINS(
      error_of(doc),
      "causal: a causal mask needs as many queries as keys, but there are 3 queries and 4 source tokens");
}

TEST(BadInput, IndicesOutOfRangeAndOddRopeWidth) {
  json doc = three_tokens();
  doc["mask_tokens"] = {5};
  EXPECT_ERROR_CONTAINS(error_of(doc), "mask_tokens[0]: token 5 does not exist; key indices run from 0 to 2");
  doc = three_tokens();
  doc["query"] = 3;
  EXPECT_ERROR_CONTAINS(error_of(doc), "query: token 3 does not exist");
  doc = three_tokens();
  doc["heads"][0] = {{"random", 1}, {"d_k", 3}};
  doc["positions"] = "rope";
  EXPECT_ERROR_CONTAINS(error_of(doc), "d_k must be even");
  doc = three_tokens();
  doc["window"] = 0;
  EXPECT_ERROR_CONTAINS(error_of(doc), "window: must be at least 1");
}

TEST(BadInput, TooManyScoreCellsIsRefusedUpFront) {
  json doc = three_tokens();
  doc["tokens"] = std::vector<std::string>(4096, "w");
  doc["embeddings"] = std::vector<std::vector<double>>(4096, {1.0, 0.0});
  doc["heads"] = json::array();
  for (int h = 0; h < 3; ++h)
    doc["heads"].push_back({{"random", h}});
  EXPECT_ERROR_CONTAINS(error_of(doc), "heads: 3 heads × 4096 × 4096 tokens is");
}

TEST(Scenario, HeadBiasesAreReadCheckedAndWrittenBack) {
  json doc = three_tokens();
  doc["heads"][0]["b_q"] = {0.5, -1};
  doc["heads"][0]["b_v"] = {1, 2};
  const Scenario s = scenario_from_json(doc);
  EXPECT_EQ(s.heads[0].b_q, (std::vector<double>{0.5, -1}));
  EXPECT_TRUE(s.heads[0].b_k.empty());
  EXPECT_EQ(attention_input(s).heads[0].b_v, (std::vector<double>{1, 2}));
  const json written = scenario_to_json(s);
  EXPECT_EQ(written["heads"][0]["b_q"], json({0.5, -1}));
  EXPECT_FALSE(written["heads"][0].contains("b_k")) << "no bias, no field";
  EXPECT_EQ(scenario_from_json(written).heads[0].b_v, s.heads[0].b_v) << "round trip";
  doc["heads"][0]["b_k"] = {1, 2, 3};
  EXPECT_ERROR_CONTAINS(error_of(doc), "heads[0].b_k: expected 2 numbers (the width of w_k) but got 3");
}
