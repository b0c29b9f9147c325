// The trace's JSON follows the contract of `attnlab run --json` and the API.
#include <gtest/gtest.h>

#include "attnlab/report/trace_json.hpp"
#include "attnlab/scenario/scenario.hpp"

using namespace attnlab;

TEST(TraceJson, HasEveryFieldOfTheContract) {
  const Scenario s = load_scenario("three-tokens");
  const nlohmann::json j = trace_to_json(s, run_scenario(s));
  for (const char* key : {"tokens", "source_tokens", "heads", "output"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["tokens"], j["source_tokens"]) << "self-attention";
  for (const char* key :
       {"name", "d_k", "queries", "keys", "values", "scores", "scaled", "logits", "weights", "output"})
    EXPECT_TRUE(j["heads"][0].contains(key)) << key;
  EXPECT_EQ(j["heads"][0]["scores"][2], nlohmann::json::parse("[3.0, 1.0, 4.0]"));
}

TEST(TraceJson, MaskedLogitsAreNullAndTheirWeightsExactlyZero) {
  Scenario s = load_scenario("three-tokens");
  apply_overrides(s, {.causal = true});
  const nlohmann::json j = trace_to_json(s, run_scenario(s));
  EXPECT_TRUE(j["heads"][0]["logits"][0][1].is_null());
  EXPECT_EQ(j["heads"][0]["weights"][0][1].get<double>(), 0.0);
  EXPECT_FALSE(j["heads"][0]["scaled"][0][1].is_null()) << "scores and scaled are given for every pair";
}

TEST(TraceJson, NumbersKeepFullPrecision) {
  const Scenario s = load_scenario("three-tokens");
  const Trace t = run_scenario(s);
  const nlohmann::json j = nlohmann::json::parse(trace_to_json(s, t).dump());
  EXPECT_EQ(j["heads"][0]["weights"][2][2].get<double>(), t.heads[0].weights(2, 2));
}
