// Interventions: head ablations and scales inside the engine, knock-outs, token
// replacements, permutations, how they combine, the before/after report, the scenario
// fields that carry them, and every bad request refused with a message naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "attnlab/core/error.hpp"
#include "attnlab/report/explain.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/scenario/interventions.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "compare.hpp"
#include "random_scenario.hpp"

using namespace attnlab;
using attnlab::test::all_close;
using attnlab::test::error_of_call;
using attnlab::test::random_scenario;
using attnlab::test::RandomScenarioShape;

namespace {

std::string error_of(const Scenario& s, const Interventions& iv) {
  return error_of_call([&] { (void)apply_interventions(s, iv); });
}

Matrix column_means(const Matrix& m) {
  Matrix out(m.rows, m.cols);
  for (std::size_t c = 0; c < m.cols; ++c) {
    double mean = 0;
    for (std::size_t r = 0; r < m.rows; ++r)
      mean += m(r, c) / static_cast<double>(m.rows);
    for (std::size_t r = 0; r < m.rows; ++r)
      out(r, c) = mean;
  }
  return out;
}

Interventions ablate_all(const Scenario& s, HeadAblation kind) {
  Interventions iv;
  for (std::size_t h = 0; h < s.heads.size(); ++h)
    iv.ablate.push_back({h, kind});
  return iv;
}

}  // namespace

TEST(HeadAblation, ZeroingEveryHeadGivesTheZeroOutput) {
  const Scenario s = random_scenario(11, {});
  const InterventionResult r = intervene(s, ablate_all(s, HeadAblation::zero));
  EXPECT_TRUE(all_close(r.after.output, Matrix(s.n(), s.d_out()), {0, 0}));
  for (const HeadTrace& h : r.after.heads) {
    EXPECT_EQ(h.ablation, HeadAblation::zero);
    EXPECT_TRUE(all_close(h.mixed, r.before.heads[&h - &r.after.heads[0]].output))
        << "the mix is still computed and shown";
  }
  for (std::size_t i = 0; i < s.n(); ++i) {
    double norm = 0;
    for (double x : r.output_before.row(i))
      norm += x * x;
    EXPECT_NEAR(r.delta_norm[i], std::sqrt(norm), 1e-12) << "the whole output went";
  }
}

TEST(HeadAblation, MeanAblatingEveryHeadGivesEveryTokenTheMeanOutput) {
  for (const bool causal : {false, true}) {
    RandomScenarioShape shape;
    shape.causal = causal;
    const Scenario s = random_scenario(12, shape);
    const InterventionResult r = intervene(s, ablate_all(s, HeadAblation::mean));
    // The output is linear in the concatenated heads, so the mean passes through W_O.
    EXPECT_TRUE(all_close(r.after.output, column_means(r.before.output), {1e-12, 1e-12}));
  }
}

TEST(HeadAblation, UniformGivesOneOverTheVisibleCountAndKeepsTheSoftmaxInTheTrace) {
  RandomScenarioShape shape;
  shape.causal = true;
  const Scenario s = random_scenario(13, shape);
  Interventions iv;
  iv.ablate.push_back({1, HeadAblation::uniform});
  const InterventionResult r = intervene(s, iv);
  const HeadTrace& h = r.after.heads[1];
  for (std::size_t i = 0; i < s.n(); ++i)
    for (std::size_t j = 0; j < s.n(); ++j)
      EXPECT_EQ(h.weights(i, j), j <= i ? 1.0 / static_cast<double>(i + 1) : 0.0);
  EXPECT_EQ(h.exponentials, r.before.heads[1].exponentials) << "the softmax the ablation replaced is still shown";
  EXPECT_TRUE(all_close(h.output, matmul(h.weights, h.values)));
  EXPECT_EQ(r.after.heads[0].output, r.before.heads[0].output) << "other heads are untouched";
}

TEST(HeadScaling, MultipliesTheHeadOutputAndZeroEqualsTheZeroAblation) {
  const Scenario s = random_scenario(14, {});
  Interventions scale;
  scale.scale.push_back({2, 0.5});
  const InterventionResult r = intervene(s, scale);
  Matrix half = r.before.heads[2].output;
  for (double& x : half.data)
    x *= 0.5;
  EXPECT_TRUE(all_close(r.after.heads[2].output, half));
  EXPECT_EQ(r.after.heads[2].scale, 0.5);

  Interventions zero_scale, zero_ablate;
  zero_scale.scale.push_back({0, 0.0});
  zero_ablate.ablate.push_back({0, HeadAblation::zero});
  EXPECT_TRUE(all_close(intervene(s, zero_scale).after.output, intervene(s, zero_ablate).after.output, {1e-15, 0}));

  // Ablation and scale on one head combine: scale · mean.
  Interventions both = scale;
  both.ablate.push_back({2, HeadAblation::mean});
  Matrix expected = column_means(r.before.heads[2].output);
  for (double& x : expected.data)
    x *= 0.5;
  EXPECT_TRUE(all_close(intervene(s, both).after.heads[2].output, expected, {1e-12, 1e-12}));
}

TEST(KnockOut, TheRemainingWeightsRenormalise) {
  const Scenario s = load_scenario("three-tokens");
  Interventions iv;
  iv.knock_out.push_back({2});
  const InterventionResult r = intervene(s, iv);
  const Matrix& before = r.before.heads[0].weights;
  const Matrix& after = r.after.heads[0].weights;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(after(i, 2), 0.0);
    for (std::size_t j = 0; j < 2; ++j)
      EXPECT_NEAR(after(i, j), before(i, j) / (1.0 - before(i, 2)), 1e-15);
  }
  EXPECT_EQ(r.applied, std::vector<std::string>{"knock out key 2 \"t3\""});
}

TEST(KnockOut, AKeyWithWeightExactlyZeroChangesNothingForThatQuery) {
  RandomScenarioShape shape;
  shape.causal = true;
  const Scenario s = random_scenario(15, shape);
  Interventions iv;
  iv.knock_out.push_back({4});  // query 2 cannot see key 4 under the causal mask
  const InterventionResult r = intervene(s, iv);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.before.heads[0].weights(i, 4), 0.0);
    EXPECT_EQ(r.delta_norm[i], 0.0) << "query " << i << " gave key 4 weight 0: bit for bit the same output";
  }
  EXPECT_GT(r.delta_norm[4], 0.0);
}

TEST(ReplaceToken, AKnownWordTakesItsEmbeddingAnUnknownOneTheWordTable) {
  const Scenario s = load_scenario("previous-token");
  Interventions iv;
  iv.replace.push_back(parse_replace_token("4:dog", "--replace-token 4:dog"));
  iv.replace.push_back(parse_replace_token("5:zebra", "--replace-token 5:zebra"));
  const Scenario after = apply_interventions(s, iv);
  EXPECT_EQ(after.tokens[4], "dog");
  EXPECT_EQ(after.tokens[5], "zebra");
  EXPECT_TRUE(std::equal(after.embeddings.row(4).begin(), after.embeddings.row(4).end(), s.embeddings.row(8).begin()));
  const std::vector<double> zebra = word_embedding(s, "zebra");
  EXPECT_TRUE(std::equal(zebra.begin(), zebra.end(), after.embeddings.row(5).begin()));
  EXPECT_EQ(after.embeddings(5, 0), 1.0) << "the word table keeps the scenario's constant first coordinate";
  EXPECT_EQ(after.tokens[3], s.tokens[3]);

  const InterventionResult r = intervene(s, iv);
  EXPECT_EQ(r.delta_norm[0], 0.0) << "the previous-token head at query 0 does not read tokens 4 and 5";
  EXPECT_GT(r.delta_norm[5], 0.1) << "query 5 reads token 4, now dog";
}

TEST(ReplaceToken, ANewEmbeddingKeepsTheNameAndMovesTheOutput) {
  const Scenario s = load_scenario("three-tokens");
  Interventions iv;
  iv.replace.push_back(parse_replace_embedding("2:0,1", "--replace-embedding 2:0,1"));
  const InterventionResult r = intervene(s, iv);
  EXPECT_EQ(r.after_scenario.tokens[2], "t3");
  EXPECT_EQ(r.after_scenario.embeddings(2, 0), 0.0);
  EXPECT_EQ(r.after_scenario.embeddings(2, 1), 1.0);
  // t3 now equals t2, so query t3's output is query t2's.
  EXPECT_TRUE(all_close(std::vector<double>(r.after.output.row(2).begin(), r.after.output.row(2).end()),
                        std::vector<double>(r.after.output.row(1).begin(), r.after.output.row(1).end())));
}

TEST(Interventions, CombineAndAPermutedTokenIsComparedWithItself) {
  const Scenario s = load_scenario("three-tokens");
  Interventions permute_only;
  permute_only.permute = std::vector<std::size_t>{2, 0, 1};
  const InterventionResult moved = intervene(s, permute_only);
  EXPECT_EQ(moved.after_row, (std::vector<std::size_t>{1, 2, 0}));
  for (double d : moved.delta_norm)
    EXPECT_NEAR(d, 0.0, 1e-15) << "no positions: each output only moved row";

  // Knock out t2, scale the head, then permute: the same as doing each by hand in order.
  Interventions iv = permute_only;
  iv.knock_out.push_back({1});
  iv.scale.push_back({0, 2.0});
  const InterventionResult r = intervene(s, iv);
  Scenario by_hand = s;
  by_hand.mask.hidden_keys = {1};
  by_hand.heads[0].scale = 2.0;
  by_hand = permute_tokens(by_hand, *iv.permute);
  EXPECT_EQ(r.after.output, run_scenario(by_hand).output);
  EXPECT_EQ(r.applied.size(), 3u);
  EXPECT_EQ(r.after_scenario.mask.hidden_keys, std::vector<std::size_t>{2}) << "t2 is now row 2";
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t c = 0; c < 2; ++c)
      EXPECT_DOUBLE_EQ(r.delta(i, c), r.after.output(r.after_row[i], c) - r.before.output(i, c));
}

TEST(Interventions, TheReportShowsBeforeAfterAndTheChange) {
  Interventions iv;
  iv.knock_out.push_back({1});
  const InterventionResult r = intervene(load_scenario("three-tokens"), iv);
  const std::string text = format_intervention(r, 2);
  EXPECT_NE(text.find("knock out key 1 \"t2\""), std::string::npos) << text;
  EXPECT_NE(text.find("0.69 0.93"), std::string::npos)
      << text;  // the worked example's output before (docs/worked-example.md)
  const nlohmann::json j = intervention_to_json(r);
  for (const char* key : {"applied", "tokens", "after_row", "before", "after", "delta", "delta_norm"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["delta_norm"].size(), 3u);
}

TEST(InterventionErrors, EachBadRequestNamesItsOriginAndTheFix) {
  const Scenario s = load_scenario("three-tokens");
  const auto with = [&](auto setup) {
    Interventions iv;
    setup(iv);
    return error_of(s, iv);
  };
  EXPECT_ERROR_CONTAINS(with([](Interventions& iv) {
                          iv.ablate.push_back({3, HeadAblation::zero, "--ablate-head 3"});
                        }),
                        "--ablate-head 3: head 3 does not exist; three-tokens has heads 0 to 0");
  EXPECT_ERROR_CONTAINS(with([](Interventions& iv) {
                          iv.ablate.push_back({0, HeadAblation::zero, "a"});
                          iv.ablate.push_back({0, HeadAblation::mean, "b"});
                        }),
                        "b: head 0 is ablated twice");
  EXPECT_ERROR_CONTAINS(with([](Interventions& iv) {
                          iv.scale.push_back({1, 2.0, "--scale-head 1:2"});
                        }),
                        "--scale-head 1:2: head 1 does not exist");
  EXPECT_ERROR_CONTAINS(with([](Interventions& iv) {
                          iv.knock_out.push_back({7, "--mask-token 7"});
                        }),
                        "--mask-token 7: token 7 does not exist; key indices run from 0 to 2");
  EXPECT_ERROR_CONTAINS(with([](Interventions& iv) { iv.replace.push_back(parse_replace_token("5:dog", "r")); }),
                        "r: token 5 does not exist; token indices run from 0 to 2");
  EXPECT_ERROR_CONTAINS(with([](Interventions& iv) { iv.replace.push_back(parse_replace_embedding("0:1,2,3", "e")); }),
                        "e: the embedding has 3 numbers but d_model is 2");

  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_ablate_head("0:half", "--ablate-head 0:half"); }),
                        "--ablate-head 0:half: unknown ablation \"half\"; use zero");
  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_ablate_head("x", "--ablate-head x"); }), "\"x\" is not a head");
  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_scale_head("1", "--scale-head 1"); }), "\"1\" is not H:F; write");
  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_scale_head("1:big", "s"); }), "\"big\" is not a finite number");
  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_scale_head("1:nan", "s"); }), "\"nan\" is not a finite number");
  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_replace_token("2", "--replace-token 2"); }), "is not J:WORD");
  EXPECT_ERROR_CONTAINS(error_of_call([] { parse_replace_embedding("1:1,x", "e"); }), "\"x\" is not a finite number");
  EXPECT_EQ(parse_ablate_head("2", "o").ablation, HeadAblation::zero) << "zero is the default";
  EXPECT_EQ(parse_ablate_head("2:uniform", "o").ablation, HeadAblation::uniform);
}

TEST(ScenarioFormat, HeadInterventionsAndTheReadoutRoundTrip) {
  Scenario s = random_scenario(16, {});
  s.heads[1].ablation = HeadAblation::mean;
  s.heads[2].scale = -0.5;
  const nlohmann::json doc = scenario_to_json(s);
  EXPECT_EQ(doc["heads"][1]["ablation"], "mean");
  EXPECT_EQ(doc["heads"][2]["scale"], -0.5);
  EXPECT_FALSE(doc["heads"][0].contains("ablation")) << "fields at their defaults are left out";
  const Scenario back = scenario_from_json(doc);
  EXPECT_EQ(back.heads[1].ablation, HeadAblation::mean);
  EXPECT_EQ(back.heads[2].scale, -0.5);
  ASSERT_TRUE(back.readout);
  EXPECT_EQ(back.readout->matrix, s.readout->matrix);
  EXPECT_EQ(back.readout->labels, s.readout->labels);
  EXPECT_EQ(run_scenario(back).output, run_scenario(s).output);
}

TEST(ScenarioFormat, BadReadoutsAndHeadInterventionsAreRefusedNamingTheField) {
  const auto error_for = [](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json doc = nlohmann::json::parse(std::string(bundled_scenarios()[0].text));  // three-tokens, d_out 2
    edit(doc);
    return error_of_call([&] { scenario_from_json(doc); });
  };
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) {
                          d["readout"] = {{"matrix", {{1, 0}, {0, 1}, {1, 1}}}};
                        }),
                        "readout.matrix: expected 2 rows (d_out: Σ d_v over the heads) but got 3");
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) {
                          d["readout"] = {{"matrix", {{1, 0}, {0, 1}}}, {"labels", {"yes"}}};
                        }),
                        "readout.labels: expected 2 labels (one per column of readout.matrix) but got 1");
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) {
                          d["readout"] = {{"matrix", {{1, 0}, {0, 1}}}, {"labels", {"a", "a"}}};
                        }),
                        "readout.labels[1]: \"a\" is also label 0");
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) {
                          d["readout"] = {{"matrix", {{1, 0}, {0, 1}}}, {"colour", 1}};
                        }),
                        "readout.colour: unknown field");
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) { d["readout"] = {{"labels", {"a"}}}; }), "readout.matrix: missing");
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) { d["heads"][0]["ablation"] = "half"; }),
                        "heads[0].ablation: unknown ablation \"half\" (known: none, zero, mean, uniform)");
  EXPECT_ERROR_CONTAINS(error_for([](auto& d) { d["heads"][0]["scale"] = "big"; }),
                        "heads[0].scale: expected a number");
  const std::string fine = error_for([](auto& d) { d["readout"] = {{"matrix", {{1, 0}, {0, 1}}}}; });
  EXPECT_EQ(fine, "") << "labels default to class 0, class 1";
}

TEST(ExplainIntervened, TheWorkedQueryShowsTheMixThenTheAblationAndScale) {
  Scenario s = load_scenario("three-tokens");
  Interventions iv;
  iv.ablate.push_back({0, HeadAblation::uniform});
  iv.scale.push_back({0, 2.0});
  const InterventionResult r = intervene(s, iv);
  const std::string text = explain(r.after_scenario, r.after, {0, std::nullopt, 2});
  EXPECT_NE(text.find("Intervention on head 0 \"worked example\": uniform ablation, output × 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("8.34 / 27.29 = 0.31"), std::string::npos) << "the softmax is still worked:\n" << text;
  EXPECT_NE(text.find("uniform weights instead: 1/3 = 0.33"), std::string::npos) << text;
  EXPECT_NE(text.find("× 2 = 1.33 1.33"), std::string::npos) << text;  // 2 · (1/3)(0 1 + 1 0 + 1 1)
}
