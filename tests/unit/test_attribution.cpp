// Direct logit attribution and the logit lens against an independent NumPy implementation
// (tests/model/make_attribution_fixtures.py: its own safetensors reader and forward, float64)
// on the tiny GPT-2 (LayerNorm, learned positions, biases), Llama (RMSNorm, rotary,
// grouped-query, Llama 3 scaling) and Gemma 3 (sandwich norms, windows) fixtures: DLA, the
// lens, context mixing (attention, value norms, rollout, ALTI), gradient × input (against
// central differences), erasure, head ablation and patching each head and MLP.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/probe.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/model.hpp"
#include "compare.hpp"
#include "model_fixtures.hpp"

using namespace attnlab;
using nlohmann::json;

namespace attribution_test {

const std::filesystem::path kFixtures = ATTNLAB_MODEL_FIXTURE_DIR;

// f32 through two or three blocks against float64: logits agree to ~1e-5 (the family tests' bound is 2e-4).
constexpr double kLogit = 2e-4;

class AttributionMatchesNumPy : public ::testing::TestWithParam<const char*> {};

TEST_P(AttributionMatchesNumPy, EveryPartHeadAndSourceAndTheyAddUpToTheLogit) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  for (const json& want : expected["cases"]) {
    LogitTarget target;
    if (!want["contrast"].is_null()) target.contrast = want["contrast"];
    const LogitAttribution got = attribute_logit(model, ids, target);
    SCOPED_TRACE(want["contrast"].dump());
    EXPECT_EQ(got.position, expected["position"].get<std::size_t>());
    EXPECT_EQ(got.target, expected["target"].get<int>()) << "the model's top prediction";
    EXPECT_NEAR(got.logit, want["logit"].get<double>(), kLogit);
    // The parts, in stream order, with the final norm's bias apart.
    const json& parts = want["parts"];
    std::vector<json> numpy_parts;
    double numpy_bias = 0;
    for (const json& p : parts)
      if (p["kind"] == "final_bias")
        numpy_bias = p["logit"];
      else
        numpy_parts.push_back(p);
    ASSERT_EQ(got.parts.size(), numpy_parts.size());
    double sum = got.final_bias, largest = 0;
    for (std::size_t i = 0; i < got.parts.size(); ++i) {
      const PartContribution& p = got.parts[i];
      EXPECT_EQ(part_kind_name(p.kind), numpy_parts[i]["kind"].get<std::string>()) << i;
      if (!numpy_parts[i]["layer"].is_null()) EXPECT_EQ(p.layer, numpy_parts[i]["layer"].get<std::size_t>()) << i;
      if (!numpy_parts[i]["head"].is_null()) EXPECT_EQ(p.head, numpy_parts[i]["head"].get<std::size_t>()) << i;
      EXPECT_NEAR(p.logit, numpy_parts[i]["logit"].get<double>(), kLogit) << i;
      sum += p.logit;
      largest = std::max(largest, std::abs(p.logit));
    }
    EXPECT_NEAR(got.final_bias, numpy_bias, kLogit);
    EXPECT_NEAR(sum, got.logit, 1e-4 * std::max(1.0, largest)) << "the parts add up to the model's own logit";
    EXPECT_TRUE(test::all_close(got.heads, test::flat(want["heads"]), {kLogit, 0})) << "heads";
    // Per source: NumPy writes [L·H][n] rows; every row adds up to its head.
    EXPECT_TRUE(test::all_close(got.sources, test::flat(want["sources"]), {kLogit, 0})) << "sources";
    for (std::size_t h = 0; h < got.heads.size(); ++h) {
      double row = 0;
      for (std::size_t j = 0; j < got.n; ++j)
        row += got.sources[h * got.n + j];
      EXPECT_NEAR(row, got.heads[h], 1e-5) << "head " << h << ": its sources add up to it";
    }
  }
}

TEST_P(AttributionMatchesNumPy, TheLensGivesEachLayersTopTokenAndTheTargetsRank) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  const LogitLens lens = logit_lens(model, ids);
  EXPECT_EQ(lens.target, expected["target"].get<int>());
  ASSERT_EQ(lens.rows, model.config.n_layer + 1);
  ASSERT_EQ(lens.n, ids.size());
  const json& rows = expected["lens"];
  for (std::size_t r = 0; r < lens.rows; ++r)
    for (std::size_t i = 0; i < lens.n; ++i) {
      const LensCell& got = lens.cells[r * lens.n + i];
      const json& want = rows[r][i];
      SCOPED_TRACE(testing::Message() << "row " << r << ", position " << i);
      EXPECT_NEAR(got.top_probability, want["top_probability"].get<double>(), 1e-5);
      EXPECT_NEAR(got.target_probability, want["target_probability"].get<double>(), 1e-5);
      EXPECT_EQ(got.top, want["top"].get<int>());
      EXPECT_EQ(got.target_rank, want["target_rank"].get<std::size_t>());
    }
  // The last row is the model's own prediction.
  const ForwardResult run = model_forward(model, ids);
  const std::size_t V = model.config.vocab_size, last = lens.rows - 1;
  for (std::size_t i = 0; i < lens.n; ++i) {
    const auto row = run.logits.begin() + static_cast<std::ptrdiff_t>(i * V);
    EXPECT_EQ(lens.cells[last * lens.n + i].top, std::max_element(row, row + static_cast<std::ptrdiff_t>(V)) - row);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, AttributionMatchesNumPy, ::testing::Values("tiny-f32", "llama-f32", "gemma3-f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Attribution, BadTargetsAreRefusedByName) {
  const Model model = load_model((kFixtures / "tiny-f32").string());
  const std::vector<int> ids = {3, 17, 5};
  EXPECT_THROW((void)attribute_logit(model, ids, {.position = 3}), InputError);
  try {
    (void)attribute_logit(model, ids, {.position = std::nullopt, .target = 40});
    ADD_FAILURE() << "target 40 is outside a 40-token vocabulary";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "target");
  }
  try {
    (void)attribute_logit(model, ids, {.position = std::nullopt, .target = 1, .contrast = -2 + 50});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "contrast");
  }
  try {
    (void)logit_lens(model, ids, 41);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "target");
  }
}

// Patching's two anchors, on every family: a site that gives the corrupted run the clean
// input where the texts differ restores 100%, one that copies what the runs already share 0%.
TEST_P(AttributionMatchesNumPy, PatchingRestoresAllWhereTheTextsDifferAndNothingWhereTheyAgree) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> clean = expected["ids"];
  std::vector<int> corrupt = clean;
  const std::size_t changed = 2, n = clean.size();
  corrupt[changed] = (clean[changed] + 5) % static_cast<int>(model.config.vocab_size);
  const ResidualPatching p = patch_residual(model, clean, corrupt);
  ASSERT_EQ(p.rows, model.config.n_layer + 1);
  ASSERT_EQ(p.restored.size(), p.rows * n);
  EXPECT_EQ(p.target, expected["target"].get<int>()) << "the clean run's top prediction";
  EXPECT_NE(p.contrast, p.target);
  const ForwardResult a = model_forward(model, clean), b = model_forward(model, corrupt);
  const std::size_t V = model.config.vocab_size;
  const auto metric = [&](const ForwardResult& r) {
    return double(r.logits[(n - 1) * V + p.target]) - double(r.logits[(n - 1) * V + p.contrast]);
  };
  EXPECT_NEAR(p.clean, metric(a), 1e-5);
  EXPECT_NEAR(p.corrupt, metric(b), 1e-5);
  for (std::size_t i = 0; i < n; ++i) {
    // Entering block 0 the positions are unmixed: only the changed one carries the difference.
    EXPECT_NEAR(p.restored[i], i == changed ? 1.0 : 0.0, 1e-4) << "row 0, position " << i;
    // After the last block only the last position's row reaches the metric.
    EXPECT_NEAR(p.restored[(p.rows - 1) * n + i], i == n - 1 ? 1.0 : 0.0, 1e-4) << "last row, position " << i;
    // Before the changed token, the clean and corrupted streams are the same at every depth (causal).
    if (i < changed)
      for (std::size_t row = 0; row < p.rows; ++row)
        EXPECT_NEAR(p.restored[row * n + i], 0.0, 1e-4) << row << ", " << i;
  }
}

// Patching reruns only the rows from the patched one on, the rows before it entering as the
// corrupted run's keys and values: the same logits as rerunning every row.
TEST_P(AttributionMatchesNumPy, TheSuffixRerunThroughTheCacheIsTheWholeRerun) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  ForwardOptions keep;
  keep.keep_stream = true;
  const ForwardResult run = model_forward(model, ids, keep);
  const std::size_t n = ids.size(), d = model.config.n_embd, V = model.config.vocab_size;
  for (std::size_t layer = 0; layer < model.config.n_layer; ++layer)
    for (std::size_t first : {std::size_t{0}, std::size_t{3}, n - 1}) {
      std::vector<float> x = run.stream[layer].x_in;
      for (std::size_t k = 0; k < d; ++k)
        x[first * d + k] += 0.25f * float(k % 3) - 0.2f;  // a patched row
      const std::vector<float> whole = forward_from(model, layer, x, {}, n - 1);
      const std::vector<float> suffix =
          forward_suffix(model, layer, run.stream, first, {x.begin() + std::ptrdiff_t(first * d), x.end()});
      ASSERT_EQ(suffix.size(), V);
      EXPECT_TRUE(test::all_close(suffix, whole, {1e-5, 1e-5})) << "layer " << layer << ", rows from " << first;
    }
}

TEST(Attribution, PatchingTextsOfDifferentLengthsOrTheSameMetricIsRefused) {
  const Model model = load_model((kFixtures / "tiny-f32").string());
  const std::vector<int> a = {3, 17, 5}, b = {3, 17};
  try {
    (void)patch_residual(model, a, b);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "corrupt");
    EXPECT_NE(std::string(e.what()).find("texts of the same length"), std::string::npos) << e.what();
  }
  try {
    (void)patch_residual(model, a, a);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing for a site to restore"), std::string::npos) << e.what();
  }
}

// ---- context mixing, the gradient, the interventions and the verdict ----

std::vector<double> flat_of(const json& j) { return test::flat(j); }

TEST_P(AttributionMatchesNumPy, ContextMixingMatchesNumPy) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const json& want = expected["verdict"];
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  ForwardOptions keep;
  keep.keep_stream = true;
  const ContextMixing mixing = context_mixing(model, model_forward(model, ids, keep), ids.size() - 1);
  EXPECT_TRUE(test::all_close(mixing.attention, flat_of(want["attention"]), {1e-5, 0})) << "attention";
  EXPECT_TRUE(test::all_close(mixing.value_norms, flat_of(want["value_norms"]), {1e-4, 1e-4})) << "value norms";
  EXPECT_TRUE(test::all_close(mixing.rollout, flat_of(want["rollout"]), {1e-5, 0})) << "rollout";
  EXPECT_TRUE(test::all_close(mixing.alti, flat_of(want["alti"]), {1e-4, 1e-4})) << "ALTI";
  EXPECT_TRUE(test::all_close(mixing.attention_map, flat_of(want["attention_map"]), {1e-5, 0})) << "attention map";
  EXPECT_TRUE(test::all_close(mixing.rollout_map, flat_of(want["rollout_map"]), {1e-5, 0})) << "rollout map";
  EXPECT_TRUE(test::all_close(mixing.alti_map, flat_of(want["alti_map"]), {1e-4, 1e-4})) << "ALTI map";
  // Both roll-outs are rows of products of row-stochastic matrices: they sum to 1.
  double rollout = 0, alti = 0;
  for (std::size_t j = 0; j < ids.size(); ++j)
    rollout += mixing.rollout[j], alti += mixing.alti[j];
  EXPECT_NEAR(rollout, 1.0, 1e-9);
  EXPECT_NEAR(alti, 1.0, 1e-9);
}

const Scores& named(const std::vector<Scores>& list, const std::string& name) {
  for (const Scores& s : list)
    if (s.name == name) return s;
  throw std::logic_error("no " + name);
}

TEST_P(AttributionMatchesNumPy, TheVerdictsGradientAndInterventionsMatchNumPy) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const json& want = expected["verdict"];
  const Model model = load_model((kFixtures / GetParam()).string());
  const std::vector<int> ids = expected["ids"];
  VerdictOptions options;
  options.target = {std::nullopt, expected["target"].get<int>(), expected["contrast"].get<int>()};
  options.steps = 64;
  const Verdict v = verdict(model, ids, options);
  EXPECT_NEAR(v.metric, want["metric"].get<double>(), kLogit);
  // Interventions rerun in f32 against float64: the effects agree as the logits do.
  EXPECT_TRUE(test::all_close(named(v.token_interventions, "erasure").values, flat_of(want["erasure"]), {kLogit, 0}))
      << "erasure";
  EXPECT_TRUE(
      test::all_close(named(v.head_interventions, "zero_ablation").values, flat_of(want["zero_ablation"]), {kLogit, 0}))
      << "zero ablation";
  EXPECT_TRUE(
      test::all_close(named(v.head_interventions, "mean_ablation").values, flat_of(want["mean_ablation"]), {kLogit, 0}))
      << "mean ablation";
  // The hand-written backward (f32) against NumPy's central differences (float64).
  EXPECT_TRUE(
      test::all_close(named(v.token_measures, "grad_x_input").values, flat_of(want["grad_x_input"]), {2e-4, 1e-3}))
      << "gradient × input";
  // Integrated gradients add up to m(x) − m(x') (completeness), to the midpoint rule's error.
  const std::vector<double>& ig = named(v.token_measures, "integrated_gradients").values;
  double sum = 0;
  for (double x : ig)
    sum += x;
  const double change = v.metric - want["metric_at_baseline"].get<double>();
  EXPECT_NEAR(sum, change, 0.01 * std::max(1.0, std::abs(change)));
  // The measures the verdict averages, from the context mixing NumPy checks above.
  const std::size_t n = ids.size(), L = model.config.n_layer, H = model.config.n_head;
  const std::vector<double> attention = flat_of(want["attention"]);
  std::vector<double> mean(n, 0.0);
  for (std::size_t k = 0; k < attention.size(); ++k)
    mean[k % n] += attention[k] / double(L * H);
  EXPECT_TRUE(test::all_close(named(v.token_measures, "attention").values, mean, {1e-5, 0}));
  EXPECT_TRUE(test::all_close(named(v.token_measures, "alti").values, flat_of(want["alti"]), {1e-4, 1e-4}));
  // Every measure is ranked against its kind's interventions: 7 token measures × erasure, DLA × 2 ablations.
  ASSERT_EQ(v.agreements.size(), 9u);
  for (const Agreement& a : v.agreements) {
    SCOPED_TRACE(a.measure + " vs " + a.intervention);
    const std::vector<Scores>& measures = a.intervention == "erasure" ? v.token_measures : v.head_measures;
    const std::vector<Scores>& effects = a.intervention == "erasure" ? v.token_interventions : v.head_interventions;
    std::vector<double> x = named(measures, a.measure).values, y = named(effects, a.intervention).values;
    for (double& e : x)
      e = std::abs(e);
    for (double& e : y)
      e = std::abs(e);
    EXPECT_DOUBLE_EQ(a.kendall, kendall_tau(x, y));
    EXPECT_DOUBLE_EQ(a.spearman, spearman_rho(x, y));
  }
}

TEST_P(AttributionMatchesNumPy, PatchingEachHeadAndMlpMatchesNumPy) {
  const json expected = test::read_json(kFixtures / "attribution" / (std::string(GetParam()) + ".json"));
  const json& want = expected["patching"];
  const Model model = load_model((kFixtures / GetParam()).string());
  const ResidualPatching p = patch_residual(model, want["clean"].get<std::vector<int>>(),
                                            want["corrupt"].get<std::vector<int>>(), want["target"], want["contrast"]);
  EXPECT_TRUE(test::all_close(p.heads_restored, flat_of(want["heads"]), {1e-3, 1e-3})) << "heads";
  EXPECT_TRUE(test::all_close(p.mlps_restored, flat_of(want["mlps"]), {1e-3, 1e-3})) << "MLPs";
}

TEST(Attribution, SpearmanRanksWithTiesAndIsUndefinedForAConstantList) {
  const std::vector<double> a = {1, 2, 3, 4}, up = {10, 20, 30, 40}, down = {4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(spearman_rho(a, up), 1.0);
  EXPECT_DOUBLE_EQ(spearman_rho(a, down), -1.0);
  // Ranks (1.5, 1.5, 3) against (1, 2, 3): covariance 1.5 over √(1.5 · 2).
  EXPECT_NEAR(spearman_rho(std::vector<double>{1, 1, 2}, std::vector<double>{1, 2, 3}), 1.5 / std::sqrt(3.0), 1e-12);
  EXPECT_TRUE(std::isnan(spearman_rho(std::vector<double>{5, 5, 5}, a)));
  EXPECT_TRUE(std::isnan(spearman_rho(std::vector<double>{1}, std::vector<double>{2})));
}

TEST(Attribution, TheSpreadOverTextsIsTheMeanAndSampleDeviationOfWhatIsDefined) {
  std::vector<Verdict> verdicts(3);
  const double taus[] = {0.2, 0.6, std::nan("")}, rhos[] = {0.1, 0.3, 0.5};
  for (std::size_t k = 0; k < 3; ++k)
    verdicts[k].agreements = {{"attention", "erasure", taus[k], rhos[k]}};
  const std::vector<AgreementSpread> s = agreement_spread(verdicts);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].texts, 2u) << "the undefined τ is left out";
  EXPECT_NEAR(s[0].kendall_mean, 0.4, 1e-12);
  EXPECT_NEAR(s[0].kendall_sd, std::sqrt(0.08), 1e-12);
  EXPECT_NEAR(s[0].spearman_mean, 0.3, 1e-12);
  EXPECT_NEAR(s[0].spearman_sd, 0.2, 1e-12);
}

TEST(Attribution, TheVerdictCutsTheTextAfterThePredictionAndRefusesBadOptions) {
  const Model model = load_model((kFixtures / "tiny-f32").string());
  const std::vector<int> ids = {3, 17, 5, 3, 17, 29};
  VerdictOptions options;
  options.target.position = 3;
  const Verdict v = verdict(model, ids, options);
  EXPECT_EQ(v.n, 4u);
  EXPECT_EQ(v.token_interventions[0].values.size(), 4u);
  const std::vector<int> cut(ids.begin(), ids.begin() + 4);
  EXPECT_EQ(v.target, attribute_logit(model, cut).target) << "the top prediction at position 3";
  options.steps = 0;
  EXPECT_EQ(test::error_of_call([&] { (void)verdict(model, ids, options); }).empty(), false);
  options.steps = 16;
  options.target.position = 6;
  try {
    (void)verdict(model, ids, options);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "position");
  }
}

// The bundled weights-mislead scenario lifted into a GPT-2 checkpoint: one layer, one head,
// the scenario's W_Q, W_K, W_V in the head's first two dimensions, and each embedding e
// written as [e, −e, s, −s, 0, 0, 0, 0] (s² = 1 − ‖e‖²) so that every row has mean 0 and the
// same variance 1/7, and ln_1 with γ = √(1/7) gives back exactly [e, −e, …]: the head reads
// the scenario's embeddings. W_O writes z₀ into dimensions 10 and 11 (+, −) and z₁ into 12
// and 13; the unembedding rows "positive" and "negative" read them as the scenario's readout
// (6 · z). No MLP, no positions. Then the model's own erasure must say what the probe says:
// <s> takes the largest weight, "not" carries the decision.
Model weights_mislead_model(const json& scenario) {
  constexpr std::size_t d = 14, V = 8;  // the scenario's six tokens, then "positive" and "negative"
  ModelConfig c{1, 1, d, 8, V, 4, 1e-5};
  Model m;
  m.config = c;
  std::vector<float> wte(V * d, 0.0f);
  const json& embeddings = scenario["embeddings"];
  for (std::size_t t = 0; t < embeddings.size(); ++t) {
    double norm = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const float e = embeddings[t][k];
      wte[t * d + k] = e, wte[t * d + 4 + k] = -e;
      norm += double(e) * e;
    }
    wte[t * d + 8] = float(std::sqrt(1 - norm)), wte[t * d + 9] = -wte[t * d + 8];
  }
  for (std::size_t k = 0; k < 2; ++k)  // positive reads z₀ (dims 10, 11), negative z₁ (12, 13): 6 · z
    wte[(6 + k) * d + 10 + 2 * k] = 3, wte[(6 + k) * d + 11 + 2 * k] = -3;
  m.wte = wte;
  m.wpe = std::vector<float>(c.n_positions * d, 0.0f);
  Block b;
  b.ln_1_weight = std::vector<float>(d, float(std::sqrt(1.0 / 7))), b.ln_1_bias = std::vector<float>(d, 0.0f);
  std::vector<float> qkv(d * 3 * d, 0.0f);  // [d × (q | k | v)], each head_dim = d wide
  const json& head = scenario["heads"][0];
  // The model scores q·k/√14, the scenario q·k/√2: W_Q × √7.
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t k = 0; k < 2; ++k) {
      qkv[r * 3 * d + k] = float(head["w_q"][r][k].get<double>() * std::sqrt(7.0));
      qkv[r * 3 * d + d + k] = head["w_k"][r][k].get<float>();
      qkv[r * 3 * d + 2 * d + k] = head["w_v"][r][k].get<float>();
    }
  b.attn_weight = qkv, b.attn_bias = std::vector<float>(3 * d, 0.0f);
  std::vector<float> w_o(d * d, 0.0f);
  w_o[0 * d + 10] = 1, w_o[0 * d + 11] = -1, w_o[1 * d + 12] = 1, w_o[1 * d + 13] = -1;
  b.attn_proj_weight = w_o, b.attn_proj_bias = std::vector<float>(d, 0.0f);
  b.ln_2_weight = std::vector<float>(d, 1.0f), b.ln_2_bias = std::vector<float>(d, 0.0f);
  b.mlp_fc_weight = std::vector<float>(d * 4, 0.0f), b.mlp_fc_bias = std::vector<float>(4, 0.0f);
  b.mlp_proj_weight = std::vector<float>(4 * d, 0.0f), b.mlp_proj_bias = std::vector<float>(d, 0.0f);
  m.blocks = {b};
  m.ln_f_weight = std::vector<float>(d, 1.0f), m.ln_f_bias = std::vector<float>(d, 0.0f);
  return m;
}

TEST(Attribution, OnTheWeightsMisleadCaseInAModelTheLargestWeightIsNotTheLargestEffect) {
  const json scenario = test::read_json(std::filesystem::path(ATTNLAB_SCENARIO_DIR) / "weights-mislead.json");
  const Model model = weights_mislead_model(scenario);
  const std::vector<int> ids = {0, 1, 2, 3, 4, 5};  // "<s> the food was not good"
  VerdictOptions options;
  options.target = {std::nullopt, 7, 6};  // logit(negative) − logit(positive)
  const Verdict v = verdict(model, ids, options);
  EXPECT_GT(v.metric, 0) << "the decision is negative";
  const std::vector<double>& attention = named(v.token_measures, "attention").values;
  EXPECT_NEAR(attention[0], 0.50, 0.01) << "<s> takes half the weight, as in the scenario";
  EXPECT_NEAR(attention[4], 0.14, 0.01) << "\"not\" takes 0.14";
  EXPECT_EQ(std::max_element(attention.begin(), attention.end()) - attention.begin(), 0);
  const std::vector<double>& erasure = named(v.token_interventions, "erasure").values;
  const auto largest = [](const std::vector<double>& x) {
    return std::max_element(x.begin(), x.end(), [](double a, double b) { return std::abs(a) < std::abs(b); }) -
           x.begin();
  };
  EXPECT_EQ(largest(erasure), 4) << "erasing \"not\" moves the prediction most";
  EXPECT_LT(v.metric + erasure[4], 0) << "and flips it to positive";
  EXPECT_GT(v.metric + erasure[0], 0) << "erasing <s> leaves it negative";
  // The measures that weigh what a source sends find "not" too; those that count the residual
  // credit the query's own token "good" first (its row is most of the stream), "not" next.
  for (const char* measure : {"value_norms", "dla"})
    EXPECT_EQ(largest(named(v.token_measures, measure).values), 4) << measure;
  for (const char* measure : {"alti", "grad_x_input"}) {
    std::vector<double> others = named(v.token_measures, measure).values;
    EXPECT_EQ(largest(others), 5) << measure;
    others.pop_back();
    EXPECT_EQ(largest(others), 4) << measure;
  }
}

}  // namespace attribution_test
