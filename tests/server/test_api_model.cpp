// The lab with a model (`attnlab serve --model DIR`) through real HTTP (api_test_support.hpp).
#include "api_test_support.hpp"
#include "attnlab/analysis/eviction.hpp"
#include "attnlab/model/generate.hpp"
#include "attnlab/model/training.hpp"
#include "attnlab/operations/survey.hpp"
#include "attnlab/server/limits.hpp"

// ---- the lab with a model (`attnlab serve --model DIR`) -----------------------------------
// A second server, constructed with the tiny GPT-2 fixture (2 layers × 4 heads, 16 wide, 16
// positions, vocabulary 40, no tokenizer: requests give ids), checked against the model
// layer's own forward pass.
namespace {

class ModelApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::make_shared<const attnlab::ModelDir>(
        attnlab::open_model_dir(std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/tiny-f32"));
    running_ = new RunningServer(model_);
    port_ = running_->port;
  }
  static void TearDownTestSuite() {
    delete running_;
    model_.reset();
  }

  // POST `body` to `path`; the reply's JSON, after checking the status.
  json post_json(const std::string& path, const json& body, int expected_status = 200) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, expected_status) << r->body.substr(0, 400);
    return json::parse(r->body);
  }
  // 400 with {"error": "FIELD: ...", "field": FIELD}.
  void expect_field(const std::string& path, const json& body, const std::string& field, const std::string& message) {
    SCOPED_TRACE(body.dump().substr(0, 200));
    const json reply = post_json(path, body, 400);
    EXPECT_EQ(reply["field"], field) << reply;
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::StartsWith(field + ": "));
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr(message));
  }

  static std::shared_ptr<const attnlab::ModelDir> model_;
  static RunningServer* running_;
  static int port_;
};
std::shared_ptr<const attnlab::ModelDir> ModelApi::model_;
RunningServer* ModelApi::running_ = nullptr;
int ModelApi::port_ = 0;

// A text with repeats, so that every detector has rows to score.
const std::vector<int> kModelIds = {3, 17, 5, 9, 3, 17, 5, 9, 22};

}  // namespace

TEST_F(Api, ModelIsNotLoadedWithoutModelAndModelRequestsAre400NamingModel) {
  auto r = client().Get("/api/model");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), (json{{"loaded", false}}));
  auto run = client().Post("/api/model/run", json{{"ids", {1, 2}}}.dump(), "application/json");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, 400);
  EXPECT_EQ(json::parse(run->body)["field"], "model");
  EXPECT_THAT(json::parse(run->body)["error"].get<std::string>(), ::testing::HasSubstr("--model DIR"));
  const json head = post_json({{"scenario", {{"model", {{"ids", {1, 2}}, {"layer", 0}, {"head", 0}}}}}}, 400);
  EXPECT_EQ(head["field"], "model");
}

TEST_F(ModelApi, ModelSaysWhatIsLoaded) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/api/model");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json reply = json::parse(r->body);
  const json expected = {
      {"loaded", true},    {"name", "tiny-f32"}, {"run", nullptr},     {"step", nullptr},      {"training", false},
      {"n_layer", 2},      {"n_head", 4},        {"n_kv_head", 4},     {"n_embd", 16},         {"head_dim", 4},
      {"n_positions", 16}, {"vocab_size", 40},   {"family", "gpt2"},   {"norm", "layer_norm"}, {"positions", "learned"},
      {"mlp", "gelu"},     {"tied", true},       {"parameters", 7488}, {"tokenizer", false}};
  for (const auto& item : expected.items())
    EXPECT_EQ(reply[item.key()], item.value()) << item.key();
  EXPECT_EQ(reply["sliding_window"], json({nullptr, nullptr}));
  EXPECT_NE(reply["description"].get<std::string>().find("gpt2: 2 layers × 4 heads, d_model 16"), std::string::npos);
}

TEST_F(ModelApi, ModelRunGivesTheForwardsWeightsDetectorsAndAnOrderedTopK) {
  const json reply = post_json("/api/model/run", {{"ids", kModelIds}, {"top_k", 7}});
  // The server's forward computes the last position's logits alone (the reply's one row).
  const attnlab::ForwardResult f =
      attnlab::model_forward(model_->model, kModelIds, {.logits = attnlab::LogitRows::last, .keep_attention = true});
  const std::size_t n = kModelIds.size(), L = 2, H = 4;
  EXPECT_EQ(reply["ids"], kModelIds);
  EXPECT_EQ(reply["tokens"][0], "#3");  // no tokenizer: ids shown as #ID
  // Weights, rounded to 4 decimals in the reply: |a − b| ≤ 5e-5 (half the last digit) + 1e-7.
  ASSERT_EQ(reply["weights"].size(), L);
  double largest = 0;
  for (std::size_t l = 0; l < L; ++l) {
    ASSERT_EQ(reply["weights"][l].size(), H);
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
          largest = std::max(
              largest, std::abs(reply["weights"][l][h][i][j].get<double>() - f.attention[l][(h * n + i) * n + j]));
  }
  EXPECT_LE(largest, 5e-5 + 1e-7);
  // The next token after the last: ordered, summing to at most 1, the library's ids.
  const std::vector<attnlab::TokenProbability> expected = attnlab::top_k(f.logits_at(n - 1), 7);
  const json& top = reply["top_k"];
  ASSERT_EQ(top.size(), 7u);
  double total = 0;
  for (std::size_t k = 0; k < top.size(); ++k) {
    EXPECT_EQ(top[k]["id"], expected[k].id);
    EXPECT_NEAR(top[k]["probability"].get<double>(), expected[k].probability, 1e-12);
    EXPECT_EQ(top[k]["token"], "#" + std::to_string(expected[k].id));
    if (k) EXPECT_LE(top[k]["probability"].get<double>(), top[k - 1]["probability"].get<double>());
    total += top[k]["probability"].get<double>();
  }
  EXPECT_LE(total, 1.0 + 1e-12);
  EXPECT_TRUE(reply["top_k_ablated"].is_null());
  // The detectors on this one text are detect_heads' scores with it as the only sequence (the
  // reply's from the n × n weights, detect_heads' from the pass over each row's scores).
  const std::vector<attnlab::HeadScores> scores = attnlab::detect_heads(model_->model, {kModelIds});
  ASSERT_EQ(reply["heads"].size(), L * H);
  for (std::size_t k = 0; k < L * H; ++k) {
    const json& h = reply["heads"][k];
    EXPECT_EQ(h["layer"], k / H);
    EXPECT_EQ(h["head"], k % H);
    EXPECT_NEAR(h["previous_token"].get<double>(), scores[k].previous_token, 1e-6);
    EXPECT_NEAR(h["duplicate_token"].get<double>(), scores[k].duplicate_token, 1e-6);
    EXPECT_NEAR(h["induction"].get<double>(), scores[k].induction, 1e-6);
  }
  // Without repeats the duplicate and induction patterns have no key: null, not 0.
  const json plain = post_json("/api/model/run", {{"ids", {1, 2, 3}}, {"weights", false}});
  EXPECT_TRUE(plain["heads"][0]["duplicate_token"].is_null());
  EXPECT_TRUE(plain["weights"].is_null());
  EXPECT_EQ(plain["top_k"].size(), 5u);  // the default
}

TEST_F(ModelApi, ModelRunAblationMovesTheTopKAsTheForwardDoes) {
  const std::vector<std::string> heads = {"0.0", "0.1", "1.2", "1.3"};
  const json reply = post_json("/api/model/run", {{"ids", kModelIds}, {"ablate", heads}});
  std::vector<attnlab::HeadRef> refs;
  for (const std::string& h : heads)
    refs.push_back(attnlab::parse_head_ref(h, "test"));
  const attnlab::ForwardResult f =
      attnlab::model_forward(model_->model, kModelIds, {.logits = attnlab::LogitRows::last, .ablate = refs});
  const std::vector<attnlab::TokenProbability> expected = attnlab::top_k(f.logits_at(kModelIds.size() - 1), 5);
  ASSERT_EQ(reply["top_k_ablated"].size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(reply["top_k_ablated"][k]["id"], expected[k].id);
    EXPECT_NEAR(reply["top_k_ablated"][k]["probability"].get<double>(), expected[k].probability, 1e-12);
  }
  EXPECT_NE(reply["top_k_ablated"], reply["top_k"]);  // the distribution moved
  EXPECT_EQ(reply["ablated"], heads);
}

// The lab with a Llama-family model: the same endpoints, for a grouped-query, rotary model
// (tests/model/fixtures/llama-f32: 2 layers × 4 query heads sharing 2 KV heads) and for
// Gemma 3 (QK-norm, its own score scale, windows with their own θ).
TEST(FamilyModelApi, EveryEndpointServesALlamaAndAGemmaModel) {
  for (const char* fixture : {"llama-f32", "gemma3-f32"}) {
    SCOPED_TRACE(fixture);
    const auto model = std::make_shared<const attnlab::ModelDir>(
        attnlab::open_model_dir(std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/" + fixture));
    const attnlab::ModelConfig& c = model->model.config;
    RunningServer running(model);
    httplib::Client client("127.0.0.1", running.port);
    const auto described = client.Get("/api/model");
    ASSERT_TRUE(described);
    const json about = json::parse(described->body);
    EXPECT_EQ(about["family"], attnlab::family_name(c.family));
    EXPECT_EQ(about["n_kv_head"], c.kv_heads());
    const auto post = [&](const std::string& path, const json& body) {
      auto r = client.Post(path, body.dump(), "application/json");
      EXPECT_TRUE(r);
      return r ? std::pair{r->status, json::parse(r->body)} : std::pair{0, json()};
    };
    const std::vector<int> ids = {3, 17, 5, 9, 3, 17, 5, 9, 22};
    const std::size_t n = ids.size();
    const attnlab::ForwardResult f = attnlab::model_forward(model->model, ids, {.keep_attention = true});
    const auto [status, run] = post("/api/model/run", {{"ids", ids}});
    ASSERT_EQ(status, 200) << run.dump().substr(0, 300);
    ASSERT_EQ(run["weights"].size(), c.n_layer);
    for (std::size_t l = 0; l < c.n_layer; ++l)
      for (std::size_t h = 0; h < c.n_head; ++h)
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j)
            ASSERT_NEAR(run["weights"][l][h][i][j].get<double>(), f.attention[l][(h * n + i) * n + j], 5e-5);
    const auto [head_status, trace] =
        post("/api/attention", {{"scenario", {{"model", {{"ids", ids}, {"layer", 1}, {"head", 3 % c.n_head}}}}}});
    ASSERT_EQ(head_status, 200) << trace.dump().substr(0, 300);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        EXPECT_NEAR(trace["heads"][0]["weights"][i][j].get<double>(), f.attention[1][((3 % c.n_head) * n + i) * n + j],
                    1e-6);
  }
}

TEST_F(ModelApi, AttentionOnAModelHeadGivesTheForwardsWeights) {
  const json scenario = {{"model", {{"ids", kModelIds}, {"layer", 1}, {"head", 2}}}};
  const json trace = post_json("/api/attention", {{"scenario", scenario}});
  const attnlab::ForwardResult f = attnlab::model_forward(model_->model, kModelIds, {.keep_attention = true});
  const std::size_t n = kModelIds.size();
  ASSERT_EQ(trace["heads"].size(), 1u);
  EXPECT_EQ(trace["scenario"], "head 1.2");
  EXPECT_EQ(trace["tokens"][1], "#17");
  EXPECT_EQ(trace["causal"], true);
  EXPECT_EQ(trace["scenario_json"]["model"], scenario["model"]);  // the request that makes it, not its matrices
  EXPECT_FALSE(trace["scenario_json"].contains("embeddings"));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      EXPECT_NEAR(trace["heads"][0]["weights"][i][j].get<double>(), f.attention[1][(2 * n + i) * n + j], 1e-6)
          << i << "," << j;
  // Everything else a scenario gets, it gets: options, interventions, the packed reply and
  // the page engine's input document.
  const json cooler = post_json(
      "/api/attention",
      {{"scenario", scenario}, {"options", {{"temperature", 0.5}, {"mask_tokens", {0}}}}, {"attention_input", true}});
  EXPECT_EQ(cooler["temperature"], 0.5);
  EXPECT_FALSE(cooler["intervention"].is_null());
  EXPECT_TRUE(cooler.contains("attention_input"));
  httplib::Client c("127.0.0.1", port_);
  auto packed =
      c.Post("/api/attention", json{{"scenario", scenario}, {"encoding", "packed"}}.dump(), "application/json");
  ASSERT_TRUE(packed);
  EXPECT_EQ(packed->status, 200);
  EXPECT_EQ(attnlab::unpack_reply(packed->body)["heads"][0]["weights"], trace["heads"][0]["weights"]);
  const json probe = post_json("/api/probe", {{"scenario", scenario}, {"query", n - 1}});
  EXPECT_EQ(probe["tokens"].size(), n);
}

// POST /api/model/generate is the `model generate` operation: its reply is what the library's
// generation writes for the same request (the command's --json and Python's dict are the same
// writer's), a seeded sample included; its mistakes are named by field.
TEST_F(ModelApi, GenerateAnswersAsTheOperationDoesAndNamesBadFields) {
  const json reply =
      post_json("/api/model/generate", {{"ids", {3, 17, 5}}, {"tokens", 6}, {"temperature", 1}, {"seed", 3}});
  const attnlab::GenerateOptions options{.tokens = 6, .temperature = 1, .top_k = 0, .seed = 3};
  const std::vector<int> prompt{3, 17, 5};
  EXPECT_EQ(reply,
            attnlab::generation_json(*model_, prompt, attnlab::generate(model_->model, prompt, options), options));
  EXPECT_EQ(reply["generated"].size(), 6u);
  expect_field("/api/model/generate", {{"ids", {3, 40}}}, "ids[1]", "outside the vocabulary");
  expect_field("/api/model/generate", {{"ids", {3}}, {"temperature", 1}, {"top_p", 0}}, "top_p",
               "must be more than 0 and at most 1");
  expect_field("/api/model/generate", {{"ids", {3}}, {"top_k", -1}}, "top_k", "expected a whole number");
  expect_field("/api/model/generate", {{"ids", {3}}, {"tokens", 16}}, "tokens", "must fit the model's 16 positions");
  expect_field("/api/model/generate", {{"ids", {3}}, {"temperature", "hot"}}, "temperature", "expected a number");
  expect_field("/api/model/generate", {{"text", "hello"}}, "text", "has no tokenizer");
  expect_field("/api/model/generate", {{"text", "hello"}, {"ids", {3}}}, "ids", "not both");
  expect_field("/api/model/generate", json::object(), "text", "missing");
  expect_field("/api/model/generate", {{"ids", {3}}, {"plot", "x.svg"}}, "plot", "unknown field");
}

// The same request from the command and from the API: one reply (run_json writes both), the
// weights to the 4 decimals the server rounds them to, every other field equal. The same
// for a seeded, sampled generation.
TEST_F(ModelApi, TheCommandsJsonIsTheApisReply) {
  const std::string tiny = std::string(ATTNLAB_MODEL_FIXTURE_DIR) + "/tiny-f32";
  const auto command = [&](const std::string& operation, const std::string& args) {
    const std::string line = std::string(ATTNLAB_BIN) + " model " + operation + " " + tiny + " " + args + " 2>&1";
    std::string out;
    FILE* pipe = popen(line.c_str(), "r");
    char buffer[65536];
    for (std::size_t got; pipe && (got = fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      out.append(buffer, got);
    EXPECT_EQ(pipe ? pclose(pipe) : -1, 0) << out.substr(0, 400);
    return json::parse(out);
  };
  json cli = command("run", "--ids 3,17,5,9,3,17 --ablate 0.1 --ablate 1.3 --top-k 3 --json");
  json api = post_json("/api/model/run", {{"ids", {3, 17, 5, 9, 3, 17}}, {"ablate", {"0.1", "1.3"}}, {"top_k", 3}});
  const json cli_weights = cli["weights"], api_weights = api["weights"];
  cli.erase("weights");
  api.erase("weights");
  EXPECT_EQ(cli, api);
  EXPECT_EQ(api["ablated"], (json{"0.1", "1.3"}));
  ASSERT_EQ(cli_weights.size(), api_weights.size());
  for (std::size_t l = 0; l < cli_weights.size(); ++l)
    for (std::size_t h = 0; h < cli_weights[l].size(); ++h)
      for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = 0; j < 6; ++j)
          ASSERT_NEAR(cli_weights[l][h][i][j].get<double>(), api_weights[l][h][i][j].get<double>(), 0.5e-4 + 1e-9);
  EXPECT_EQ(command("qk", "--ids 3,17,5,9,3,17 --head 1.2 --key 1 --json"),
            post_json("/api/model/qk", {{"ids", {3, 17, 5, 9, 3, 17}}, {"head", "1.2"}, {"key", 1}}));
  expect_field("/api/model/qk", {{"ids", {3, 17, 5}}, {"head", "1.2"}, {"key", 4}}, "key", "is after the query 2");
  expect_field("/api/model/qk", {{"ids", {3, 17, 5}}}, "head", "missing");
  EXPECT_EQ(command("circuits", "--json"), post_json("/api/model/circuits", json::object()));
  // Sparse rows, no n × n weights: the command's reply.
  const json sparse = post_json("/api/model/run", {{"ids", {3, 17, 5, 9, 3, 17}}, {"sparse", 3}, {"weights", false}});
  EXPECT_EQ(command("run", "--ids 3,17,5,9,3,17 --sparse 3 --json"), sparse);
  EXPECT_TRUE(sparse["weights"].is_null());
  EXPECT_EQ(sparse["sparse"]["keys"][1][2][5].size(), 3u);  // layer 1, head 2, the last query's 3 keys
  expect_field("/api/model/run", {{"ids", {3}}, {"sparse", 65}}, "sparse", "from 0 to 64");
  // model kv: the measured bytes are this run's; the formula, the shape and the report are the command's.
  json kv_cli = command("kv", "--context 4,16 --json"), kv_api = post_json("/api/model/kv", {{"context", {4, 16}}});
  for (json* reply : {&kv_cli, &kv_api})
    for (json& point : (*reply)["contexts"])
      point.erase("resident_bytes");
  EXPECT_EQ(kv_cli["contexts"], kv_api["contexts"]);
  EXPECT_EQ(kv_cli["layers"], kv_api["layers"]);
  EXPECT_NE(kv_api["report"].get<std::string>().find("| 16 | 4 KiB |"), std::string::npos) << kv_api["report"];
  expect_field("/api/model/kv", {{"context", {4}}, {"report", "/tmp/x.md"}}, "report", "unknown field");
  expect_field("/api/model/kv", {{"context", {17}}}, "context", "the model has 16 positions");
  expect_field("/api/model/circuits", {{"seed", "x"}}, "seed", "expected a whole number");
  EXPECT_EQ(command("generate", "--ids 3,17,5 --tokens 5 --temperature 0.9 --top-k 8 --seed 4 --json"),
            post_json("/api/model/generate",
                      {{"ids", {3, 17, 5}}, {"tokens", 5}, {"temperature", 0.9}, {"top_k", 8}, {"seed", 4}}));
  // Traced: the alternatives and every head's weights over the cache, step by step.
  const json traced = post_json("/api/model/generate", {{"ids", {3, 17, 5}}, {"tokens", 4}, {"trace", true}});
  EXPECT_EQ(command("generate", "--ids 3,17,5 --tokens 4 --trace --json"), traced);
  ASSERT_EQ(traced["generated"].size(), 4u);
  EXPECT_EQ(traced["generated"][3]["attention"].size(), 2u);        // layers
  EXPECT_EQ(traced["generated"][3]["attention"][1].size(), 4u);     // heads
  EXPECT_EQ(traced["generated"][3]["attention"][1][2].size(), 6u);  // the cache before the 4th new token
  EXPECT_EQ(traced["cache"]["bytes_per_token"], 2 * 2 * 4 * 4 * 4);
}

TEST_F(ModelApi, BadModelRequestsGet400NamingTheField) {
  const std::vector<int> too_long(17, 1);
  expect_field("/api/model/run", {{"ids", kModelIds}, {"ablate", {"2.0"}}}, "ablate[0]", "head 2.0 does not exist");
  expect_field("/api/model/run", {{"ids", kModelIds}, {"ablate", {"one"}}}, "ablate[0]", "is not a head");
  expect_field("/api/model/run", {{"ids", {1, 40}}}, "ids[1]", "token id 40 is outside the vocabulary (0 to 39)");
  expect_field("/api/model/run", {{"ids", {1, -2}}}, "ids[1]", "expected a whole number");
  expect_field("/api/model/run", {{"ids", too_long}}, "ids", "17 tokens is more than the model's 16 positions");
  expect_field("/api/model/run", {{"ids", json::array()}}, "ids", "no tokens");
  expect_field("/api/model/run", {{"text", "hello"}}, "text", "has no tokenizer");
  expect_field("/api/model/run", json::object(), "text", "missing");
  expect_field("/api/model/run", {{"ids", {1}}, {"top_k", 0}}, "top_k", "0 is not a whole number from 1 to 100");
  expect_field("/api/model/run", {{"ids", {1}}, {"top_k", 101}}, "top_k", "101 is not a whole number from 1 to 100");
  expect_field("/api/model/run", {{"ids", {1}}, {"layer", 0}}, "layer", "unknown field");
  expect_field("/api/model/run", {{"ids", {1}}, {"colour", "red"}}, "colour", "unknown field");
  const auto head = [](const json& spec) { return json{{"scenario", {{"model", spec}}}}; };
  expect_field("/api/attention", head({{"ids", kModelIds}, {"layer", 2}, {"head", 0}}), "scenario.model.layer",
               "head 2.0 does not exist");
  expect_field("/api/attention", head({{"ids", kModelIds}, {"layer", 1}, {"head", 4}}), "scenario.model.head",
               "head 1.4 does not exist");
  expect_field("/api/attention", head({{"ids", too_long}, {"layer", 1}, {"head", 0}}), "scenario.model.ids",
               "more than the model's 16 positions");
  expect_field("/api/attention", head({{"ids", {50}}, {"layer", 1}, {"head", 0}}), "scenario.model.ids[0]",
               "outside the vocabulary");
  expect_field("/api/attention", head({{"ids", {1}}, {"head", 0}}), "scenario.model.layer", "missing");
  json with_sentence = head({{"ids", kModelIds}, {"layer", 1}, {"head", 2}});
  with_sentence["options"] = {{"sentence", "the cat"}};
  expect_field("/api/attention", with_sentence, "options.sentence", "means nothing for a model's head");
  with_sentence["options"] = {{"add_random_heads", {{{"seed", 1}}}}};
  expect_field("/api/attention", with_sentence, "options.add_random_heads", "means nothing");
  // and the server keeps serving
  EXPECT_EQ(post_json("/api/model/run", {{"ids", {1, 2}}})["ids"], (json{1, 2}));
}

// A tiny GPT-2 with the real vocabulary and tokenizer (tests/model/vocabulary_model.hpp).
attnlab::ModelDir vocabulary_model() {
  return attnlab::open_model_dir(attnlab::test::write_vocabulary_model(
                                     std::filesystem::path(ATTNLAB_TEST_TMP) / "gpt2-vocab", ATTNLAB_GPT2_VOCAB_DIR)
                                     .string());
}

TEST(ModelApiText, TextGoesThroughTheModelsTokenizerAndTokensKeepTheirSpaces) {
  const attnlab::ModelDir m = vocabulary_model();
  EXPECT_EQ(attnlab::api_model(&m)["tokenizer"], true);
  const json run = json::parse(attnlab::api_model_run(&m, {{"text", "Hello world"}, {"weights", false}}));
  EXPECT_EQ(run["ids"], (json{15496, 995}));
  EXPECT_EQ(run["tokens"], (json{"Hello", " world"}));
  // a head of it, on text, through the API function
  const json trace =
      attnlab::api_attention({{"scenario", {{"model", {{"text", "Hello world"}, {"layer", 0}, {"head", 1}}}}}}, &m);
  EXPECT_EQ(trace["tokens"], (json{"Hello", " world"}));
  // a character GPT-2 splits into byte tokens: each is sent as valid UTF-8 (U+FFFD for a
  // partial character), and the reply still parses
  const json emoji = json::parse(attnlab::api_model_run(&m, {{"text", "\xF0\x9F\xA4\x97!"}, {"weights", false}}));
  EXPECT_EQ(emoji["tokens"].size(), emoji["ids"].size());
  // over the model's 32 positions, named as "text"
  try {
    (void)attnlab::api_model_run(
        &m, {{"text", std::string(200, 'a') + " b c d e f g h i j k l m n o p q r s t u v w x y z"}});
    ADD_FAILURE() << "no error";
  } catch (const attnlab::InputError& e) {
    EXPECT_EQ(e.field(), "text");
    EXPECT_THAT(e.what(), ::testing::HasSubstr("more than the model's 32 positions"));
  }
}

TEST_F(ModelApi, AModelThatIsNotATrainingRunHasNoTrainingAndNoSteps) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/api/training");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), (json{{"training", false}, {"run", nullptr}, {"name", "tiny-f32"}}));
  expect_field("/api/model/run", {{"ids", kModelIds}, {"step", 0}}, "step", "tiny-f32 has no checkpoints");
}

// ---- attribution (docs/api.md, "Attribution") ------------------------------------------

// The quick read-outs: the same numbers the library (and so the CLI's --json) computes.
TEST_F(ModelApi, AttributeGivesDlaTheLensAndTheMixingOfThePrediction) {
  const json reply = post_json("/api/model/attribute", {{"ids", kModelIds}, {"contrast", 4}});
  const attnlab::LogitAttribution a =
      attnlab::attribute_logit(model_->model, kModelIds, {.position = std::nullopt, .target = -1, .contrast = 4});
  const json& dla = reply["attribution"];
  EXPECT_EQ(dla["target"], a.target);
  EXPECT_EQ(dla["contrast"], 4);
  EXPECT_EQ(dla["logit"].get<double>(), a.logit);
  ASSERT_EQ(dla["heads"].size(), 2u);
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t h = 0; h < 4; ++h)
      EXPECT_EQ(dla["heads"][l][h].get<double>(), a.heads[l * 4 + h]) << l << "." << h;
  EXPECT_EQ(dla["by_source"].get<std::vector<double>>(), a.by_source);
  const attnlab::LogitLens lens = attnlab::logit_lens(model_->model, kModelIds, a.target);
  ASSERT_EQ(reply["lens"]["rows"].size(), 3u);
  EXPECT_EQ(reply["lens"]["rows"][2]["cells"][8]["top"], lens.cells[2 * lens.n + 8].top);
  const json& mixing = reply["mixing"];
  double rollout = 0;
  for (const json& x : mixing["rollout"])
    rollout += x.get<double>();
  EXPECT_NEAR(rollout, 1.0, 1e-9);
  EXPECT_EQ(mixing["attention"].size(), 2u);
  EXPECT_EQ(mixing["attention"][0].size(), 4u);
  expect_field("/api/model/attribute", {{"ids", kModelIds}, {"target", 40}}, "target",
               "token id 40 is outside the vocabulary (0 to 39)");
  expect_field("/api/model/attribute", {{"ids", kModelIds}, {"position", 9}}, "position",
               "9 is past the last token (positions 0 to 8)");
  expect_field("/api/model/attribute", {{"ids", kModelIds}, {"layer", 1}}, "layer", "unknown field");
}

// The long work as a job: started (202), followed to its end, its result the library's.
TEST_F(ModelApi, AnalysisRunsTheVerdictPatchingAndEvictionAsAJobThePageFollows) {
  httplib::Client c("127.0.0.1", port_);
  const auto finished = [&] {
    json job;
    for (int tries = 0; tries < 3000; ++tries) {
      auto r = c.Get("/api/model/analysis");
      if (!r) return json();
      job = json::parse(r->body);
      if (job["state"] != "running") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return job;
  };
  const json started = post_json("/api/model/analysis", {{"kind", "verdict"}, {"ids", kModelIds}}, 202);
  EXPECT_EQ(started["kind"], "verdict");
  const json job = finished();
  ASSERT_EQ(job["state"], "done") << job.dump().substr(0, 400);
  EXPECT_EQ(job["id"], started["id"]);
  EXPECT_EQ(job["done"], job["total"]) << "the last stage's progress is complete";
  const attnlab::Verdict v = attnlab::verdict(model_->model, kModelIds);
  EXPECT_EQ(job["result"]["metric"].get<double>(), v.metric);
  EXPECT_EQ(job["result"]["tokens_intervened"]["erasure"].get<std::vector<double>>(), v.token_interventions[0].values);
  EXPECT_EQ(job["result"]["agreements"].size(), v.agreements.size());

  std::vector<int> corrupt = kModelIds;
  corrupt[2] = 11;
  const json patching =
      post_json("/api/model/analysis", {{"kind", "patch"}, {"clean_ids", kModelIds}, {"corrupt_ids", corrupt}}, 202);
  EXPECT_GT(patching["id"].get<int>(), started["id"].get<int>());
  const json patched = finished();
  ASSERT_EQ(patched["state"], "done") << patched.dump().substr(0, 400);
  const attnlab::ResidualPatching p = attnlab::patch_residual(model_->model, kModelIds, corrupt);
  ASSERT_EQ(patched["result"]["heads"].size(), 2u);
  EXPECT_EQ(patched["result"]["heads"][1][3].get<double>(), p.heads_restored[7]);
  EXPECT_EQ(patched["result"]["rows"][0]["restored"][2].get<double>(), p.restored[2]);

  // Eviction: the library's measures; a file of texts is the command's and Python's alone.
  const json evicting =
      post_json("/api/model/analysis",
                {{"kind", "evict"}, {"ids", kModelIds}, {"budget", {3}}, {"policy", {"h2o", "effect"}}}, 202);
  const json evicted = finished();
  ASSERT_EQ(evicted["state"], "done") << evicted.dump().substr(0, 400);
  EXPECT_EQ(evicted["id"], evicting["id"]);
  attnlab::EvictionOptions eviction;
  eviction.budgets = {3};
  eviction.policies = {attnlab::EvictionPolicy::h2o, attnlab::EvictionPolicy::effect};
  const std::vector<std::vector<int>> texts = {kModelIds};
  const attnlab::EvictionResult e = attnlab::evict(model_->model, texts, eviction);
  ASSERT_EQ(evicted["result"]["results"].size(), 2u);
  EXPECT_EQ(evicted["result"]["results"][1]["loss"].get<double>(), e.results[1].loss);
  EXPECT_EQ(evicted["result"]["full"]["loss"].get<double>(), e.full.loss);
  expect_field("/api/model/analysis", {{"kind", "evict"}, {"ids", kModelIds}, {"texts", "/etc/passwd"}}, "texts",
               "unknown field");
  expect_field("/api/model/analysis", {{"kind", "evict"}, {"ids", kModelIds}, {"policy", {"lru"}}}, "policy[0]",
               "not a choice");
  expect_field("/api/model/analysis", {{"kind", "evict"}, {"sequences", {{3, 17}, {8}}}}, "sequences[1]",
               "fewer than 2 tokens");
  expect_field("/api/model/analysis", {{"kind", "evict"}, {"ids", kModelIds}, {"sequences", {{3, 17}}}}, "text",
               "give one of");
  // A survey (docs/survey.md) of token-id sequences (the fixture has no tokenizer): the command's numbers.
  const json surveying =
      post_json("/api/model/analysis", {{"kind", "survey"}, {"sequences", {kModelIds, {3, 17, 3, 17, 5}}}}, 202);
  const json surveyed = finished();
  ASSERT_EQ(surveyed["state"], "done") << surveyed.dump().substr(0, 400);
  EXPECT_EQ(surveyed["id"], surveying["id"]);
  EXPECT_EQ(surveyed["done"], surveyed["total"]);
  attnlab::SurveyRequest survey_request;
  survey_request.sequences = {kModelIds, {3, 17, 3, 17, 5}};
  const attnlab::SurveyPlan plan = attnlab::price_survey(*model_, survey_request);
  const json survey = attnlab::survey_json(*model_, plan, attnlab::run_survey(*model_, plan, std::nullopt));
  EXPECT_EQ(surveyed["result"]["heads"], survey["heads"]);
  EXPECT_EQ(surveyed["result"]["documents"], 2);
  expect_field("/api/model/analysis", {{"kind", "survey"}, {"documents", {"a text"}}}, "documents",
               "this model has no tokenizer");
  expect_field("/api/model/analysis", {{"kind", "survey"}, {"sequences", {{3, 99}}}}, "sequences[0][1]",
               "outside the vocabulary");
  expect_field("/api/model/analysis", {{"kind", "survey"}, {"sequences", {{3, 17}, json::array()}}}, "sequences[1]",
               "is empty; give each sequence at least one token id, or leave it out");
  // The finder's page is of a finished survey: a partial one (a shard's sums) with a page is refused, on every face.
  survey_request.partial = true;
  survey_request.html = "finder.html";
  try {
    attnlab::price_survey(*model_, survey_request);
    ADD_FAILURE() << "a partial survey with a page was not refused";
  } catch (const attnlab::InputError& e) {
    EXPECT_EQ(e.field(), "html");
    EXPECT_THAT(e.message(), ::testing::HasSubstr("a partial survey gives the sums to merge"));
  }
  expect_field("/api/model/analysis", {{"kind", "survey"}, {"texts", "/etc/passwd"}}, "texts", "unknown field");
  expect_field("/api/model/analysis", {{"kind", "survey"}}, "texts", "give a file of texts");

  const json patch =
      post_json("/api/model/analysis", {{"kind", "patch"}, {"clean_ids", kModelIds}, {"corrupt_ids", corrupt}}, 202);
  ASSERT_EQ(finished()["state"], "done");

  expect_field("/api/model/analysis", {{"ids", kModelIds}}, "kind",
               "expected \"verdict\", \"patch\", \"evict\" or \"survey\"");
  expect_field("/api/model/analysis", {{"kind", "patch"}, {"clean_ids", kModelIds}}, "corrupt", "missing");
  expect_field("/api/model/analysis", {{"kind", "patch"}, {"clean_ids", kModelIds}, {"corrupt_ids", {3, 17}}},
               "corrupt_ids", "give runs of the same length in tokens");
  expect_field("/api/model/analysis",
               {{"kind", "patch"}, {"clean_ids", kModelIds}, {"corrupt_ids", corrupt}, {"steps", 4}}, "steps",
               "unknown field");
  expect_field("/api/model/analysis", {{"kind", "verdict"}, {"ids", kModelIds}, {"position", 9}}, "position",
               "9 is past the last token");
  expect_field("/api/model/analysis", {{"kind", "verdict"}, {"ids", kModelIds}, {"texts", "/etc/passwd"}}, "texts",
               "unknown field");
  expect_field("/api/model/analysis", {{"kind", "verdict"}, {"ids", kModelIds}, {"steps", 0}}, "steps",
               "from 1 to 256");
  // A bad request leaves the last job as it was.
  EXPECT_EQ(finished()["id"], patch["id"]);
}

// Cancelling stops the job at its next check; a new job replaces a running one.
TEST(ModelApiJobs, AJobCancelledStopsAndSaysSo) {
  const auto model = std::make_shared<const attnlab::ModelDir>(vocabulary_model());
  const attnlab::ModelSources models(model, std::filesystem::path(ATTNLAB_TEST_TMP) / "no-runs");
  attnlab::AnalysisJobs jobs(models);
  EXPECT_EQ(jobs.view()["state"], "idle");
  // 256 gradients over GPT-2's 50,257-token vocabulary: long enough to be cancelled in flight.
  const json started =
      jobs.start({{"kind", "verdict"}, {"text", "The cat sat on the mat and the dog"}, {"steps", 256}});
  EXPECT_EQ(started["state"], "running");
  (void)jobs.cancel();
  json job;
  for (int tries = 0; tries < 3000; ++tries) {
    job = jobs.view();
    if (job["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(job["state"], "cancelled") << job.dump().substr(0, 300);
  EXPECT_TRUE(job["result"].is_null());
  jobs.shut_down();
  EXPECT_THROW((void)jobs.start({{"kind", "verdict"}, {"text", "The cat"}}), attnlab::WorkCancelled);
}

// A Llama of 2 layers × 2 heads (one KV head) and 4,096 positions, seeded random weights.
static attnlab::ModelDir long_llama() {
  const nlohmann::json config = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
      "max_position_embeddings": 4096, "vocab_size": 64, "tie_word_embeddings": true})");
  const attnlab::ModelConfig c = attnlab::parse_model_config(config, "config.json");
  std::vector<float> parameters(c.parameters());
  attnlab::SplitMix64 rng(11);
  for (float& x : parameters)
    x = static_cast<float>(0.2 * rng.normal());
  return {"long-llama", attnlab::unflatten(c, parameters), std::nullopt};
}

// The lab asks every run for sparse rows beside the weights: it gets the weights while
// layers × heads × n² fits the server's 2^24, and past that each head's rows in brief, the
// same as asked for alone. A Llama of 2 layers × 2 heads and 4,096 positions made here:
// 2,100 tokens are 17.6 million weights.
TEST(ModelApiLong, AskedWithWeightsSparseRowsAnswerOnlyPastTheWeightsLimit) {
  const attnlab::ModelDir m = long_llama();
  EXPECT_EQ(attnlab::api_model(&m)["max_run_weights"], attnlab::kMaxApiModelWeights);
  const auto ids = [&](std::size_t n) {
    json out = json::array();
    for (std::size_t i = 0; i < n; ++i)
      out.push_back((i * 7 + 3) % 64);
    return out;
  };
  const json short_run = json::parse(attnlab::api_model_run(&m, {{"ids", ids(100)}, {"sparse", 4}}));
  EXPECT_EQ(short_run["weights"][1][1].size(), 100u) << "within the limit: the weights";
  EXPECT_FALSE(short_run.contains("sparse"));
  const json long_run = json::parse(attnlab::api_model_run(&m, {{"ids", ids(2100)}, {"sparse", 4}}));
  EXPECT_TRUE(long_run["weights"].is_null()) << "past it: no weights";
  EXPECT_EQ(long_run["heads"].size(), 4u) << "the detectors from the same pass";
  ASSERT_EQ(long_run["sparse"]["keys"][1][1].size(), 2100u);
  EXPECT_EQ(long_run["sparse"]["keys"][1][1][2099].size(), 4u);
  const json alone = json::parse(attnlab::api_model_run(&m, {{"ids", ids(2100)}, {"sparse", 4}, {"weights", false}}));
  EXPECT_EQ(alone["sparse"], long_run["sparse"]);
  EXPECT_EQ(alone["top_k"], long_run["top_k"]);
}

// One head of a long run opened in the lab: POST /api/model/map gives the head pooled to the
// cells asked for, from any length (the same Llama at 2,100 tokens: 4.4 million weights of
// one head, none kept), and a window of it a weight a cell; bad fields named.
TEST(ModelApiLong, AHeadMapAtAnyLength) {
  const attnlab::ModelDir m = long_llama();
  const attnlab::ModelSources models(&m);
  json ids = json::array();
  for (std::size_t i = 0; i < 2100; ++i)
    ids.push_back((i * 7 + 3) % 64);
  const json whole = attnlab::api_model_map(models, {{"ids", ids}, {"head", "1.1"}, {"cells", 100}});
  EXPECT_EQ(whole["tile"], 21);
  ASSERT_EQ(whole["weights"].size(), 100u);
  ASSERT_EQ(whole["weights"][99].size(), 100u);
  EXPECT_TRUE(whole["weights"][0][1].is_null()) << "above the diagonal";
  EXPECT_EQ(whole["tokens"].size(), 2100u);
  // the window around the last row's cell: its weights, one a cell, include that cell's largest
  const json window = attnlab::api_model_map(
      models, {{"ids", ids}, {"head", "1.1"}, {"cells", 48}, {"query", 2052}, {"key", whole["key"][99][0]}});
  EXPECT_EQ(window["tile"], 1);
  EXPECT_EQ(window["rows"], 48);
  const std::size_t i = whole["query"][99][0].get<std::size_t>() - 2052;
  EXPECT_NEAR(window["weights"][i][0].get<double>(), whole["weights"][99][0].get<double>(), 1e-6);
  for (const auto& [body, field] : {std::pair{json{{"head", "2.0"}}, "head"},
                                    {json{{"head", "1.0"}, {"cells", 0}}, "cells"},
                                    {json{{"head", "1.0"}, {"query", 2100}}, "query"}}) {
    json request = body;
    request["ids"] = ids;
    try {
      (void)attnlab::api_model_map(models, request);
      ADD_FAILURE() << body.dump() << " was not refused";
    } catch (const attnlab::InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  }
}
