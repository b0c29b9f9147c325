// The lab's API through real HTTP: a LabServer on a free loopback port, a cpp-httplib
// client; here health, scenarios, POST /api/attention, every kind of bad request and hostile
// client, and the page itself, the server still serving after each.
#include "api_test_support.hpp"

TEST_F(Api, HealthSaysOkAndTheVersion) {
  auto r = client().Get("/api/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["version"], ATTNLAB_VERSION);
  EXPECT_EQ(j["heavy_work"]["running"], 0) << "nothing heavy runs between the suite's requests";
  // The slots share the cores: a quarter as many as cores, at least 2, at most one per core,
  // each job on cores ÷ slots threads.
  const int slots = j["heavy_work"]["slots"], threads = j["heavy_work"]["threads_per_job"];
  const int cores = j["heavy_work"]["cores"];
  EXPECT_EQ(slots, std::min(cores, std::max(2, cores / 4)));
  EXPECT_EQ(threads, std::max(1, cores / slots));
  EXPECT_LE(slots * threads, cores);
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
