// The one experiment path (run_experiment) every face uses, and the structured errors it
// raises: the field apart from the message, placed under where a request put it.
#include <gtest/gtest.h>

#include "attnlab/analysis/experiment.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "compare.hpp"

using namespace attnlab;
using attnlab::test::error_of_call;

TEST(InputError, KeepsTheFieldApartFromTheMessage) {
  const InputError e("remove_heads", "head 4 does not exist");
  EXPECT_EQ(e.field(), "remove_heads");
  EXPECT_EQ(e.message(), "head 4 does not exist");
  EXPECT_STREQ(e.what(), "remove_heads: head 4 does not exist");
  EXPECT_STREQ(e.under("options").what(), "options.remove_heads: head 4 does not exist");
  EXPECT_EQ(InputError("[2]", "bad").under("heads").field(), "heads[2]");
  EXPECT_EQ(InputError("no field here").under("options").field(), "options");
  EXPECT_STREQ(e.renamed("--remove-heads").what(), "--remove-heads: head 4 does not exist");
  try {
    fail("d_model", "must be 1 to 4096");
    FAIL() << "fail() returned";
  } catch (const InputError& raised) {
    EXPECT_EQ(raised.field(), "d_model");
  }
}

TEST(Experiment, ReferenceAndTiledKernelsNameTheirTokensAlike) {
  Experiment e{load_scenario("cross-attention"), {}, {}, KernelKind::reference, ""};
  const ExperimentResult reference = run_experiment(e);
  e.kernel = KernelKind::tiled;
  const ExperimentResult tiled = run_experiment(e);
  EXPECT_EQ(tiled.trace.tokens, reference.trace.tokens);
  EXPECT_EQ(tiled.trace.source_tokens, reference.trace.source_tokens);
  EXPECT_EQ(tiled.trace.source_tokens.size(), 4u);
  ASSERT_EQ(tiled.trace.output.data.size(), reference.trace.output.data.size());
  for (std::size_t k = 0; k < tiled.trace.output.data.size(); ++k)
    EXPECT_NEAR(tiled.trace.output.data[k], reference.trace.output.data[k], 1e-4);
}

TEST(Experiment, EditsComeFirstThenThePriceCheckThenTheInterventions) {
  Experiment e{load_scenario("multi-head"), {}, {}, KernelKind::reference, "options"};
  e.edits.remove_heads = {0};
  e.edits.add_random_heads = {{7, std::nullopt, std::nullopt}};
  e.edits.overrides.temperature = 0.5;
  e.interventions.ablate.push_back({0, HeadAblation::zero, "ablate_heads[0]"});
  std::size_t heads_priced = 0;
  const ExperimentResult r = run_experiment(e, [&](Scenario& s) { heads_priced = s.heads.size(); });
  EXPECT_EQ(heads_priced, 3u) << "one removed, one added, seen before anything ran";
  EXPECT_EQ(r.baseline.heads.size(), 3u);
  EXPECT_EQ(r.baseline.temperature, 0.5);
  ASSERT_TRUE(r.intervention);
  for (double x : r.trace.heads[0].output.data)
    EXPECT_EQ(x, 0.0) << "head 0 ablated to zero after the edits";
}

TEST(Experiment, ErrorsNameTheFieldWhereTheRequestPutIt) {
  Experiment e{load_scenario("three-tokens"), {}, {}, KernelKind::reference, "options"};
  e.edits.remove_heads = {4};
  try {
    run_experiment(e);
    FAIL() << "a head that does not exist was removed";
  } catch (const InputError& error) {
    EXPECT_EQ(error.field(), "options.remove_heads");
  }
  Experiment tiled{load_scenario("three-tokens"), {}, {}, KernelKind::tiled, ""};
  tiled.interventions.knock_out.push_back({1, "mask_tokens[0]"});
  try {
    run_experiment(tiled);
    FAIL() << "the tiled kernel took an intervention";
  } catch (const InputError& error) {
    EXPECT_EQ(error.field(), "kernel");
  }
  EXPECT_THROW(kernel_named("gpu", "kernel"), InputError);
  EXPECT_EQ(kernel_named("tiled", "kernel"), KernelKind::tiled);
  EXPECT_EQ(to_string(KernelKind::reference), "reference");
}

TEST(UntrustedJson, NestingIsMeasuredWithoutParsingAndValuesAreDescribedWithoutWalking) {
  EXPECT_EQ(json_shape(R"({"a": [1, {"b": "[[[[{{"}]})").depth, 3) << "brackets inside strings do not count";
  EXPECT_EQ(json_shape(R"("a \" [[[")").depth, 0) << "an escaped quote does not end the string";
  EXPECT_EQ(json_shape(std::string(100000, '[')).depth, 100000);
  nlohmann::json deep = nlohmann::json::array();
  for (int k = 0; k < 1000; ++k)
    deep = nlohmann::json::array({deep});
  EXPECT_EQ(describe_json(deep), "a list of 1 items");
  EXPECT_EQ(describe_json(nlohmann::json{{"x", 1}, {"y", 2}}), "an object of 2 fields");
  EXPECT_EQ(describe_json(std::string(100, 'z')), "\"" + std::string(36, 'z') + "...");
  EXPECT_EQ(describe_json(-3), "-3");
  // A cut through a two-byte character (found by fuzz_api): the message stays valid UTF-8.
  const std::string cut = describe_json(std::string(35, 'z') + "\xd3\xa0" + std::string(10, 'z'));
  EXPECT_EQ(cut, "\"" + std::string(35, 'z') + "\xef\xbf\xbd...") << "the half character becomes U+FFFD";
  // Values are counted as a parser would build them: keys, strings, numbers, literals, lists
  // and objects (2 objects, 5 keys, 1 list, 3 numbers, a string, true and null: 14).
  EXPECT_EQ(json_shape(R"({"a": [1, -2.5e3, 7], "b": {"c": "x, [y]", "d": true, "e": null}})").values, 14u);
  EXPECT_EQ(json_shape("[[],[],{}]").values, 4u);
  EXPECT_EQ(json_shape("  42  ").values, 1u);
  // A document with more values than its limit is refused before it is parsed.
  std::string many = "[0";
  for (int k = 0; k < 1000; ++k)
    many += ",0";
  EXPECT_ERROR_CONTAINS(error_of_call([&] { parse_json_document(many + "]", "body", 1000); }),
                        "body: holds 1002 JSON values (numbers, strings, lists, objects), more than the limit of 1000");
  EXPECT_NO_THROW(parse_json_document(many + "]", "body", 1002));
  // A scenario file nested 70,000 deep is refused before it is parsed.
  EXPECT_ERROR_CONTAINS(
      error_of_call([] { parse_scenario(std::string(70000, '[') + std::string(70000, ']'), "deep.json"); }),
      "deep.json: nested more than 64 levels deep");
}
