// The probe: readouts, the hand-written gradient against finite differences, Kendall τ
// against textbook numbers, Jensen–Shannon divergence, the counterfactual search, the
// erasure measure, the two bundled scenarios' claims, and bad options refused.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attnlab/analysis/probe.hpp"
#include "attnlab/core/error.hpp"
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

std::vector<double> row_of(const Matrix& m, std::size_t i) { return {m.row(i).begin(), m.row(i).end()}; }

// The gradient of the readout with respect to every embedding coordinate, by hand and by
// central differences ((f(x + h) - f(x - h)) / 2h, each run through the whole engine).
void expect_gradient_matches_finite_differences(const Scenario& s, std::size_t query, const std::string& readout_text) {
  SCOPED_TRACE(fmt::format("{} ({}), query {}, readout {}", s.name, describe(s.positions), query, readout_text));
  const Trace trace = run_scenario(s);
  const Readout readout = parse_readout(readout_text, s, trace.output.row(query));
  const InputGradient g = output_gradient(s, trace, query, readout.gradient(trace.output.row(query)));
  const auto value_of = [&](const Scenario& changed) { return readout.value(run_scenario(changed).output.row(query)); };
  constexpr double h = 1e-6;
  std::vector<double> analytic, numeric;
  // The embeddings are the first d_model coordinates of the vectors the heads read (the
  // sinusoids are added; the sincos pair is appended), so ∂/∂embedding = ∂/∂x there.
  for (std::size_t i = 0; i < s.n(); ++i)
    for (std::size_t c = 0; c < s.d_model(); ++c) {
      Scenario plus = s, minus = s;
      plus.embeddings(i, c) += h;
      minus.embeddings(i, c) -= h;
      numeric.push_back((value_of(plus) - value_of(minus)) / (2 * h));
      analytic.push_back(g.queries(i, c) + (s.source ? 0.0 : g.keys(i, c)));
    }
  if (s.source)
    for (std::size_t j = 0; j < s.m(); ++j)
      for (std::size_t c = 0; c < s.d_model(); ++c) {
        Scenario plus = s, minus = s;
        plus.source->embeddings(j, c) += h;
        minus.source->embeddings(j, c) -= h;
        numeric.push_back((value_of(plus) - value_of(minus)) / (2 * h));
        analytic.push_back(g.keys(j, c));
      }
  EXPECT_TRUE(all_close(analytic, numeric, {1e-7, 1e-6}));
  double largest = 0;
  for (double x : analytic)
    largest = std::max(largest, std::abs(x));
  EXPECT_GT(largest, 1e-3) << "a test of a gradient that is zero everywhere proves little";
}

// The layer output of `query` with head `head`'s row replaced, computed the long way:
// mix the values with the row, apply the head's ablation and scale, concatenate, W_O.
std::vector<double> output_by_hand(const Scenario& s, const Trace& t, std::size_t query, std::size_t head,
                                   const std::vector<double>& weights) {
  std::vector<double> concat = row_of(t.concatenated, query);
  const HeadTrace& h = t.heads[head];
  std::size_t offset = 0;
  for (std::size_t k = 0; k < head; ++k)
    offset += t.heads[k].d_v;
  for (std::size_t c = 0; c < h.d_v; ++c) {
    double mixed = 0;
    for (std::size_t j = 0; j < weights.size(); ++j)
      mixed += weights[j] * h.values(j, c);
    if (h.ablation == HeadAblation::zero) mixed = 0;
    if (h.ablation == HeadAblation::mean) {  // the mean over the queries, with this query's row replaced
      double sum = 0;
      for (std::size_t r = 0; r < t.tokens.size(); ++r)
        sum += r == query ? mixed : h.mixed(r, c);
      mixed = sum / static_cast<double>(t.tokens.size());
    }
    concat[offset + c] = h.scale * mixed;
  }
  if (!s.w_o) return concat;
  std::vector<double> out(s.w_o->cols, 0.0);
  for (std::size_t k = 0; k < out.size(); ++k)
    for (std::size_t c = 0; c < concat.size(); ++c)
      out[k] += concat[c] * (*s.w_o)(c, k);
  return out;
}

}  // namespace

TEST(Readout, EachKindReadsTheOutputAsDocumented) {
  const Scenario s = load_scenario("three-tokens");
  const std::vector<double> o{0.6, -0.8};
  EXPECT_EQ(parse_readout("coordinate:1", s, o).value(o), -0.8);
  EXPECT_EQ(parse_readout("coordinate:1", s, o).decision(o), "negative");
  EXPECT_DOUBLE_EQ(parse_readout("direction:1,1", s, o).value(o), -0.2);
  EXPECT_DOUBLE_EQ(parse_readout("norm", s, o).value(o), 1.0);
  EXPECT_DOUBLE_EQ(parse_readout("", s, o).value(o), 1.0) << "norm is the default without a readout matrix";
  EXPECT_FALSE(parse_readout("norm", s, o).decision(o)) << "the norm has no decision";
  const Scenario m = load_scenario("weights-mislead");
  const Readout r = parse_readout("", m, o);
  EXPECT_EQ(r.kind, Readout::Kind::class_probability) << "class is the default with a readout matrix";
  EXPECT_EQ(r.description, "p(positive)") << "the class the output predicts: 6·0.6 > 6·(-0.8)";
  EXPECT_NEAR(r.value(o), 1.0 / (1.0 + std::exp(6 * (-0.8 - 0.6))), 1e-15);
  EXPECT_EQ(parse_readout("class:negative", m, o).description, "p(negative)");
}

TEST(Readout, BadFormsAreRefusedNamingTheFix) {
  const Scenario s = load_scenario("three-tokens");
  const std::vector<double> o{0.6, 0.8};
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_readout("class", s, o); }),
                        "readout: three-tokens has no readout matrix to give classes; add a \"readout\" field");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_readout("coordinate:2", s, o); }),
                        "coordinate 2 does not exist; the output has coordinates 0 to 1");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_readout("direction:1", s, o); }),
                        "the direction has 1 numbers but the output has 2 coordinates");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_readout("direction:0,0", s, o); }), "all zeros");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_readout("entropy", s, o); }),
                        "unknown readout \"entropy\"; use norm, coordinate:C");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_readout("class:maybe", load_scenario("weights-agree"), o); }),
                        "unknown class \"maybe\"; the classes are: positive, negative");
}

TEST(Gradient, MatchesFiniteDifferencesOnRandomScenarios) {
  struct Case {
    std::uint64_t seed;
    RandomScenarioShape shape;
    std::string readout;
  };
  const Positions none{}, sinusoidal{PositionKind::sinusoidal}, pair{PositionKind::sincos_pair, 0.5},
      rope{PositionKind::rope};
  std::vector<Case> cases{
      {21, {.positions = none}, "class"},
      {22, {.positions = sinusoidal, .causal = true}, "norm"},
      {23, {.positions = pair, .causal = true}, "class"},
      {24, {.positions = rope}, "direction:1,-2,0.5,1"},
      {25, {.heads = 2, .positions = rope, .causal = true, .w_o = false, .classes = 0}, "coordinate:4"},
      {26, {.n = 3, .positions = rope, .m = 4}, "class"},  // cross-attention: the source's gradient too
      {27, {.n = 6, .d_model = 3, .heads = 4, .d_k = 3, .d_v = 2, .temperature = 2.5}, "norm"},
      {28, {.positions = sinusoidal, .causal = true, .biases = true}, "class"},  // a trained head's biases
  };
  for (const Case& c : cases) {
    const Scenario s = random_scenario(c.seed, c.shape);
    for (std::size_t query : {std::size_t{0}, s.n() / 2, s.n() - 1})
      expect_gradient_matches_finite_differences(s, query, c.readout);
  }
}

// A Qwen3- or Gemma-3-style head: QK-norm (q and k RMS-normed by their weights before the
// rotation), a score scale of its own, and a partial rotation (the last pair not rotated).
TEST(Gradient, MatchesFiniteDifferencesThroughQkNormAScoreScaleAndAPartialRotation) {
  Scenario s =
      random_scenario(29, {.heads = 2, .d_k = 6, .positions = {PositionKind::rope}, .causal = true, .biases = true});
  const std::size_t d_k = s.heads[0].w_q.cols;
  for (std::size_t f = 0; f + 1 < d_k / 2; ++f)
    s.positions.rope.frequencies.push_back(std::pow(100.0, -2.0 * double(f) / double(d_k)));
  for (HeadSpec& h : s.heads) {
    for (std::size_t c = 0; c < h.w_q.cols; ++c) {
      h.q_norm.push_back(1.0 + 0.3 * std::sin(double(c) + 1));
      h.k_norm.push_back(0.8 + 0.2 * std::cos(double(c)));
    }
    h.norm_epsilon = 1e-5;
  }
  s.score_scale = 0.3;
  validate(s);
  for (std::size_t query : {std::size_t{1}, s.n() - 1}) {
    expect_gradient_matches_finite_differences(s, query, "class");
    expect_gradient_matches_finite_differences(s, query, "norm");
  }
}

TEST(Gradient, MatchesFiniteDifferencesThroughEveryHeadIntervention) {
  RandomScenarioShape shape;
  shape.heads = 4;
  shape.causal = true;
  shape.positions = {PositionKind::sincos_pair, 0.7};
  const Scenario base = random_scenario(31, shape);
  Interventions iv;
  iv.ablate = {{0, HeadAblation::mean}, {1, HeadAblation::uniform}, {2, HeadAblation::zero}};
  iv.scale = {{0, -1.5}, {3, 0.25}};
  iv.knock_out = {{1}};
  const Scenario s = apply_interventions(base, iv);
  for (std::size_t query : {1u, 3u, 4u}) {
    expect_gradient_matches_finite_differences(s, query, "class");
    expect_gradient_matches_finite_differences(s, query, "norm");
  }
}

TEST(KendallTau, MatchesTextbookValues) {
  // SciPy's reference example for scipy.stats.kendalltau (τ-b, with ties):
  //   x1 = [12, 2, 1, 12, 2], x2 = [1, 4, 7, 1, 0]  ->  τ = -0.47140452079103173
  // (docs.scipy.org, scipy.stats.kendalltau, "Examples"). By hand: 2 concordant and 6
  // discordant pairs of 10; 2 pairs tied in x1, 1 in x2: (2 - 6) / √((10 - 2)(10 - 1)).
  EXPECT_NEAR(kendall_tau(std::vector<double>{12, 2, 1, 12, 2}, std::vector<double>{1, 4, 7, 1, 0}),
              -0.47140452079103173, 1e-15);
  // Kendall's τ without ties: one discordant pair of six, (5 - 1) / 6.
  EXPECT_NEAR(kendall_tau(std::vector<double>{1, 2, 3, 4}, std::vector<double>{1, 3, 2, 4}), 4.0 / 6.0, 1e-15);
  EXPECT_EQ(kendall_tau(std::vector<double>{1, 2, 3}, std::vector<double>{10, 20, 30}), 1.0);
  EXPECT_EQ(kendall_tau(std::vector<double>{1, 2, 3}, std::vector<double>{3, 2, 1}), -1.0);
  EXPECT_TRUE(std::isnan(kendall_tau(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3})))
      << "undefined, not 0";
  EXPECT_TRUE(std::isnan(kendall_tau(std::vector<double>{1}, std::vector<double>{2})));
}

TEST(JensenShannon, IsZeroForEqualOneForDisjointAndSymmetric) {
  const std::vector<double> p{0.5, 0.5, 0}, q{0, 0, 1}, r{0.2, 0.3, 0.5};
  EXPECT_EQ(jensen_shannon(p, p), 0.0);
  EXPECT_NEAR(jensen_shannon(p, q), 1.0, 1e-15);
  EXPECT_DOUBLE_EQ(jensen_shannon(p, r), jensen_shannon(r, p));
  // (1, 0) against (0.5, 0.5): ½·log2(1/0.75) + ½·(0.25·log2(0.25/0.75)... written out:
  const double expected =
      0.5 * (1.0 * std::log2(1.0 / 0.75)) + 0.5 * (0.5 * std::log2(0.5 / 0.75) + 0.5 * std::log2(0.5 / 0.25));
  EXPECT_NEAR(jensen_shannon(std::vector<double>{1, 0}, std::vector<double>{0.5, 0.5}), expected, 1e-15);
}

TEST(Counterfactual, SumsToOneKeepsTheReadoutWithinEpsilonAndFindsADivergence) {
  struct Case {
    std::uint64_t seed;
    RandomScenarioShape shape;
    std::string readout;
    std::size_t head;
  };
  std::vector<Case> cases{{41, {}, "class", 0},
                          {42, {.causal = true}, "norm", 1},
                          {43, {.positions = {PositionKind::rope}}, "direction:1,0,0,-1", 2},
                          {44, {.n = 7, .heads = 1, .w_o = false, .classes = 0}, "coordinate:1", 0}};
  for (const Case& c : cases)
    for (double epsilon : {0.001, 0.05}) {
      const Scenario s = random_scenario(c.seed, c.shape);
      const Trace t = run_scenario(s);
      const std::size_t query = s.n() - 1;
      SCOPED_TRACE(fmt::format("seed {}, readout {}, ε {}", c.seed, c.readout, epsilon));
      const Readout readout = parse_readout(c.readout, s, t.output.row(query));
      const Counterfactual cf = counterfactual(s, t, query, c.head, readout, epsilon);
      EXPECT_NEAR(std::accumulate(cf.found.begin(), cf.found.end(), 0.0), 1.0, 1e-12);
      for (double w : cf.found)
        EXPECT_GE(w, 0.0);
      for (std::size_t j = 0; j < cf.found.size(); ++j) {
        if (!std::isfinite(t.heads[c.head].logits(query, j))) {
          EXPECT_EQ(cf.found[j], 0.0) << "a hidden key stays hidden";
        }
      }
      // The readout, recomputed the long way from the row found, stays within ε.
      const std::vector<double> o = output_by_hand(s, t, query, c.head, cf.found);
      EXPECT_TRUE(all_close(cf.output_after, o, {1e-12, 1e-12}));
      EXPECT_LE(std::abs(readout.value(o) - readout.value(t.output.row(query))), epsilon * (1 + 1e-9));
      EXPECT_GT(cf.divergence, 0.0) << "with ε > 0 and several keys, a different row always exists";
      EXPECT_NEAR(cf.divergence, jensen_shannon(cf.found, cf.original), 1e-15);
      EXPECT_EQ(cf.exact, readout.linear());
    }
}

TEST(Counterfactual, ForALinearReadoutNoRowOnAFineGridDoesBetter) {
  const Scenario s = load_scenario("three-tokens");
  const Trace t = run_scenario(s);
  const Readout readout = parse_readout("coordinate:0", s, t.output.row(2));
  const double epsilon = 0.05, r0 = readout.value(t.output.row(2));
  const Counterfactual cf = counterfactual(s, t, 2, 0, readout, epsilon);
  ASSERT_TRUE(cf.exact);
  double best = 0;
  constexpr int steps = 400;
  for (int a = 0; a <= steps; ++a)
    for (int b = 0; a + b <= steps; ++b) {
      const std::vector<double> row{a / double(steps), b / double(steps), (steps - a - b) / double(steps)};
      if (std::abs(readout.value(output_with_weights(s, t, 2, 0, row)) - r0) <= epsilon)
        best = std::max(best, jensen_shannon(row, cf.original));
    }
  EXPECT_GE(cf.divergence, best - 1e-12) << "the edge search is exact for a linear readout";
  EXPECT_GT(cf.divergence, 0.1);
}

TEST(Counterfactual, WithOneVisibleKeyThereIsNoOtherRow) {
  RandomScenarioShape shape;
  shape.causal = true;
  const Scenario s = random_scenario(45, shape);
  const Trace t = run_scenario(s);
  const Readout readout = parse_readout("norm", s, t.output.row(0));
  const Counterfactual cf = counterfactual(s, t, 0, 0, readout, 0.5);
  EXPECT_EQ(cf.divergence, 0.0);
  EXPECT_EQ(cf.found, cf.original);
  EXPECT_NE(cf.note.find("only one key is visible"), std::string::npos) << cf.note;
}

TEST(Counterfactual, AZeroAblatedHeadsWeightsCanBeAnythingAtAll) {
  Scenario s = load_scenario("multi-head");
  s.heads[0].ablation = HeadAblation::zero;
  const Trace t = run_scenario(s);
  const Readout readout = parse_readout("norm", s, t.output.row(4));
  const Counterfactual cf = counterfactual(s, t, 4, 0, readout, 0.0);
  EXPECT_EQ(cf.readout_after, cf.readout_before);
  EXPECT_GT(cf.divergence, 0.9) << "the row that owes least to the original, at no cost";
}

TEST(Probe, ErasingAKeyWithWeightExactlyZeroChangesNothing) {
  RandomScenarioShape shape;
  shape.causal = true;
  const Scenario s = random_scenario(51, shape);
  ProbeOptions options;
  options.query = 2;
  const ProbeResult r = probe(s, options);
  for (std::size_t j : {3u, 4u}) {
    const TokenMeasures& t = r.tokens[j];
    EXPECT_FALSE(t.visible);
    EXPECT_EQ(t.weight, 0.0);
    EXPECT_EQ(t.erasure, 0.0) << "bit for bit the same readout";
    EXPECT_FALSE(t.flips);
    EXPECT_EQ(t.grad_x_input, 0.0);
  }
  for (std::size_t j : {0u, 1u, 2u})
    EXPECT_NE(r.tokens[j].erasure, 0.0);
}

TEST(Probe, MeasuresOnSeed000AreTheDocumentedFormulas) {
  const Scenario s = load_scenario("three-tokens");
  ProbeOptions options;
  options.readout = "coordinate:0";
  const ProbeResult r = probe(s, options);
  EXPECT_EQ(r.query, 2u) << "the last query by default";
  EXPECT_NEAR(r.readout_value, 0.6943, 5e-5);  // the worked example's output 0.69 0.93
  EXPECT_NEAR(r.tokens[2].value_weighted, 0.6200 * std::sqrt(2.0), 5e-5) << "a·‖v‖ with v_t3 = (1, 1)";
  // Knocking out t1 leaves t2 and t3 with weights 0.0743 and 0.62 renormalised; the first
  // coordinate of the mix is then (0.0743·1 + 0.62·1) / 0.6943.
  EXPECT_NEAR(r.tokens[0].readout_without, 1.0, 1e-12);
  EXPECT_NEAR(r.tokens[0].erasure, 1.0 - r.readout_value, 1e-15);
  const Trace t = run_scenario(s);
  const Readout readout = parse_readout("coordinate:0", s, t.output.row(2));
  const InputGradient g = output_gradient(s, t, 2, readout.gradient(t.output.row(2)));
  for (std::size_t j = 0; j < 3; ++j)
    EXPECT_NEAR(
        r.tokens[j].grad_x_input,
        (g.queries(j, 0) + g.keys(j, 0)) * s.embeddings(j, 0) + (g.queries(j, 1) + g.keys(j, 1)) * s.embeddings(j, 1),
        1e-15);
}

TEST(Probe, AblatingEveryHeadLeavesNothingToAttribute) {
  Scenario s = load_scenario("multi-head");
  for (HeadSpec& h : s.heads)
    h.ablation = HeadAblation::zero;
  const ProbeResult r = probe(s, {.readout = "norm"});
  for (const TokenMeasures& t : r.tokens) {
    EXPECT_EQ(t.erasure, 0.0);
    EXPECT_EQ(t.grad_x_input, 0.0);
  }
  EXPECT_EQ(r.readout_value, 0.0);
}

TEST(BundledProbe, WeightsMisleadTheLargestWeightIsNotWhatTheDecisionRestsOn) {
  const ProbeResult r = probe(load_scenario("weights-mislead"), {});
  EXPECT_EQ(r.query_token, "good");
  EXPECT_EQ(r.decision, "negative");
  const SerranoSmith& ss = r.serrano_smith;
  EXPECT_EQ(r.source_tokens[ss.top_weight], "<s>");
  EXPECT_NEAR(r.tokens[ss.top_weight].weight, 0.50, 0.01);
  EXPECT_EQ(r.source_tokens[ss.top_erasure], "not") << "erasing \"not\" moves the readout most";
  EXPECT_NE(ss.top_weight, ss.top_erasure);
  EXPECT_FALSE(ss.top_flips) << "knocking out the highest-weighted token leaves the decision";
  ASSERT_EQ(ss.others_flipping.size(), 1u);
  EXPECT_EQ(r.source_tokens[ss.others_flipping[0]], "not");
  EXPECT_EQ(r.tokens[4].decision_without, "positive");
  // The other measures agree with erasure, not with the weights.
  std::size_t top_value_weighted = 0, top_gradient = 0;
  for (std::size_t j = 0; j < r.tokens.size(); ++j) {
    if (r.tokens[j].value_weighted > r.tokens[top_value_weighted].value_weighted) top_value_weighted = j;
    if (std::abs(r.tokens[j].grad_x_input) > std::abs(r.tokens[top_gradient].grad_x_input)) top_gradient = j;
  }
  EXPECT_EQ(top_value_weighted, 4u);
  EXPECT_EQ(top_gradient, 4u);
  EXPECT_NE(ss.verdict.find("the largest weight misleads"), std::string::npos) << ss.verdict;
  // And Jain & Wallace: a very different row gives the same decision.
  EXPECT_GT(r.counterfactual.divergence, 0.3);
  EXPECT_EQ(r.counterfactual.decision_after, "negative");
}

TEST(BundledProbe, WeightsAgreeTheLargestWeightIsWhatTheDecisionRestsOn) {
  const ProbeResult r = probe(load_scenario("weights-agree"), {});
  EXPECT_EQ(r.decision, "negative");
  const SerranoSmith& ss = r.serrano_smith;
  EXPECT_EQ(r.source_tokens[ss.top_weight], "not");
  EXPECT_EQ(ss.top_erasure, ss.top_weight);
  EXPECT_TRUE(ss.top_flips);
  EXPECT_TRUE(ss.others_flipping.empty()) << "no other single knock-out flips it";
  EXPECT_GT(r.tau_erasure, 0.5);
  EXPECT_NE(ss.verdict.find("points at what the decision depends on"), std::string::npos) << ss.verdict;
}

TEST(Probe, BadOptionsAreRefusedNamingTheOption) {
  const Scenario s = load_scenario("three-tokens");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { probe(s, {.query = 3}); }),
                        "query: token 3 does not exist; query indices run from 0 to 2");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { probe(s, {.head = 1}); }), "head: head 1 does not exist");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { probe(s, {.epsilon = -1}); }), "epsilon: must be a finite number >= 0");
  EXPECT_ERROR_CONTAINS(error_of_call([&] { probe(s, {.readout = "class"}); }), "readout: three-tokens has no readout");
}

TEST(Probe, JsonAndTextCarryEveryMeasure) {
  RandomScenarioShape shape;
  shape.causal = true;
  const ProbeResult r = probe(random_scenario(52, shape), {.query = 0});
  const nlohmann::json j = probe_to_json(r);
  for (const char* key :
       {"query", "readout", "output", "value", "decision", "tokens", "kendall_tau", "serrano_smith", "counterfactual"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* key : {"weights", "weight", "value_weighted", "erasure", "gradient", "grad_x_input", "flips"})
    EXPECT_TRUE(j["tokens"][0].contains(key)) << key;
  EXPECT_TRUE(j["kendall_tau"]["erasure"].is_null()) << "one visible key: τ is undefined, written null, not NaN";
  const std::string text = format_probe(r, 2);
  for (const char* s : {"Kendall τ", "Serrano & Smith", "Jain & Wallace", "undefined", "grad×input", "(hidden)"})
    EXPECT_NE(text.find(s), std::string::npos) << s << " in:\n" << text;
}
