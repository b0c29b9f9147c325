// The lab's API through real HTTP: a LabServer on a free loopback port, a cpp-httplib
// client, every endpoint and every kind of bad request, and the server still serving after.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "attnlab/api.hpp"
#include "attnlab/server.hpp"

using nlohmann::json;

namespace {

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new attnlab::LabServer();
    port_ = server_->bind("127.0.0.1", 0);
    thread_ = new std::thread([] { server_->run(); });
  }
  static void TearDownTestSuite() {
    server_->stop();
    thread_->join();
    delete thread_;
    delete server_;
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }
  httplib::Result post(const std::string& body) { return client().Post("/api/attention", body, "application/json"); }
  json post_json(const json& body, int expected_status = 200) {
    auto r = post(body.dump());
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, expected_status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json; charset=utf-8");
    return json::parse(r->body);
  }
  // A bad request: 400 and an error naming what is wrong.
  void expect_bad_request(const json& body, const std::string& message) {
    SCOPED_TRACE(body.dump().substr(0, 200));
    const json reply = post_json(body, 400);
    ASSERT_TRUE(reply.contains("error"));
    EXPECT_NE(reply["error"].get<std::string>().find(message), std::string::npos) << reply["error"];
  }

  static attnlab::LabServer* server_;
  static std::thread* thread_;
  static int port_;
};
attnlab::LabServer* Api::server_ = nullptr;
std::thread* Api::thread_ = nullptr;
int Api::port_ = 0;

json three_tokens_object() { return json::parse(std::string(*attnlab::api_scenario_file("three-tokens"))); }

}  // namespace

TEST_F(Api, HealthSaysOkAndTheVersion) {
  auto r = client().Get("/api/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["version"], ATTNLAB_VERSION);
}

TEST_F(Api, ScenariosListsTheBundledOnesDefaultFirst) {
  auto r = client().Get("/api/scenarios");
  ASSERT_TRUE(r);
  const json j = json::parse(r->body);
  ASSERT_GE(j["scenarios"].size(), 6u);
  EXPECT_EQ(j["scenarios"][0]["name"], "three-tokens");
  EXPECT_EQ(j["scenarios"][0]["default"], true);
}

TEST_F(Api, ScenarioFileIsTheBundledFileAndUnknownIs404) {
  auto r = client().Get("/api/scenarios/previous-token");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["name"], "previous-token");
  auto missing = client().Get("/api/scenarios/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(json::parse(missing->body)["error"].get<std::string>().find("unknown scenario \"nope\""), std::string::npos);
}

TEST_F(Api, AttentionOnThreeTokensReturnsTheSeedsWeights) {
  const json t = post_json({{"scenario", "three-tokens"}});
  const json& w = t["heads"][0]["weights"][2];
  EXPECT_NEAR(w[0].get<double>(), 0.3057, 5e-5);
  EXPECT_NEAR(w[1].get<double>(), 0.0743, 5e-5);
  EXPECT_NEAR(w[2].get<double>(), 0.6200, 5e-5);
  EXPECT_NEAR(t["output"][2][0].get<double>(), 0.6943, 5e-5);
  EXPECT_NEAR(t["output"][2][1].get<double>(), 0.9257, 5e-5);
  EXPECT_EQ(t["scenario_json"]["name"], "three-tokens");
}

TEST_F(Api, AttentionAcceptsAScenarioObjectAndOptions) {
  const json t = post_json({{"scenario", three_tokens_object()},
                            {"options", {{"causal", true}, {"temperature", 0.5}, {"mask_tokens", {1}}}}});
  EXPECT_TRUE(t["heads"][0]["logits"][0][1].is_null());
  EXPECT_EQ(t["heads"][0]["weights"][2][1].get<double>(), 0.0);
  EXPECT_EQ(t["temperature"].get<double>(), 0.5);
}

TEST_F(Api, PermuteReordersTokensAndOutputsFollow) {
  const json base = post_json({{"scenario", "three-tokens"}});
  const json moved = post_json({{"scenario", "three-tokens"}, {"options", {{"permute", {2, 0, 1}}}}});
  EXPECT_EQ(moved["tokens"][0], "t3");
  EXPECT_NEAR(moved["output"][0][0].get<double>(), base["output"][2][0].get<double>(), 1e-12);
}

TEST_F(Api, SentenceRetokenisesAndTheSameWordGetsTheSameVector) {
  const json t = post_json({{"scenario", "previous-token"}, {"options", {{"sentence", "a dog saw a cat"}}}});
  EXPECT_EQ(t["tokens"], json::parse(R"(["a","dog","saw","a","cat"])"));
  const json& x = t["scenario_json"]["embeddings"];
  EXPECT_EQ(x[0], x[3]) << "the word table is deterministic";
  EXPECT_EQ(x[1][0].get<double>(), 1.0) << "the scenario's constant first coordinate is kept";
  EXPECT_EQ(x[1][1], json::parse(R"([1, -0.7, -0.1])")[1]) << "a known word (dog) keeps its embedding";
  // The head is positional: it still looks at the previous token.
  const json& w = t["heads"][0]["weights"][4];
  EXPECT_GT(w[3].get<double>(), 0.9);
}

TEST_F(Api, RandomHeadsAreReproducibleAndRemovable) {
  const json add = {{"scenario", "three-tokens"}, {"options", {{"add_random_heads", {{{"seed", 7}}}}}}};
  const json a = post_json(add), b = post_json(add);
  ASSERT_EQ(a["heads"].size(), 2u);
  EXPECT_EQ(a["heads"][1]["weights"], b["heads"][1]["weights"]);
  EXPECT_EQ(a["heads"][1]["random_seed"], 7);
  const json removed = post_json({{"scenario", "multi-head"}, {"options", {{"remove_heads", {0, 2}}}}});
  ASSERT_EQ(removed["heads"].size(), 1u);
  EXPECT_EQ(removed["heads"][0]["name"], "same token");
}

TEST_F(Api, BadRequestsGet400WithTheFieldNamed) {
  expect_bad_request({{"scenario", "nope"}}, "scenario: unknown scenario \"nope\"");
  expect_bad_request({{"options", json::object()}}, "scenario: missing");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"temperature", 0}}}}, "temperature: must be a finite number > 0");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"temperature", "hot"}}}}, "options.temperature");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"mask_tokens", {9}}}}}, "mask_tokens[0]: token 9 does not exist");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"permute", {0, 0, 1}}}}}, "permute: index 0 appears twice");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"colour", "red"}}}}, "options.colour: unknown option");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"remove_heads", {0}}}}}, "keep at least one");
  expect_bad_request({{"scenario", "cross-attention"}, {"options", {{"causal", true}}}}, "causal: a causal mask needs");
  json ragged = three_tokens_object();
  ragged["heads"][0]["w_k"] = json::parse("[[1, 1], [0]]");
  expect_bad_request({{"scenario", ragged}}, "scenario.heads[0].w_k[1]: ragged matrix");
}

TEST_F(Api, TooManyTokensOrTooLargeATraceIsRefused) {
  json big = three_tokens_object();
  big["tokens"] = std::vector<std::string>(4097, "w");
  expect_bad_request({{"scenario", big}}, "4097 tokens is more than the limit of 4096");
  json wide = three_tokens_object();
  wide["tokens"] = std::vector<std::string>(600, "w");
  wide["embeddings"] = std::vector<std::vector<int>>(600, {1, 0});
  expect_bad_request({{"scenario", wide}}, "the API returns at most");
}

TEST_F(Api, MalformedJsonIs400AndTheServerKeepsServing) {
  for (const char* body : {"{\"scenario\": ", "not json", "[1, 2", "{\"scenario\": NaN}", "{\"scenario\": 1e999}"}) {
    auto r = post(body);
    ASSERT_TRUE(r) << body;
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_NE(json::parse(r->body)["error"].get<std::string>().find("request body"), std::string::npos) << r->body;
  }
  expect_bad_request(json::array({1, 2}), "body: expected a JSON object");
  auto health = client().Get("/api/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(Api, BodyOverOneMebibyteIs413WithAJsonError) {
  const std::string huge(attnlab::kMaxRequestBytes + 10, ' ');
  auto r = post(huge);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(json::parse(r->body)["error"].get<std::string>().find("larger than"), std::string::npos);
  auto health = client().Get("/api/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(Api, UnknownPathsAre404WithAJsonError) {
  for (const char* path : {"/api/nothing", "/deep/path/x", "/missing.js"}) {
    auto r = client().Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_TRUE(json::parse(r->body).contains("error")) << path;
  }
}

TEST_F(Api, ThePageIsServedFromTheBinary) {
  auto r = client().Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(r->body.find("<html"), std::string::npos);
  for (const char* remote : {"src=\"http", "href=\"http", "src=\"//", "href=\"//"})
    EXPECT_EQ(r->body.find(remote), std::string::npos) << "no CDN or remote URL: " << remote;
}

TEST_F(Api, TracesAreNotCompressedEvenWhenTheBrowserAcceptsBrotli) {
  // Brotli at cpp-httplib's setting takes seconds for a trace of a few MB.
  httplib::Client c = client();
  const httplib::Headers headers{{"Accept-Encoding", "gzip, deflate, br"}};
  auto r = c.Post("/api/attention", headers, R"({"scenario": "multi-head"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Encoding"), "");
  EXPECT_NO_THROW((void)json::parse(r->body));
}
