// POST /api/cost, POST /api/kv and GET /api/models through real HTTP (api_test_support.hpp).
#include "api_test_support.hpp"

// ---- POST /api/cost and POST /api/kv: the CLI's numbers, from the same functions ----------

TEST_F(Api, CostGivesTheGridCountsFlopsAndBytesOfTheLibrary) {
  const json reply = post_to(client(), "/api/cost", {{"tokens", {3, 6, 100000}}}, 200);
  EXPECT_EQ(reply["shape"]["d_k"], 128);
  EXPECT_EQ(reply["shape"]["dtype"], "f16");
  ASSERT_EQ(reply["rows"].size(), 3u);
  EXPECT_EQ(reply["rows"][0]["dense_cells"], 9);
  EXPECT_EQ(reply["rows"][1]["dense_cells"], 36);
  EXPECT_EQ(reply["rows"][2]["dense_cells"], 10'000'000'000ull);
  EXPECT_EQ(reply["rows"][0]["flops_layer_dense"], 147'456);
  EXPECT_EQ(reply["rows"][2]["grid_bytes_head"], 20'000'000'000ull);
  const attnlab::GridCost c = attnlab::grid_cost(100000, attnlab::CostShape{});
  EXPECT_EQ(reply["rows"][2]["strided_cells"], c.strided_cells);
  EXPECT_EQ(reply["rows"][2]["window_cells"], c.window_cells);
  EXPECT_EQ(reply["rows"][2]["flops_model_dense"], c.flops_model_dense);
  EXPECT_TRUE(reply["measured"].is_null());
}

TEST_F(Api, CostMeasuresOnRequestAndTheGridGrowsAsNSquared) {
  const json reply =
      post_to(client(), "/api/cost", {{"tokens", 512}, {"d_model", 64}, {"heads", 1}, {"measure", true}}, 200);
  const json& m = reply["measured"];
  EXPECT_EQ(m["kernel"], "grid");
  ASSERT_GE(m["points"].size(), 2u);
  // The grid's bytes as counted by the heap counter: malloc's usable size, at most a page more.
  for (const json& p : m["points"]) {
    EXPECT_GE(p["kernel_bytes"].get<double>(), p["grid_formula_bytes"].get<double>());
    EXPECT_LE(p["kernel_bytes"].get<double>(), p["grid_formula_bytes"].get<double>() + 4096 + 64);
  }
  EXPECT_NEAR(m["memory_exponent"].get<double>(), 2.0, 0.01);
  EXPECT_TRUE(m["time_exponent"].is_number()) << "measured and fitted (its value is the machine's: no test asserts it)";
}

TEST_F(Api, KvGivesTheFormulaTheWeightsAndTheBudgetsLongestContext) {
  const json reply = post_to(client(), "/api/kv",
                             {{"model", "llama-3-8b"}, {"context", {4096, 8192, 131072}}, {"budget", "24GiB"}}, 200);
  EXPECT_EQ(reply["bytes_per_token"], 131'072);
  EXPECT_EQ(reply["rows"][1]["cache_bytes"], 1ull << 30) << "llama-3-8b at 8192 tokens in f16 is exactly 1 GiB";
  EXPECT_EQ(reply["weight_bytes"], 16'060'522'496ull);
  EXPECT_EQ(reply["rows"][2]["cache_exceeds_weights"], true);
  EXPECT_EQ(reply["crossover_context"], 122'533);
  EXPECT_EQ(reply["budget"]["max_context"], 74'075);
  EXPECT_EQ(reply["model"]["kv_heads"], 8);
  const json custom = post_to(
      client(), "/api/kv", {{"layers", 2}, {"kv_heads", 1}, {"head_dim", 64}, {"context", 10}, {"dtype", "f32"}}, 200);
  EXPECT_EQ(custom["rows"][0]["cache_bytes"], 2 * 2 * 1 * 64 * 10 * 4);
  EXPECT_TRUE(custom["weight_bytes"].is_null());
}

TEST_F(Api, ModelsListsThePresetsKvKnowsWithTheirShapes) {
  auto r = client().Get("/api/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json models = json::parse(r->body)["models"];
  ASSERT_EQ(models.size(), 8u);
  std::vector<std::string> names;
  for (const json& m : models) {
    names.push_back(m["name"]);
    // every preset is one /api/kv takes, with the same shape
    const json kv = post_to(client(), "/api/kv", {{"model", m["name"]}, {"context", {1}}}, 200);
    EXPECT_EQ(kv["model"], m);
  }
  EXPECT_EQ(names[3], "llama-3-8b");
  EXPECT_EQ(models[3]["layers"], 32);
  EXPECT_EQ(models[3]["kv_heads"], 8);
  EXPECT_EQ(models[3]["head_dim"], 128);
  EXPECT_EQ(models[3]["d_model"], 4096);
}

TEST_F(Api, KvMeasuresOnRequestAndAgreesWithTheFormula) {
  const json reply = post_to(client(), "/api/kv", {{"model", "gpt2"}, {"context", 2048}, {"measure", true}}, 200);
  const json& m = reply["measured"];
  EXPECT_EQ(m["layers"], 12);
  const json& last = m["points"].back();
  EXPECT_EQ(last["context"], 2048);
  EXPECT_EQ(last["formula_bytes"], 2 * 12 * 12 * 64 * 2048 * 2);
  EXPECT_EQ(last["cache_bytes"], last["formula_bytes"]);
#if ATTNLAB_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator keeps its own books: malloc's counts mean nothing under it";
#endif
  EXPECT_NEAR(last["allocator_bytes"].get<double>() / last["formula_bytes"].get<double>(), 1.0, 0.05);
}

TEST_F(Api, BadCostAndKvRequestsGet400WithTheFieldNamed) {
  const auto refused = [&](const std::string& path, const json& body, const std::string& message) {
    SCOPED_TRACE(path + " " + body.dump());
    const json reply = post_to(client(), path, body, 400);
    ASSERT_TRUE(reply.contains("error"));
    EXPECT_NE(reply["error"].get<std::string>().find(message), std::string::npos) << reply["error"];
  };
  refused("/api/cost", json::object(), "tokens: missing");
  refused("/api/cost", {{"tokens", {3, 0}}}, "tokens: 0 tokens has no grid");
  refused("/api/cost", {{"tokens", {3, -5}}}, "tokens[1]: expected a whole number >= 0 but got -5");
  refused("/api/cost", {{"tokens", 100000000}}, "tokens: 100,000,000 tokens make the FLOPs");
  refused("/api/cost", {{"tokens", 3}, {"dtype", "f8"}}, "dtype: unknown dtype \"f8\"");
  refused("/api/cost", {{"tokens", 3}, {"heads", 3}}, "heads: 3 heads do not divide d_model 4096");
  refused("/api/cost", {{"tokens", 100000}, {"measure", true}}, "measure: the server measures up to 4096 tokens");
  refused("/api/cost", {{"tokens", 3}, {"colour", 1}}, "colour: unknown field");
  refused("/api/kv", {{"model", "llama-9"}}, "model: unknown model \"llama-9\"; the known models are: gpt2, gpt2-xl");
  refused("/api/kv", json::object(), "model: give a model");
  refused("/api/kv", {{"model", "gpt2"}, {"context", 0}}, "context: 0 tokens");
  refused("/api/kv", {{"model", "gpt2"}, {"budget", "24 parsecs"}}, "budget: \"24 parsecs\" has an unknown unit");
  refused("/api/kv", {{"model", "gpt2"}, {"budget", -1}}, "budget: expected a whole number >= 0 but got -1");
  refused("/api/kv", {{"layers", 2}, {"head_dim", 64}}, "kv_heads: missing");
  refused("/api/kv", {{"model", "llama-3-8b"}, {"kv_heads", 3}}, "kv_heads: 3 KV heads do not divide 32 query heads");
  refused("/api/kv", {{"model", "llama-3-8b"}, {"context", 131072}, {"measure", true}, {"measure_layers", 32}},
          "measure: the server measures within 1 GiB");
}

// GET /api/defaults: what a request without those fields gets, the library's own values, so
// the page fills its cost and probe controls from it instead of keeping copies.
TEST_F(Api, DefaultsAreTheLibrarysOwn) {
  auto r = client().Get("/api/defaults");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json d = json::parse(r->body);
  const attnlab::CostShape cost;
  EXPECT_EQ(d["cost"]["d_model"], cost.d_model);
  EXPECT_EQ(d["cost"]["heads"], cost.heads);
  EXPECT_EQ(d["cost"]["layers"], cost.layers);
  EXPECT_EQ(d["cost"]["window"], cost.window);
  EXPECT_EQ(d["cost"]["dtype"], attnlab::dtype_name(cost.dtype));
  EXPECT_EQ(d["probe"]["epsilon"], attnlab::ProbeOptions{}.epsilon);
  EXPECT_EQ(d["training"], attnlab::train_settings_json(attnlab::TrainSettings{}));
  // and a cost request without a shape gets that shape
  const json reply = post_to(client(), "/api/cost", {{"tokens", 3}}, 200);
  EXPECT_EQ(reply["shape"]["d_model"], cost.d_model);
}
