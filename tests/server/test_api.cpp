// The lab's API through real HTTP: a LabServer on a free loopback port, a cpp-httplib
// client, every endpoint and every kind of bad request, and the server still serving after.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "../model/vocabulary_model.hpp"
#include "../sanitizers.hpp"
#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/memory.hpp"
#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/report/input_document.hpp"
#include "attnlab/report/packed_reply.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/server.hpp"

using nlohmann::json;

namespace {

// A LabServer (with a model, or none) on a free loopback port, serving from its own thread
// for as long as the object lives: one per test suite. `allowed_hosts` are given to
// allow_host() (`attnlab serve --allow-host`).
struct RunningServer {
  explicit RunningServer(std::shared_ptr<const attnlab::ModelDir> model = nullptr,
                         const std::vector<std::string>& allowed_hosts = {"lab.test"})
      : server(std::move(model)), port(bind_allowing(server, allowed_hosts)), thread([this] { server.run(); }) {}
  RunningServer(std::shared_ptr<const attnlab::ModelDir> model, const std::filesystem::path& runs)
      : server(std::move(model), runs), port(bind_allowing(server, {"lab.test"})), thread([this] { server.run(); }) {}
  static int bind_allowing(attnlab::LabServer& server, const std::vector<std::string>& allowed_hosts) {
    for (const std::string& name : allowed_hosts)
      server.allow_host(name);
    return server.bind("127.0.0.1", 0);
  }
  ~RunningServer() {
    server.stop();
    thread.join();
  }
  attnlab::LabServer server;
  int port;
  std::thread thread;
};

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    running_ = new RunningServer();
    port_ = running_->port;
  }
  static void TearDownTestSuite() { delete running_; }

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
    // The field comes apart from the message: the error text is "field: message".
    ASSERT_TRUE(reply.contains("field"));
    if (!reply["field"].is_null()) {
      const std::string field = reply["field"];
      EXPECT_EQ(reply["error"].get<std::string>().rfind(field + ": ", 0), 0u) << reply;
    }
  }

  static RunningServer* running_;
  static int port_;
};
RunningServer* Api::running_ = nullptr;
int Api::port_ = 0;

json three_tokens_object() { return json::parse(std::string(*attnlab::api_scenario_file("three-tokens"))); }

json post_to(httplib::Client client, const std::string& path, const json& body, int expected_status) {
  auto r = client.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response";
  if (!r) return {};
  EXPECT_EQ(r->status, expected_status) << r->body;
  return json::parse(r->body);
}

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
  EXPECT_NE(json::parse(missing->body)["error"].get<std::string>().find("unknown scenario \"nope\""),
            std::string::npos);
}

TEST_F(Api, AttentionOnThreeTokensReturnsTheWorkedExamplesWeights) {
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
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"temperature", 0}}}},
                     "temperature: must be a finite number > 0");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"temperature", "hot"}}}}, "options.temperature");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"mask_tokens", {9}}}}},
                     "mask_tokens[0]: token 9 does not exist");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"permute", {0, 0, 1}}}}},
                     "permute: index 0 appears twice");
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"colour", "red"}}}},
                     "options.colour: unknown option");
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

// 70,000 levels of [ in a 140 KB body used to crash the server: the wrong-type message
// serialised the whole value recursively. Now the depth is checked before parsing, and no
// message prints a list or an object, only what it is.
TEST_F(Api, DeeplyNestedBodiesAre400AndTheServerKeepsServing) {
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  for (const std::string& body : {R"({"scenario":"three-tokens","options":{"permute":)" + deep + "}}",
                                  R"({"scenario":"three-tokens","kernel":)" + deep + "}"}) {
    auto r = post(body);
    ASSERT_TRUE(r) << "the server answered";
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("nested more than 64 levels deep"), std::string::npos) << r->body.substr(0, 200);
  }
  // Within the depth limit, a wrong type is named, not printed.
  expect_bad_request({{"scenario", "three-tokens"}, {"options", {{"permute", {{{{1}}}}}}}},
                     "options.permute[0]: expected a whole number >= 0 but got a list of 1 items");
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

// ---- hostile clients: who may drive the server, and how much it reads and does -----------

namespace {

// A reply as a raw socket client reads it: the status and the body after the headers.
struct RawReply {
  int status = 0;
  std::string headers, body;
};

// Sends `head` (the request line and headers, ending in a blank line) to the server on a raw
// socket, then up to `body_bytes` of chunked body in 64 KiB chunks for as long as the server
// reads, and reads the reply. The body is made as it is sent: nothing the size of the whole
// is ever held here.
RawReply raw_chunked_request(int port, const std::string& head, std::size_t body_bytes) {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const auto send_all = [&](const std::string& bytes) {
    for (std::size_t sent = 0; sent < bytes.size();) {
      pollfd p{sock, POLLOUT | POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0 || (p.revents & (POLLIN | POLLERR | POLLHUP))) return false;  // it answered
      const ssize_t n = send(sock, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  };
  const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";  // 64 KiB of JSON whitespace
  if (send_all(head))
    for (std::size_t sent = 0; sent < body_bytes && send_all(chunk); sent += 0x10000) {
    }
  RawReply reply;
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = recv(sock, buffer, sizeof buffer, 0)) > 0;)
    text.append(buffer, static_cast<std::size_t>(n));
  close(sock);
  const std::size_t blank = text.find("\r\n\r\n");
  if (text.rfind("HTTP/1.1 ", 0) != 0 || blank == std::string::npos) return reply;
  reply.status = std::stoi(text.substr(9, 3));
  reply.headers = text.substr(0, blank);
  reply.body = text.substr(blank + 4);
  return reply;
}

}  // namespace

TEST_F(Api, RequestsForAnotherHostAre403NamingTheHostAndTheFlag) {
  const std::string port = std::to_string(port_);
  for (const std::string& host : std::vector<std::string>{"evil.example:" + port, "evil.example", "127.0.0.1:1",
                                                          "localhost.evil.example:" + port, "lab.test:1"}) {
    SCOPED_TRACE(host);
    auto r = client().Get("/api/health", {{"Host", host}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403);
    const json reply = json::parse(r->body);
    EXPECT_EQ(reply["field"], "Host");
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr("\"" + host + "\""));
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr("--allow-host"));
  }
  // A POST to a foreign host is refused before its body is read, and the page too.
  auto post = client().Post("/api/attention", {{"Host", "evil.example:" + port}}, R"({"scenario": "three-tokens"})",
                            "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 403);
  // Its own names, with or without the port, and a name given by --allow-host.
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1:" + port, "127.0.0.1", "localhost:" + port, "LOCALHOST", "[::1]:" + port,
                                "[::1]", "lab.test:" + port, "lab.test"}) {
    SCOPED_TRACE(host);
    auto r = client().Get("/", {{"Host", host}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
}

TEST_F(Api, ForeignOriginsAre403AndTheServersOwnOriginIsServed) {
  const std::string port = std::to_string(port_);
  for (const std::string& origin :
       std::vector<std::string>{"http://evil.example", "http://evil.example:" + port, "https://127.0.0.1:" + port,
                                "http://127.0.0.1", "http://localhost:3000", "null"}) {
    SCOPED_TRACE(origin);
    auto r =
        client().Post("/api/attention", {{"Origin", origin}}, R"({"scenario": "three-tokens"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403);
    const json reply = json::parse(r->body);
    EXPECT_EQ(reply["field"], "Origin");
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr(origin));
  }
  for (const std::string& origin :
       {"http://127.0.0.1:" + port, "http://localhost:" + port, "http://[::1]:" + port, "http://lab.test:" + port}) {
    SCOPED_TRACE(origin);
    auto r =
        client().Post("/api/attention", {{"Origin", origin}}, R"({"scenario": "three-tokens"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
}

TEST_F(Api, PostsMustSayTheyAreJsonElse415) {
  const std::string body = R"({"scenario": "three-tokens"})";
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                           "application/jsonx", "application/json; charset=latin1", ""}) {
    SCOPED_TRACE(type);
    auto r = client().Post("/api/attention", body, type);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 415);
    EXPECT_EQ(json::parse(r->body)["field"], "Content-Type");
  }
  for (const char* type : {"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"}) {
    SCOPED_TRACE(type);
    auto r = client().Post("/api/attention", body, type);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  auto compressed = client().Post("/api/cost", {{"Content-Encoding", "gzip"}}, R"({"tokens": 3})", "application/json");
  ASSERT_TRUE(compressed);
  EXPECT_EQ(compressed->status, 415);
}

TEST_F(Api, AWrongMethodOnAKnownPathIs405WithAllow) {
  auto get = client().Get("/api/attention");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  EXPECT_THAT(json::parse(get->body)["error"].get<std::string>(), ::testing::HasSubstr("this path takes POST"));
  for (const char* path : {"/api/health", "/", "/api/scenarios/three-tokens"}) {
    SCOPED_TRACE(path);
    auto post = client().Post(path, "{}", "application/json");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 405);
    EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
    auto del = client().Delete(path);
    ASSERT_TRUE(del);
    EXPECT_EQ(del->status, 405);
  }
  auto health = client().Get("/api/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// cpp-httplib 0.11 applies its payload limit to Content-Length only: a chunked body of any
// size was read into memory whole. Now the handler's receiver stops at the limit.
TEST_F(Api, AChunkedBodyOverTheLimitIs413AndTheServerReadsNoMoreThanTheLimit) {
  ASSERT_TRUE(attnlab::memory::heap_counted()) << "the API tests link attnlab::heap_counter";
  const std::string head = "POST /api/attention HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
                           "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::size_t before = attnlab::memory::current_bytes();
  attnlab::memory::reset_peak();
  const RawReply reply = raw_chunked_request(port_, head, std::size_t{200} << 20);  // 200 MiB offered
  EXPECT_EQ(reply.status, 413) << reply.headers;
  EXPECT_THAT(json::parse(reply.body)["error"].get<std::string>(), ::testing::HasSubstr("larger than 1048576 bytes"));
  EXPECT_THAT(reply.headers, ::testing::HasSubstr("Connection: close"));
  // The server held the 1 MiB it read and its buffers, not the body offered.
  EXPECT_LT(attnlab::memory::peak_bytes() - before, std::size_t{4} << 20);
  // A chunked body within the limit is a request like any other.
  httplib::Client c = client();
  auto small = c.Post(
      "/api/attention",
      [](std::size_t offset, httplib::DataSink& sink) {
        const std::string body = R"({"scenario": "three-tokens"})";
        if (offset == 0) sink.write(body.data(), body.size());
        sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200);
  EXPECT_EQ(json::parse(small->body)["scenario"], "three-tokens");
}

TEST_F(Api, BodiesTheServerWillNotReadAreRefusedBeforeReading) {
  const std::string host = "Host: 127.0.0.1:" + std::to_string(port_) + "\r\n";
  // A GET carries no body, and a chunked one to an unknown path is not read either.
  for (const std::string& head : {"GET /api/health HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n",
                                  "POST /api/nothing HTTP/1.1\r\n" + host +
                                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                                  "PUT /api/attention HTTP/1.1\r\n" + host +
                                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    SCOPED_TRACE(head);
    attnlab::memory::reset_peak();
    const std::size_t before = attnlab::memory::current_bytes();
    const RawReply reply = raw_chunked_request(port_, head, std::size_t{64} << 20);
    EXPECT_GE(reply.status, 400);
    EXPECT_LE(reply.status, 405);
    EXPECT_TRUE(json::parse(reply.body).contains("error"));
    EXPECT_LT(attnlab::memory::peak_bytes() - before, std::size_t{4} << 20);
  }
  const RawReply no_length = raw_chunked_request(
      port_, "POST /api/attention HTTP/1.1\r\n" + host + "Content-Type: application/json\r\n\r\n", 0);
  EXPECT_EQ(no_length.status, 411);
}

// A 1 MiB body of [{},{},...] is 350,000 objects: about 28 MB of parsed tree. The values are
// counted before parsing, and a body with more than kMaxRequestJsonValues is refused.
TEST_F(Api, BodiesWithMoreJsonValuesThanTheLimitAre400BeforeParsing) {
  std::string objects = "[{}";
  while (objects.size() < attnlab::kMaxRequestBytes - 8)
    objects += ",{}";
  objects += "]";
  attnlab::memory::reset_peak();
  const std::size_t before = attnlab::memory::current_bytes();
  auto r = post(objects);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(json::parse(r->body)["error"].get<std::string>(),
              ::testing::HasSubstr("JSON values (numbers, strings, lists, objects), more than the limit of 262144"));
  EXPECT_LT(attnlab::memory::peak_bytes() - before, std::size_t{8} << 20) << "the body, not a tree of it";
}

// {"random": i, "d_k": 4096, "d_v": 4096} on a 4096-wide scenario is 402 MB of weights from
// a 9 KB request: priced from the widths before anything is drawn.
TEST_F(Api, RandomHeadsArePricedBeforeTheyAreDrawn) {
  const json wide = {{"format", "attnlab-scenario/1"},
                     {"tokens", {"a"}},
                     {"embeddings", {std::vector<int>(4096, 0)}},
                     {"heads", {{{"random", 1}, {"d_k", 4096}, {"d_v", 4096}}}}};
  attnlab::memory::reset_peak();
  const std::size_t before = attnlab::memory::current_bytes();
  const json refused = post_json({{"scenario", wide}}, 400);
  EXPECT_EQ(refused["field"], "scenario.heads[0]");
  EXPECT_THAT(
      refused["error"].get<std::string>(),
      ::testing::HasSubstr("would bring the heads' weights to 402653184 bytes, more than the limit of 268435456"));
  json narrow = wide;
  narrow["heads"] = {{{"random", 1}, {"d_k", 4}, {"d_v", 4}}};
  const json added = post_json(
      {{"scenario", narrow}, {"options", {{"add_random_heads", {{{"seed", 2}, {"d_k", 4096}, {"d_v", 4096}}}}}}}, 400);
  EXPECT_EQ(added["field"], "options.add_random_heads[0]");
  EXPECT_THAT(added["error"].get<std::string>(), ::testing::HasSubstr("more than the limit of 268435456"));
  // Two heads of 201 MB: the first fits alone, but neither is drawn, since both do not.
  const json half = {{"seed", 3}, {"d_k", 2048}, {"d_v", 2048}};
  const json second = post_json({{"scenario", narrow}, {"options", {{"add_random_heads", {half, half}}}}}, 400);
  EXPECT_EQ(second["field"], "options.add_random_heads[1]");
  EXPECT_LT(attnlab::memory::peak_bytes() - before, std::size_t{32} << 20) << "no head was drawn";
  EXPECT_EQ(post_json({{"scenario", narrow}})["heads"][0]["d_k"], 4);  // within the limits: served
}

TEST_F(Api, TheWorkTheReplyAndTheProbeArePricedWithTheirWidths) {
  // 512 tokens of one head is within the score-cell limit, but 4096-wide it is 12.6 million
  // numbers to send: 315 MB of JSON, 101 MB packed.
  json wide = three_tokens_object();
  wide["tokens"] = std::vector<std::string>(512, "w");
  wide["embeddings"] = std::vector<std::vector<int>>(512, {1, 0});
  wide["heads"] = {{{"random", 1}, {"d_k", 4096}, {"d_v", 4096}}};
  for (const char* encoding : {"json", "packed"}) {
    SCOPED_TRACE(encoding);
    const json reply = post_json({{"scenario", wide}, {"encoding", encoding}}, 400);
    EXPECT_EQ(reply["field"], "scenario");
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr("the reply would be up to"));
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr("more than the limit of 67108864"));
  }
  // The probe runs the scenario once per key: 200 keys of a 4096-wide head is 201 runs of 21 MB.
  json probed = three_tokens_object();
  probed["tokens"] = std::vector<std::string>(200, "w");
  probed["embeddings"] = std::vector<std::vector<int>>(200, {1, 0});
  probed["heads"] = {{{"random", 1}, {"d_k", 4096}, {"d_v", 4096}}};
  const json probe = post_to(client(), "/api/probe", {{"scenario", probed}}, 400);
  EXPECT_EQ(probe["field"], "scenario");
  EXPECT_THAT(probe["error"].get<std::string>(), ::testing::HasSubstr("× 201 runs"));
  EXPECT_THAT(probe["error"].get<std::string>(), ::testing::HasSubstr("more than the limit of 2147483648"));
}

TEST_F(Api, MeasuresArePricedWithTheirInputsAndWeights) {
  // q, k, v and out at 4096 tokens of d_k 32768 are 2 GiB: more than the server measures in.
  const json cost =
      post_to(client(), "/api/cost",
              {{"tokens", 4096}, {"d_model", 32768}, {"heads", 1}, {"layers", 1}, {"measure", true}}, 400);
  EXPECT_EQ(cost["field"], "measure");
  EXPECT_THAT(cost["error"].get<std::string>(), ::testing::HasSubstr("the server measures within 1 GiB"));
  // A one-token cache of a model whose random weights alone are 3 GiB.
  const json kv = post_to(client(), "/api/kv",
                          {{"layers", 1},
                           {"heads", 1},
                           {"kv_heads", 1},
                           {"head_dim", 1024},
                           {"d_model", 262144},
                           {"context", 1},
                           {"measure", true}},
                          400);
  EXPECT_EQ(kv["field"], "measure");
  EXPECT_THAT(kv["error"].get<std::string>(), ::testing::HasSubstr("with their weights take 3.06 GiB"));
}

TEST_F(Api, InvalidUtf8InAPathIs404WithAValidJsonMessage) {
  for (const char* path : {"/%FF", "/api/scenarios/%C3%28", "/x%80y.js", "/api/%FF/deep"}) {
    SCOPED_TRACE(path);
    auto r = client().Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    const json reply = json::parse(r->body);                                               // valid UTF-8 JSON
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr("\xEF\xBF\xBD"));  // U+FFFD for the bad byte
  }
}

TEST_F(Api, AWindowTooLargeAndComputationsThatOverflowAreRefusedNamingTheField) {
  const json window = post_json(
      {{"scenario", "three-tokens"}, {"options", {{"window", std::numeric_limits<std::uint64_t>::max()}}}}, 400);
  EXPECT_EQ(window["field"], "options.window");
  EXPECT_THAT(window["error"].get<std::string>(),
              ::testing::HasSubstr("18446744073709551615 is more than the limit of 4096"));
  const json cold = post_json({{"scenario", "three-tokens"}, {"options", {{"temperature", 1e-320}}}}, 400);
  EXPECT_EQ(cold["field"], "temperature");
  EXPECT_THAT(cold["error"].get<std::string>(), ::testing::HasSubstr("overflow"));
  json huge = three_tokens_object();
  huge["embeddings"][0] = {1e308, 1e308};
  const json big = post_json({{"scenario", huge}}, 400);
  EXPECT_EQ(big["field"], "embeddings");
  EXPECT_THAT(big["error"].get<std::string>(), ::testing::HasSubstr("overflow"));
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
  EXPECT_FALSE(json::parse(r->body, nullptr, false).is_discarded());
  // nor are the page's scripts and its engine (brotli took 30 ms a script)
  for (const char* file : {"/main.js", "/attnlab.wasm"}) {
    auto page = c.Get(file, headers);
    ASSERT_TRUE(page);
    if (page->status == 404) continue;  // a build without the WebAssembly engine
    EXPECT_EQ(page->status, 200) << file;
    EXPECT_EQ(page->get_header_value("Content-Encoding"), "") << file;
  }
}

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

// ---- interventions and POST /api/probe ---------------------------------------------

TEST_F(Api, AttentionInterventionOptionsReportBeforeAfterAndDelta) {
  const json plain = post_json({{"scenario", "multi-head"}});
  EXPECT_TRUE(plain["intervention"].is_null());
  EXPECT_TRUE(plain["heads"][0]["ablation"].is_null());
  EXPECT_EQ(plain["heads"][0]["scale"], 1.0);
  EXPECT_EQ(plain["heads"][0]["mixed"], plain["heads"][0]["output"]);

  const json t =
      post_json({{"scenario", "multi-head"},
                 {"options",
                  {{"ablate_heads", {{{"head", 0}, {"kind", "uniform"}}, "1:mean"}},
                   {"scale_heads", {{{"head", 2}, {"factor", 0.5}}}},
                   {"replace_tokens", {{{"index", 3}, {"word", "cat"}}, {{"index", 4}, {"embedding", {1, 0, 0}}}}},
                   {"mask_tokens", {2}}}}});
  EXPECT_EQ(t["heads"][0]["ablation"], "uniform");
  EXPECT_EQ(t["heads"][1]["ablation"], "mean");
  EXPECT_EQ(t["heads"][2]["scale"], 0.5);
  EXPECT_EQ(t["tokens"][3], "cat");
  EXPECT_NEAR(t["heads"][0]["weights"][9][0].get<double>(), 1.0 / 9.0, 1e-15) << "uniform over the 9 keys left visible";
  EXPECT_EQ(t["scenario_json"]["heads"][1]["ablation"], "mean") << "the effective scenario carries the ablation";
  const json& iv = t["intervention"];
  ASSERT_EQ(iv["applied"].size(), 6u);
  EXPECT_EQ(iv["applied"][0], "replace token 3 \"fox\" by \"cat\"");
  EXPECT_EQ(iv["after"], t["output"]) << "no permutation: rows stay";
  for (std::size_t i = 0; i < 10; ++i) {
    double squares = 0;
    for (std::size_t c = 0; c < 6; ++c) {
      const double d = iv["after"][i][c].get<double>() - iv["before"][i][c].get<double>();
      EXPECT_NEAR(iv["delta"][i][c].get<double>(), d, 1e-12);
      squares += d * d;
    }
    EXPECT_NEAR(iv["delta_norm"][i].get<double>(), std::sqrt(squares), 1e-12);
  }
}

TEST_F(Api, MaskAndPermuteAreInterventionsToo) {
  const json t = post_json({{"scenario", "three-tokens"}, {"options", {{"permute", {2, 0, 1}}, {"mask_tokens", {0}}}}});
  const json& iv = t["intervention"];
  EXPECT_EQ(iv["after_row"], json::parse("[1, 2, 0]"));
  EXPECT_EQ(t["mask_tokens"], json::parse("[1]")) << "t1 moved to row 1 and stays hidden";
  EXPECT_EQ(iv["before"][2][0].get<double>(), t["output"][0][0].get<double>() - iv["delta"][2][0].get<double>());
}

TEST_F(Api, ProbeGivesTheMeasuresSerranoSmithAndTheCounterfactual) {
  const json mislead = post_to(client(), "/api/probe", {{"scenario", "weights-mislead"}}, 200);
  EXPECT_EQ(mislead["query"], 5);
  EXPECT_EQ(mislead["readout"]["kind"], "class");
  EXPECT_EQ(mislead["readout"]["class"], "negative");
  EXPECT_EQ(mislead["decision"], "negative");
  ASSERT_EQ(mislead["tokens"].size(), 6u);
  EXPECT_EQ(mislead["serrano_smith"]["top_weight"], 0);
  EXPECT_EQ(mislead["serrano_smith"]["top_erasure"], 4);
  EXPECT_EQ(mislead["serrano_smith"]["weights_agree"], false);
  EXPECT_EQ(mislead["serrano_smith"]["top_flips"], false);
  EXPECT_EQ(mislead["serrano_smith"]["others_flipping"], json::parse("[4]"));
  EXPECT_EQ(mislead["tokens"][4]["decision_without"], "positive");
  EXPECT_TRUE(mislead["kendall_tau"]["erasure"].is_number());
  const json& cf = mislead["counterfactual"];
  double sum = 0;
  for (const json& w : cf["found"])
    sum += w.get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_LE(std::abs(cf["readout_after"].get<double>() - cf["readout_before"].get<double>()), 0.01);
  EXPECT_GT(cf["divergence"].get<double>(), 0.0);

  const json agree = post_to(client(), "/api/probe", {{"scenario", "weights-agree"}, {"epsilon", 0.05}}, 200);
  EXPECT_EQ(agree["serrano_smith"]["weights_agree"], true);
  EXPECT_EQ(agree["serrano_smith"]["top_flips"], true);
  EXPECT_EQ(agree["counterfactual"]["epsilon"], 0.05);
}

TEST_F(Api, ProbeTakesAQueryAReadoutAndTheInterventionOptions) {
  const json r = post_to(client(), "/api/probe",
                         {{"scenario", "three-tokens"},
                          {"query", 0},
                          {"readout", "direction:1,-1"},
                          {"head", 0},
                          {"options", {{"permute", {2, 0, 1}}, {"ablate_heads", {"0:uniform"}}}}},
                         200);
  EXPECT_EQ(r["query"], 1) << "token 0 (t1) is row 1 after the permutation";
  EXPECT_EQ(r["query_token"], "t1");
  EXPECT_EQ(r["readout"]["kind"], "direction");
  EXPECT_FALSE(r["intervention"].is_null());
  for (const json& t : r["tokens"])
    EXPECT_NEAR(t["weight"].get<double>(), 1.0 / 3.0, 1e-15);
}

TEST_F(Api, BadInterventionAndProbeRequestsGet400WithTheFieldNamed) {
  const auto bad_attention = [&](const json& options, const std::string& message) {
    expect_bad_request({{"scenario", "three-tokens"}, {"options", options}}, message);
  };
  bad_attention({{"ablate_heads", {{{"head", 4}}}}}, "options.ablate_heads[0]: head 4 does not exist");
  bad_attention({{"ablate_heads", {{{"head", 0}, {"kind", "half"}}}}},
                "options.ablate_heads[0].kind: unknown ablation \"half\"");
  bad_attention({{"ablate_heads", 0}}, "options.ablate_heads: expected a list");
  bad_attention({{"scale_heads", {{{"head", 0}}}}}, "options.scale_heads[0]: expected {\"head\": H, \"factor\": F}");
  bad_attention({{"scale_heads", {{{"head", 0}, {"factor", "big"}}}}},
                "options.scale_heads[0].factor: expected a finite number");
  bad_attention({{"replace_tokens", {{{"index", 9}, {"word", "dog"}}}}},
                "options.replace_tokens[0]: token 9 does not exist");
  bad_attention({{"replace_tokens", {{{"index", 0}, {"word", "two words"}}}}}, "is not one word");
  bad_attention({{"replace_tokens", {{{"index", 0}, {"embedding", {1, 2, 3}}}}}},
                "the embedding has 3 numbers but d_model is 2");
  bad_attention({{"replace_tokens", {{{"index", 0}}}}}, "expected {\"index\": J, \"word\": \"dog\"}");
  const auto bad_probe = [&](const json& body, const std::string& message) {
    SCOPED_TRACE(body.dump());
    const json reply = post_to(client(), "/api/probe", body, 400);
    ASSERT_TRUE(reply.contains("error"));
    EXPECT_NE(reply["error"].get<std::string>().find(message), std::string::npos) << reply["error"];
  };
  bad_probe({{"scenario", "three-tokens"}, {"readout", "class"}}, "readout: three-tokens has no readout matrix");
  bad_probe({{"scenario", "three-tokens"}, {"readout", 3}}, "readout: expected a string");
  bad_probe({{"scenario", "three-tokens"}, {"query", 7}}, "query: token 7 does not exist");
  bad_probe({{"scenario", "three-tokens"}, {"head", 2}}, "head: head 2 does not exist");
  bad_probe({{"scenario", "three-tokens"}, {"epsilon", -0.1}}, "epsilon: must be a finite number >= 0");
  bad_probe({{"scenario", "three-tokens"}, {"colour", 1}}, "colour: unknown field");
  bad_probe({{"scenario", "nope"}}, "scenario: unknown scenario \"nope\"");
  auto health = client().Get("/api/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(Api, TheTiledKernelAndLeanTracesAreOptions) {
  const json tiled = post_json({{"scenario", "multi-head"}, {"kernel", "tiled"}});
  const json reference = post_json({{"scenario", "multi-head"}});
  EXPECT_EQ(tiled["kernel"], "tiled");
  EXPECT_EQ(reference["kernel"], "reference");
  EXPECT_NEAR(tiled["output"][5][0].get<double>(), reference["output"][5][0].get<double>(), 1e-4);
  // The tiled reply names its tokens, as the reference's does (one experiment path for both).
  EXPECT_EQ(tiled["tokens"], reference["tokens"]);
  EXPECT_FALSE(tiled["tokens"].empty());
  const json cross = post_json({{"scenario", "cross-attention"}, {"kernel", "tiled"}});
  EXPECT_EQ(cross["source_tokens"], post_json({{"scenario", "cross-attention"}})["source_tokens"]);
  EXPECT_EQ(cross["source_tokens"].size(), 4u);
  const json lean = post_json({{"scenario", "multi-head"}, {"detail", "weights"}, {"detail_heads", {1}}});
  EXPECT_FALSE(lean["heads"][0].contains("scores"));
  EXPECT_TRUE(lean["heads"][0].contains("weights"));
  EXPECT_TRUE(lean["heads"][1].contains("scores")) << "the listed head keeps every intermediate";
  EXPECT_EQ(lean["heads"][2]["weights"], reference["heads"][2]["weights"]);
  expect_bad_request({{"scenario", "three-tokens"}, {"kernel", "gpu"}}, "kernel: \"gpu\" is not a kernel");
  expect_bad_request({{"scenario", "three-tokens"}, {"detail", "some"}}, "detail: \"some\" is not a detail level");
  expect_bad_request({{"scenario", "multi-head"}, {"detail", "weights"}, {"detail_heads", {5}}},
                     "detail_heads: head 5 does not exist; heads run from 0 to 2");
  expect_bad_request({{"scenario", "three-tokens"}, {"kernel", "tiled"}, {"options", {{"mask_tokens", {1}}}}},
                     "interventions run on the reference kernel");
}

TEST_F(Api, PackedRepliesCarryTheSameTraceAsJsonBitForBit) {
  for (const json& request :
       {json{{"scenario", "three-tokens"}, {"options", {{"causal", true}}}},  // masked logits: -inf, null in JSON
        json{{"scenario", "multi-head"}, {"options", {{"temperature", 0.3}, {"mask_tokens", {2}}}}},
        json{{"scenario", "multi-head"}, {"detail", "weights"}, {"detail_heads", {1}}},
        json{{"scenario", "cross-attention"}, {"kernel", "tiled"}}}) {
    SCOPED_TRACE(request.dump());
    const json as_json = post_json(request);
    json packed_request = request;
    packed_request["encoding"] = "packed";
    auto r = post(packed_request.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");
    EXPECT_EQ(r->body.substr(0, 4), "ATLP");
    EXPECT_LT(r->body.size(), as_json.dump().size()) << "the packed trace is the smaller one";
    // json's == compares doubles exactly, so this is bit for bit (up to the sign of 0).
    EXPECT_EQ(attnlab::unpack_reply(r->body), as_json);
  }
  expect_bad_request({{"scenario", "three-tokens"}, {"encoding", "xml"}}, "encoding: \"xml\" is not an encoding");
  expect_bad_request({{"scenario", "three-tokens"}, {"attention_input", 1}}, "attention_input: expected true or false");
  expect_bad_request({{"scenario", "three-tokens"}, {"kernel", "tiled"}, {"attention_input", true}},
                     "attention_input: is given with the reference kernel only");
  expect_bad_request({{"scenario", "nope"}, {"encoding", "packed"}}, "scenario: unknown scenario \"nope\"");
}

// ---- the input document: what the page's WebAssembly engine recomputes from -------------

namespace {
// The reply's fields the input document does not carry (the server adds them).
json without_server_fields(json reply) {
  for (const char* key : {"scenario_json", "intervention", "attention_input"})
    reply.erase(key);
  for (json& head : reply["heads"])
    head.erase("random_seed");
  return reply;
}
}  // namespace

TEST(InputDocument, AttendingTheDocumentGivesTheApisTraceBitForBit) {
  const json rope = json::parse(R"({"format": "attnlab-scenario/1", "name": "rope-test", "tokens": ["a", "b", "c", "d"],
    "embeddings": [[1, 0.5, -1, 2], [0.1, 0.2, 0.3, 0.4], [-2, 1, 0, 1], [3, -1, 2, 0.5]], "positions": "rope",
    "heads": [{"random": 3, "d_k": 4, "d_v": 2}, {"random": 4, "d_k": 2, "d_v": 3}], "causal": true})");
  // A model's rotation: split-half pairs at its own frequencies (one per pair of d_k).
  json model_rope = rope;
  model_rope["positions"] = {{"kind", "rope"}, {"pairs", "split-half"}, {"frequencies", {0.9, 0.05}}};
  model_rope["heads"] = {{{"random", 3}, {"d_k", 4}, {"d_v", 2}}};
  for (const json& request :
       {json{{"scenario", "three-tokens"}},
        json{{"scenario", "multi-head"}, {"options", {{"temperature", 0.37}, {"causal", true}, {"window", 3}}}},
        json{{"scenario", "previous-token"}, {"options", {{"sentence", "a cat sat on the warm mat"}}}},
        json{{"scenario", "random-head"},
             {"options", {{"add_random_heads", {{{"seed", 9}}}}}},
             {"detail", "weights"},
             {"detail_heads", {2}}},
        json{{"scenario", "cross-attention"}, {"options", {{"temperature", 2.5}}}}, json{{"scenario", rope}},
        json{{"scenario", model_rope}}}) {
    SCOPED_TRACE(request.dump().substr(0, 120));
    json with_input = request;
    with_input["attention_input"] = true;
    const json reply = attnlab::api_attention(with_input);
    ASSERT_TRUE(reply.contains("attention_input"));
    json document = reply["attention_input"];
    if (request.contains("detail_heads")) document["detail_heads"] = request["detail_heads"];
    attnlab::PackedArrays none;  // the matrices as lists of rows: the reader takes both forms
    const json recomputed = attnlab::unpack_reply(attnlab::attend_document(attnlab::pack_reply(document, none)));
    EXPECT_EQ(recomputed, without_server_fields(reply));
  }
}

TEST(InputDocument, ChangingTemperatureOrMaskInTheDocumentEqualsAskingTheApi) {
  json document = attnlab::api_attention({{"scenario", "multi-head"}, {"attention_input", true}})["attention_input"];
  document["temperature"] = 0.2;
  document["causal"] = true;
  attnlab::PackedArrays none;
  const json recomputed = attnlab::unpack_reply(attnlab::attend_document(attnlab::pack_reply(document, none)));
  const json asked =
      attnlab::api_attention({{"scenario", "multi-head"}, {"options", {{"temperature", 0.2}, {"causal", true}}}});
  EXPECT_EQ(recomputed, without_server_fields(asked));
}

TEST(InputDocument, BadDocumentsAreRefusedNamingTheField) {
  const json good =
      attnlab::api_attention({{"scenario", "three-tokens"}, {"attention_input", true}})["attention_input"];
  const auto error_with = [&](const std::string& pointer, const json& value) {
    json doc = good;
    const json::json_pointer at(pointer);
    if (value.is_discarded())
      doc[at.parent_pointer()].erase(at.back());  // discarded: remove the field
    else
      doc[at] = value;
    attnlab::PackedArrays none;
    try {
      (void)attnlab::attend_document(attnlab::pack_reply(doc, none));
    } catch (const attnlab::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_with("/temperature", 0), ::testing::HasSubstr("temperature: 0 is not a number > 0"));
  EXPECT_THAT(error_with("/temperature", json::value_t::discarded), ::testing::HasSubstr("temperature: missing"));
  EXPECT_THAT(error_with("/heads/0/w_k", json::parse("[[1, 2]]")),
              ::testing::HasSubstr("heads[0].w_k: is 1 × 2, expected 2 × 2"));
  EXPECT_THAT(error_with("/mask_tokens", {7}), ::testing::HasSubstr("mask_tokens: key 7 does not exist"));
  EXPECT_THAT(error_with("/queries_from/0/0", "x"), ::testing::HasSubstr("queries_from: row 0 holds \"x\""));
  EXPECT_THAT(error_with("/heads/0/ablation", "half"), ::testing::HasSubstr("heads[0].ablation"));
  EXPECT_THAT(error_with("/heads/0/w_v", json::value_t::discarded), ::testing::HasSubstr("heads[0].w_v: missing"));
  EXPECT_THAT(error_with("/detail_heads", {0, 3}), ::testing::HasSubstr("detail_heads: head 3 does not exist"));
  EXPECT_THAT(error_with("/tokens", json::array()), ::testing::HasSubstr("tokens: 0 queries"));
  EXPECT_THAT(error_with("/queries_from", json::parse("[[], [], []]")),
              ::testing::HasSubstr("queries_from: 0 columns"));
}

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
  const attnlab::ForwardResult f = attnlab::model_forward(model_->model, kModelIds, {.keep_attention = true});
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
  const std::vector<attnlab::TokenProbability> expected = attnlab::top_k({f.logits.data() + (n - 1) * 40, 40}, 7);
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
  // The detectors on this one text are detect_heads' scores with it as the only sequence.
  const std::vector<attnlab::HeadScores> scores = attnlab::detect_heads(model_->model, {kModelIds});
  ASSERT_EQ(reply["heads"].size(), L * H);
  for (std::size_t k = 0; k < L * H; ++k) {
    const json& h = reply["heads"][k];
    EXPECT_EQ(h["layer"], k / H);
    EXPECT_EQ(h["head"], k % H);
    EXPECT_NEAR(h["previous_token"].get<double>(), scores[k].previous_token, 1e-9);
    EXPECT_NEAR(h["duplicate_token"].get<double>(), scores[k].duplicate_token, 1e-9);
    EXPECT_NEAR(h["induction"].get<double>(), scores[k].induction, 1e-9);
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
  const attnlab::ForwardResult f = attnlab::model_forward(model_->model, kModelIds, {.ablate = refs});
  const std::size_t n = kModelIds.size();
  const std::vector<attnlab::TokenProbability> expected = attnlab::top_k({f.logits.data() + (n - 1) * 40, 40}, 5);
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

TEST_F(ModelApi, BadModelRequestsGet400NamingTheField) {
  const std::vector<int> too_long(17, 1);
  expect_field("/api/model/run", {{"ids", kModelIds}, {"ablate", {"2.0"}}}, "ablate[0]", "head 2.0 does not exist");
  expect_field("/api/model/run", {{"ids", kModelIds}, {"ablate", {"one"}}}, "ablate[0]", "is not a head");
  expect_field("/api/model/run", {{"ids", {1, 40}}}, "ids[1]", "ids run from 0 to 39");
  expect_field("/api/model/run", {{"ids", {1, -2}}}, "ids[1]", "not a token id");
  expect_field("/api/model/run", {{"ids", too_long}}, "ids", "17 tokens is more than the model's 16 positions");
  expect_field("/api/model/run", {{"ids", json::array()}}, "ids", "no tokens");
  expect_field("/api/model/run", {{"text", "hello"}}, "text", "has no tokenizer");
  expect_field("/api/model/run", json::object(), "text", "missing");
  expect_field("/api/model/run", {{"ids", {1}}, {"top_k", 0}}, "top_k", "not in 1 to 50");
  expect_field("/api/model/run", {{"ids", {1}}, {"top_k", 51}}, "top_k", "not in 1 to 50");
  expect_field("/api/model/run", {{"ids", {1}}, {"colour", "red"}}, "colour", "unknown field");
  const auto head = [](const json& spec) { return json{{"scenario", {{"model", spec}}}}; };
  expect_field("/api/attention", head({{"ids", kModelIds}, {"layer", 2}, {"head", 0}}), "scenario.model.layer",
               "layer 2 does not exist");
  expect_field("/api/attention", head({{"ids", kModelIds}, {"layer", 1}, {"head", 4}}), "scenario.model.head",
               "head 4 does not exist");
  expect_field("/api/attention", head({{"ids", too_long}, {"layer", 1}, {"head", 0}}), "scenario.model.ids",
               "more than the model's 16 positions");
  expect_field("/api/attention", head({{"ids", {50}}, {"layer", 1}, {"head", 0}}), "scenario.model.ids[0]",
               "not a token id");
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

// ---- training (`attnlab serve --model RUN --runs DIR`, docs/api.md "Training") ------------
// A small training run made with the library (what `attnlab train --out DIR --steps 40
// --log-every 10 --checkpoint-every 20 --layers 2 --heads 2 --d-model 16 --context 16
// --vocab 12` writes) is the server's --model; runs started here go to a fresh --runs.
namespace {

namespace fs = std::filesystem;

attnlab::TrainSettings small_settings(std::size_t steps) {
  attnlab::TrainSettings s;
  s.layers = 2, s.heads = 2, s.d_model = 16, s.context = 16, s.vocab = 12;
  s.steps = steps, s.log_every = 10, s.checkpoint_every = 20, s.batch = 8;
  return s;
}

// The same settings as a POST /api/training/start body.
json small_request(std::size_t steps) {
  return {{"layers", 2},    {"heads", 2},      {"d_model", 16}, {"context", 16},         {"vocab", 12},
          {"steps", steps}, {"log_every", 10}, {"batch", 8},    {"checkpoint_every", 20}};
}

// A run that takes minutes, to be cancelled (it never gets near its end in these tests).
json long_request() {
  return {{"layers", 2},   {"heads", 2},  {"d_model", 64},   {"context", 64},           {"vocab", 28},
          {"steps", 3000}, {"batch", 16}, {"log_every", 10}, {"checkpoint_every", 1000}};
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Token ids of the induction task's vocabulary (12: BOS is 11), a stretch repeated.
const std::vector<int> kRunIds = {11, 3, 7, 1, 9, 3, 7, 1, 9, 2};

class TrainingApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::path(ATTNLAB_TEST_TMP) / ("training-" + std::to_string(getpid()));
    fs::remove_all(root_);
    attnlab::run_training(small_settings(40), root_ / "model-run");
    model_ = std::make_shared<const attnlab::ModelDir>(attnlab::open_model_dir((root_ / "model-run").string()));
    running_ = new RunningServer(model_, root_ / "runs");
    port_ = running_->port;
  }
  static void TearDownTestSuite() {
    delete running_;
    model_.reset();
    fs::remove_all(root_);
  }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  static json get_json(const std::string& path, int expected_status = 200) {
    auto r = client().Get(path);
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, expected_status) << path << ": " << r->body.substr(0, 400);
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json; charset=utf-8");
    return json::parse(r->body);
  }
  static json post_json(const std::string& path, const json& body, int expected_status = 200) {
    auto r = client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, expected_status) << path << ": " << r->body.substr(0, 400);
    return json::parse(r->body);
  }
  // A refusal: the status, {"error": "FIELD: ...", "field": FIELD} (or null and no prefix).
  static void expect_refused(const json& reply, const json& field, const std::string& message) {
    EXPECT_EQ(reply["field"], field) << reply;
    const std::string error = reply["error"];
    if (field.is_string()) EXPECT_THAT(error, ::testing::StartsWith(field.get<std::string>() + ": "));
    EXPECT_THAT(error, ::testing::HasSubstr(message));
  }
  // GET `path` until `done` says so (no time limit: CTest's is the bound).
  static json poll(const std::string& path, const std::function<bool(const json&)>& done) {
    for (;;) {
      json j = get_json(path);
      if (j.is_discarded() || j.is_null() || done(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // head h of layer l's weights as POST /api/model/run gives them, against a forward pass
  static void expect_weights_of(const json& reply, const attnlab::ForwardResult& f, std::size_t heads) {
    const std::size_t n = f.n;
    ASSERT_EQ(reply["weights"].size(), f.attention.size());
    for (std::size_t l = 0; l < f.attention.size(); ++l)
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j)
            ASSERT_NEAR(reply["weights"][l][h][i][j].get<double>(), f.attention[l][(h * n + i) * n + j], 5e-5 + 1e-9)
                << l << "." << h << " cell " << i << "," << j;
  }

  static fs::path root_;
  static std::shared_ptr<const attnlab::ModelDir> model_;
  static RunningServer* running_;
  static int port_;
};
fs::path TrainingApi::root_;
std::shared_ptr<const attnlab::ModelDir> TrainingApi::model_;
RunningServer* TrainingApi::running_ = nullptr;
int TrainingApi::port_ = 0;

}  // namespace

TEST_F(TrainingApi, TheModelsRunGivesItsSettingsLogCheckpointsAndState) {
  const json v = get_json("/api/training");
  EXPECT_EQ(v["training"], true);
  EXPECT_EQ(v["run"], nullptr);
  EXPECT_EQ(v["name"], "model-run");
  EXPECT_EQ(v["state"], "done");
  EXPECT_EQ(v["checkpoints"], (json{0, 20, 40}));
  EXPECT_EQ(v["final"], true);
  EXPECT_EQ(v["settings"], attnlab::train_settings_json(small_settings(40)));
  EXPECT_EQ(v["log_count"], 5);
  EXPECT_EQ(v["since"], 0);
  // the log is train.json's, entry for entry: steps 0, 10, ..., 40, every head scored
  const json file = attnlab::read_train_json(root_ / "model-run");
  EXPECT_EQ(v["log"], file["log"]);
  ASSERT_EQ(v["log"].size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(v["log"][k]["step"], 10 * k);
    EXPECT_EQ(v["log"][k]["heads"].size(), 4u);
    EXPECT_TRUE(v["log"][k]["loss_second_half"].is_number());
  }
  // from an index on (how the page follows a run), and an index past the end
  const json later = get_json("/api/training?since=3");
  EXPECT_EQ(later["log"], (json{file["log"][3], file["log"][4]}));
  EXPECT_EQ(later["since"], 3);
  EXPECT_EQ(later["log_count"], 5);
  EXPECT_EQ(get_json("/api/training?since=5")["log"], json::array());
  expect_refused(get_json("/api/training?since=6", 400), "since", "6 is past the log's 5 entries");
  expect_refused(get_json("/api/training?since=x", 400), "since", "\"x\" is not a log index");
  expect_refused(get_json("/api/training?run=..%2Fmodel-run", 400), "run", "is not a run's name");
  expect_refused(get_json("/api/training?run=nope", 400), "run", "there is no training run \"nope\"");
  expect_refused(get_json("/api/training?colour=red", 400), "colour", "unknown field");
  // the model says it is a training run
  EXPECT_EQ(get_json("/api/model")["training"], true);
}

TEST_F(TrainingApi, AStepRunsThatCheckpointOfTheRun) {
  const fs::path run = root_ / "model-run";
  std::vector<json> replies;
  for (const std::size_t step : {0, 20, 40}) {
    SCOPED_TRACE("step " + std::to_string(step));
    const json reply = post_json("/api/model/run", {{"ids", kRunIds}, {"step", step}});
    const attnlab::Model checkpoint = attnlab::load_gpt2(attnlab::checkpoint_dir(run, step).string());
    expect_weights_of(reply, attnlab::model_forward(checkpoint, kRunIds, {.keep_attention = true}), 2);
    replies.push_back(reply);
  }
  // training moved the heads: step 0's weights are not step 40's
  double largest = 0;
  for (std::size_t i = 0; i < kRunIds.size(); ++i)
    for (std::size_t j = 0; j <= i; ++j)
      largest = std::max(largest, std::abs(replies[0]["weights"][1][0][i][j].get<double>() -
                                           replies[2]["weights"][1][0][i][j].get<double>()));
  EXPECT_GT(largest, 0.01);
  // no step: the final model, which is the last checkpoint
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}})["weights"], replies[2]["weights"]);
  // the model at a step, and one head of it as a scenario
  const json info = get_json("/api/model?step=20");
  EXPECT_EQ(info["step"], 20);
  EXPECT_EQ(info["training"], true);
  EXPECT_EQ(info["name"], "model-run");
  EXPECT_EQ(info["n_layer"], 2);
  const json trace = post_json(
      "/api/attention", {{"scenario", {{"model", {{"ids", kRunIds}, {"layer", 1}, {"head", 0}, {"step", 20}}}}}});
  const attnlab::ForwardResult f20 = attnlab::model_forward(
      attnlab::load_gpt2(attnlab::checkpoint_dir(run, 20).string()), kRunIds, {.keep_attention = true});
  const std::size_t n = kRunIds.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j)
      ASSERT_NEAR(trace["heads"][0]["weights"][i][j].get<double>(), f20.attention[1][i * n + j], 1e-5);
  EXPECT_EQ(trace["scenario_json"]["model"]["step"], 20);
}

TEST_F(TrainingApi, AStepThatIsNotACheckpointIs400NamingStep) {
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"step", 30}}, 400), "step",
                 "step 30 is not a checkpoint of model-run; its checkpoints are at steps 0, 20, 40");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"step", -1}}, 400), "step", "a whole number >= 0");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"step", "20"}}, 400), "step", "a whole number");
  expect_refused(get_json("/api/model?step=30", 400), "step", "its checkpoints are at steps 0, 20, 40");
  expect_refused(get_json("/api/model?step=abc", 400), "step", "a whole number");
  expect_refused(get_json("/api/model?layer=1", 400), "layer", "unknown parameter");
  expect_refused(
      post_json("/api/attention",
                {{"scenario", {{"model", {{"ids", kRunIds}, {"layer", 0}, {"head", 0}, {"step", 35}}}}}}, 400),
      "scenario.model.step", "step 35 is not a checkpoint");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", "nope"}}, 400), "run",
                 "there is no training run \"nope\"");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", "../model-run"}}, 400), "run",
                 "is not a run's name");
  expect_refused(post_json("/api/attention",
                           {{"scenario", {{"model", {{"ids", kRunIds}, {"layer", 0}, {"head", 0}, {"run", 7}}}}}}, 400),
                 "scenario.model.run", "is not a run's name");
  // and the server keeps serving
  EXPECT_EQ(post_json("/api/model/run", {{"ids", {1, 2}}, {"step", 0}})["ids"], (json{1, 2}));
}

TEST_F(TrainingApi, BadSettingsAre400NamingTheSetting) {
  const auto refused = [](const json& body, const std::string& field, const std::string& message) {
    SCOPED_TRACE(body.dump());
    expect_refused(post_json("/api/training/start", body, 400), field, message);
  };
  refused({{"layers", 5}}, "layers", "5 is not a whole number from 1 to 4");
  refused({{"heads", 0}}, "heads", "from 1 to 8");
  refused({{"heads", 3}}, "d_model", "32 is not divisible by heads 3");
  refused({{"context", 256}}, "context", "from 12 to 128");
  refused({{"steps", 0}}, "steps", "from 1 to 20000");
  refused({{"steps", 1.5}}, "steps", "1.5 is not a whole number");
  refused({{"lr", 2}}, "lr", "2 is not a learning rate");
  refused({{"lr", "fast"}}, "lr", "not a learning rate");
  refused({{"attn_only", 1}}, "attn_only", "expected true or false");
  refused({{"prev_token_steps", -1}}, "prev_token_steps", "from 0 to 20000");
  refused({{"prev_token_steps", 20001}}, "prev_token_steps", "from 0 to 20000");
  refused({{"task", "copy"}}, "task", "the one task is \"induction\"");
  refused({{"colour", 1}}, "colour", "unknown field");
  refused({{"steps", 20000}, {"log_every", 1}}, "log_every", "20001 log entries; at most 1001");
  refused({{"log_every", 0}}, "log_every", "from 1 to 20000");
  refused({{"steps", 20000}, {"log_every", 100}, {"checkpoint_every", 10}}, "checkpoint_every",
          "2001 checkpoints; at most 101");
  refused({{"steps", 20000},
           {"batch", 64},
           {"context", 128},
           {"d_model", 128},
           {"layers", 4},
           {"log_every", 100},
           {"checkpoint_every", 1000}},
          "steps", "training FLOPs; the lab trains at most 2e+12");
  expect_refused(post_json("/api/training/start", json::array({1}), 400), "body", "expected a JSON object");
  // nothing started
  EXPECT_EQ(get_json("/api/training/job")["job"], nullptr);
}

TEST_F(TrainingApi, ARunStartedHereTrainsInTheBackgroundIsFollowedAndWritesWhatTheLibraryWrites) {
  const json before = get_json("/api/training/job");
  EXPECT_EQ(before["job"], nullptr);
  EXPECT_EQ(before["busy"], false);
  EXPECT_EQ(before["limits"]["layers"], (json{1, 4}));
  EXPECT_EQ(before["defaults"], attnlab::train_settings_json(attnlab::TrainSettings{}));
  EXPECT_EQ(fs::path(before["runs_dir"].get<std::string>()).filename(), "runs");
  expect_refused(post_json("/api/training/cancel", json::object(), 409), nullptr, "no training run is running");

  const json started = post_json("/api/training/start", small_request(30), 202);
  EXPECT_EQ(started["run"], "run-1");
  EXPECT_EQ(started["state"], "running");
  EXPECT_EQ(started["settings"], attnlab::train_settings_json(small_settings(30)));
  EXPECT_EQ(fs::path(started["dir"].get<std::string>()), fs::absolute(root_ / "runs" / "run-1").lexically_normal());
  // followed as the page does: the log from the last entry seen on, until the run ends
  json log = json::array();
  json view;
  for (;;) {
    view = get_json("/api/training?run=run-1&since=" + std::to_string(log.size()));
    ASSERT_EQ(view["since"], log.size());
    for (const json& entry : view["log"])
      log.push_back(entry);
    ASSERT_EQ(view["log_count"], log.size());
    if (view["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(view["state"], "done");
  EXPECT_EQ(view["checkpoints"], (json{0, 20, 30}));
  EXPECT_EQ(view["final"], true);
  ASSERT_EQ(log.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k)
    EXPECT_EQ(log[k]["step"], 10 * k);
  const fs::path dir = root_ / "runs" / "run-1";
  EXPECT_EQ(attnlab::read_train_json(dir)["log"], log);
  const json job = get_json("/api/training/job");
  EXPECT_EQ(job["job"]["run"], "run-1");
  EXPECT_EQ(job["job"]["state"], "done");
  EXPECT_EQ(job["job"]["step"], 30);
  EXPECT_EQ(job["busy"], false);

  // The same settings through the library give the same directory: the same log (but the
  // seconds), the same checkpoints and the same final model, byte for byte.
  const fs::path library = root_ / "library-run";
  const attnlab::TrainingOutcome outcome = attnlab::run_training(small_settings(30), library);
  EXPECT_EQ(outcome.checkpoints, (std::vector<std::size_t>{0, 20, 30}));
  json library_log = attnlab::read_train_json(library)["log"], server_log = log;
  for (json* l : {&library_log, &server_log})
    for (json& entry : *l)
      entry.erase("seconds");
  EXPECT_EQ(server_log, library_log);
  for (const fs::path& file :
       {fs::path("model.safetensors"), fs::path("config.json"), fs::path("checkpoints/step-20/model.safetensors"),
        fs::path("checkpoints/step-0/model.safetensors")})
    EXPECT_TRUE(file_bytes(dir / file) == file_bytes(library / file)) << file << " differs";

  // Opened as a model: the run by name, at any of its checkpoints.
  const json info = get_json("/api/model?run=run-1");
  EXPECT_EQ(info["loaded"], true);
  EXPECT_EQ(info["run"], "run-1");
  EXPECT_EQ(info["name"], "run-1");
  EXPECT_EQ(info["training"], true);
  EXPECT_EQ(info["n_head"], 2);
  const json at20 = post_json("/api/model/run", {{"ids", kRunIds}, {"run", "run-1"}, {"step", 20}});
  expect_weights_of(at20,
                    attnlab::model_forward(attnlab::load_gpt2((dir / "checkpoints/step-20").string()), kRunIds,
                                           {.keep_attention = true}),
                    2);
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", "run-1"}, {"step", 10}}, 400), "step",
                 "step 10 is not a checkpoint of run-1; its checkpoints are at steps 0, 20, 30");
}

TEST_F(TrainingApi, OneRunAtATimeOthersAreServedMeanwhileAndCancelKeepsTheLastCheckpoint) {
  const json started = post_json("/api/training/start", long_request(), 202);
  const std::string run = started["run"];  // run-1 when this test has the server to itself
  const std::size_t number = std::stoul(run.substr(4));
  poll("/api/training?run=" + run, [](const json& v) { return v["log_count"] >= 2; });
  // busy: a second run is refused with 409, saying which run trains
  expect_refused(post_json("/api/training/start", small_request(10), 409), nullptr, run + " is training");
  const json job = get_json("/api/training/job");
  EXPECT_EQ(job["busy"], true);
  EXPECT_EQ(job["job"]["state"], "running");
  EXPECT_EQ(job["job"]["steps"], 3000);
  // other requests are answered while it trains: a model run, and the run's own checkpoint
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}, {"weights", false}})["ids"], kRunIds);
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}, {"run", run}, {"step", 0}})["ids"], kRunIds);
  // its final model is not there yet
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", run}}, 400), "step",
                 run + " has no final model yet");
  EXPECT_EQ(get_json("/api/training?run=" + run)["state"], "running");
  // cancel the wrong run: refused; the right one: it stops at its next step
  expect_refused(post_json("/api/training/cancel", {{"run", "run-7"}}, 409), "run", "is not the run training here");
  const json cancelled = post_json("/api/training/cancel", json::object());
  EXPECT_EQ(cancelled["run"], run);
  EXPECT_EQ(cancelled["cancelling"], true);
  const json view = poll("/api/training?run=" + run, [](const json& v) { return v["state"] != "running"; });
  EXPECT_EQ(view["state"], "cancelled");
  EXPECT_EQ(view["final"], true);
  const std::size_t last = view["log"].back()["step"];
  EXPECT_LT(last, 3000u);
  EXPECT_EQ(view["checkpoints"].back(), last) << "the step it stopped at is kept as a checkpoint";
  EXPECT_EQ(view["checkpoints"][0], 0);
  const fs::path dir = root_ / "runs" / run;
  EXPECT_TRUE(file_bytes(dir / "model.safetensors") ==
              file_bytes(attnlab::checkpoint_dir(dir, last) / "model.safetensors"));
  EXPECT_EQ(attnlab::read_train_json(dir)["log"], view["log"]);
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}, {"run", run}})["ids"], kRunIds);
  expect_refused(post_json("/api/training/cancel", json::object(), 409), nullptr, "no training run is running");
  // the slot is free again: the next run is the next number
  const std::string next = "run-" + std::to_string(number + 1);
  EXPECT_EQ(post_json("/api/training/start", small_request(10), 202)["run"], next);
  EXPECT_EQ(poll("/api/training?run=" + next, [](const json& v) { return v["state"] != "running"; })["state"], "done");
}

// Starts the long run (run-1) through client `c` and returns once its first log entry is
// written, so the run is training.
void start_long_run_and_wait_for_its_first_log(httplib::Client& c) {
  auto r = c.Post("/api/training/start", long_request().dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  for (;;) {
    auto v = c.Get("/api/training?run=run-1");
    ASSERT_TRUE(v);
    if (json::parse(v->body)["log_count"] >= 1) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(TrainingApiShutdown, AServerStoppedWhileARunTrainsCancelsItAndKeepsItsLastCheckpoint) {
  const fs::path runs = fs::path(ATTNLAB_TEST_TMP) / ("shutdown-" + std::to_string(getpid()));
  fs::remove_all(runs);
  {
    RunningServer running(nullptr, runs);
    httplib::Client c("127.0.0.1", running.port);
    ASSERT_NO_FATAL_FAILURE(start_long_run_and_wait_for_its_first_log(c));
  }  // the server goes, with the run still training
  const fs::path dir = runs / "run-1";
  const json log = attnlab::read_train_json(dir)["log"];
  const std::size_t last = log.back()["step"];
  EXPECT_LT(last, 3000u);
  EXPECT_TRUE(attnlab::has_final_model(dir));
  EXPECT_EQ(attnlab::checkpoint_steps(dir).back(), last);
  fs::remove_all(runs);
}

// stop() itself (not the server's destruction) ends the run: when it returns, the run has
// stopped at a step, written that step's checkpoint and its final model.
TEST(TrainingApiShutdown, StopEndsARunTrainingAndWritesItsLastCheckpointBeforeItReturns) {
  const fs::path runs = fs::path(ATTNLAB_TEST_TMP) / ("stop-" + std::to_string(getpid()));
  fs::remove_all(runs);
  RunningServer running(nullptr, runs);
  httplib::Client c("127.0.0.1", running.port);
  ASSERT_NO_FATAL_FAILURE(start_long_run_and_wait_for_its_first_log(c));
  running.server.stop();  // the server object still lives
  const fs::path dir = runs / "run-1";
  EXPECT_TRUE(attnlab::has_final_model(dir)) << "stop() returned before the run wrote its final model";
  const json log = attnlab::read_train_json(dir)["log"];
  const std::size_t last = log.back()["step"];
  EXPECT_LT(last, 3000u);
  EXPECT_EQ(attnlab::checkpoint_steps(dir).back(), last);
  fs::remove_all(runs);
}

TEST_F(ModelApi, AModelThatIsNotATrainingRunHasNoTrainingAndNoSteps) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/api/training");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), (json{{"training", false}, {"run", nullptr}, {"name", "tiny-f32"}}));
  expect_field("/api/model/run", {{"ids", kModelIds}, {"step", 0}}, "step", "tiny-f32 has no checkpoints");
}

TEST_F(Api, WithoutAModelThereIsNoTrainingButRunsCanStillBeNamed) {
  auto r = client().Get("/api/training");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body), (json{{"training", false}, {"run", nullptr}}));
  auto missing = client().Get("/api/model?run=run-99");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(json::parse(missing->body)["field"], "run");
}

// ---- heavy work, time budgets and slow clients (admission.hpp) -----------------------------

namespace {

// One token, 1024 wide, a random head of width 512: 12.6 MB of weights, more than small work
// (8 MiB) and far within the request limit (256 MiB).
json heavy_request() {
  return {{"scenario",
           {{"format", "attnlab-scenario/1"},
            {"tokens", {"a"}},
            {"embeddings", {std::vector<int>(1024, 1)}},
            {"heads", {{{"random", 1}, {"d_k", 512}, {"d_v", 512}}}}}}};
}

}  // namespace

TEST(ApiAdmission, HeavyWorkWithEverySlotTakenIs503WithRetryAfterWhileSmallWorkIsServed) {
  RunningServer s;
  s.server.set_heavy_slots(0);
  httplib::Client c("127.0.0.1", s.port);
  auto busy = c.Post("/api/attention", heavy_request().dump(), "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_THAT(json::parse(busy->body)["error"].get<std::string>(),
              ::testing::HasSubstr("all 0 slots for heavy work are taken"));
  auto probe = c.Post("/api/probe", heavy_request().dump(), "application/json");
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->status, 503) << "the probe's runs are heavy work too";
  // Small work and the health check are served meanwhile.
  EXPECT_EQ(c.Post("/api/attention", R"({"scenario": "three-tokens"})", "application/json")->status, 200);
  EXPECT_EQ(c.Get("/api/health")->status, 200);
  s.server.set_heavy_slots(1);
  auto served = c.Post("/api/attention", heavy_request().dump(), "application/json");
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200) << served->body;
  EXPECT_EQ(c.Post("/api/attention", heavy_request().dump(), "application/json")->status, 200)
      << "the slot was given back when the request ended";
}

TEST(ApiAdmission, WorkPastItsBudgetIsStoppedWith503AndTheServerGoesOn) {
  RunningServer s;
  s.server.set_request_budget(std::chrono::seconds(0));
  httplib::Client c("127.0.0.1", s.port);
  auto stopped = c.Post("/api/attention", R"({"scenario": "three-tokens"})", "application/json");
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->status, 503);
  EXPECT_THAT(json::parse(stopped->body)["error"].get<std::string>(),
              ::testing::HasSubstr("took longer than the server's budget of 0 s and was stopped"));
  EXPECT_FALSE(stopped->has_header("Retry-After")) << "asking again would not help";
  EXPECT_EQ(c.Get("/api/health")->status, 200) << "no work to check, so nothing to stop";
  s.server.set_request_budget(std::chrono::seconds(30));
  EXPECT_EQ(c.Post("/api/attention", R"({"scenario": "three-tokens"})", "application/json")->status, 200);
}

// 72 clients hold connections open by sending a header byte every 200 ms (as slowly as a
// client may without timing out), more than cpp-httplib's default 8 worker threads. The
// health check is answered while every one of them is still connected and sending.
TEST(ApiAdmission, SlowClientsHoldingConnectionsDoNotStarveTheHealthCheck) {
  RunningServer s;
  std::vector<int> sockets;
  for (int k = 0; k < 72; ++k) {
    const int sock = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(s.port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    const std::string start = "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    ASSERT_EQ(send(sock, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    sockets.push_back(sock);
  }
  std::atomic<bool> done{false}, gave_up{false};
  std::thread attack([&] {
    for (int tick = 0; tick < 150 && !done; ++tick) {  // at most 30 s
      for (int sock : sockets)
        send(sock, "a", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    gave_up = !done;
  });
  httplib::Client c("127.0.0.1", s.port);
  c.set_read_timeout(60, 0);
  auto health = c.Get("/api/health");
  const bool during_attack = !gave_up;
  done = true;
  attack.join();
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(during_attack) << "the health check waited until the slow clients stopped";
  for (int sock : sockets)
    close(sock);
}

// ---- stopping the server: work in flight is cancelled ---------------------------------------

namespace {

// A probe that runs for many seconds here (64 tokens, d_model 512, seven random heads with
// d_k = d_v = 256: 65 runs of the scenario) and is still within the server's limits (2.0 GB
// of work over its runs against 2 GiB).
json slow_probe_request() {
  std::vector<std::string> tokens;
  std::vector<std::vector<double>> embeddings;
  for (int i = 0; i < 64; ++i) {
    tokens.push_back("t" + std::to_string(i));
    std::vector<double> row(512);
    for (int j = 0; j < 512; ++j)
      row[j] = double((i * 7 + j * 3) % 11 - 5) / 5.0;
    embeddings.push_back(std::move(row));
  }
  json heads = json::array();
  for (int h = 0; h < 7; ++h)
    heads.push_back({{"random", h + 1}, {"d_k", 256}, {"d_v", 256}});
  return {{"scenario",
           {{"format", "attnlab-scenario/1"}, {"tokens", tokens}, {"embeddings", embeddings}, {"heads", heads}}}};
}

}  // namespace

// A heavy probe is running (the server's one heavy slot is taken: another heavy request is
// refused as busy) when the server is stopped. Its work stops at the next check between
// heads: the reply is the shutdown 503, with no results, and run() returns. The request
// budget is an hour, so nothing but the stop can cut the probe short.
TEST(ApiShutdown, StopCancelsAHeavyProbeInFlightWhichIsAnswered503WithoutResults) {
  attnlab::LabServer server;
  server.set_heavy_slots(1);
  server.set_request_budget(std::chrono::hours(1));
  const int port = server.bind("127.0.0.1", 0);
  std::thread serving([&] { server.run(); });
  const std::string probe_body = slow_probe_request().dump();
  std::optional<httplib::Response> probe;  // none: the connection was closed without a reply
  std::atomic<bool> probe_answered{false};
  std::thread asker([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(3600, 0);
    for (;;) {  // as the page does: again while the slot is busy (503 with Retry-After)
      auto r = c.Post("/api/probe", probe_body, "application/json");
      probe = r ? std::optional(*r) : std::nullopt;
      if (!probe || probe->status != 503 || !probe->has_header("Retry-After")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    probe_answered = true;
  });
  // Small heavy requests until one is refused as busy: the probe holds the one slot.
  httplib::Client c("127.0.0.1", port);
  bool probe_running = false;
  for (int k = 0; k < 100000 && !probe_answered; ++k) {
    auto other = c.Post("/api/attention", heavy_request().dump(), "application/json");
    if (!other) break;
    if (other->status == 503) {
      probe_running = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  server.stop();
  serving.join();
  asker.join();
  EXPECT_TRUE(probe_running) << "the probe never held the heavy slot";
  // The probe's reply: the shutdown 503 on a closed connection (or, had the stop come between
  // requests, a closed connection), never its results.
  if (probe) {
    EXPECT_EQ(probe->status, 503) << probe->body.substr(0, 300);
    const json reply = json::parse(probe->body);
    EXPECT_THAT(reply["error"].get<std::string>(), ::testing::HasSubstr("the server is shutting down"));
    EXPECT_TRUE(reply.contains("field") && reply["field"].is_null());
    EXPECT_FALSE(reply.contains("tokens")) << "the probe finished";
    EXPECT_FALSE(probe->has_header("Retry-After"));
    EXPECT_EQ(probe->get_header_value("Connection"), "close");
  }
}

// A stop that comes before run() has begun listening is not lost: run() returns at once.
TEST(ApiShutdown, AServerStoppedBeforeItRunsReturnsFromRunAtOnce) {
  attnlab::LabServer server;
  server.bind("127.0.0.1", 0);
  server.stop();
  server.run();
  server.stop();  // and stopping again does nothing
  SUCCEED();
}
