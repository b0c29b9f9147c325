// Heavy work, time budgets, slow clients and stopping the server, through real HTTP
// (api_test_support.hpp).
#include "api_test_support.hpp"

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

// A burst of new connections finds room in the kernel's accept queue: the server listens
// with the kernel's largest backlog, not cpp-httplib's 5, whose overflow dropped a SYN now
// and then under load and left its client waiting its 1 s retransmission timeout. Here the
// server is bound but accepts nothing yet: every one of 64 connections still completes its
// handshake (with a backlog of 5, about 6 do and the rest wait).
TEST(ApiAdmission, ABurstOfConnectionsIsQueuedWholeNotDropped) {
  attnlab::LabServer server;
  const int port = server.bind("127.0.0.1", 0);
  std::vector<int> sockets;
  for (int k = 0; k < 64; ++k) {
    const int sock = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof address);  // EINPROGRESS, or done at once
    sockets.push_back(sock);
  }
  int connected = 0;
  for (int sock : sockets) {
    pollfd p{sock, POLLOUT, 0};
    int error = -1;
    socklen_t length = sizeof error;
    if (poll(&p, 1, 300) == 1 && getsockopt(sock, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
      ++connected;
    close(sock);
  }
  EXPECT_EQ(connected, 64) << "connections dropped from the accept queue";
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
      // and the server says so: its one heavy slot is taken
      auto health = c.Get("/api/health");
      ASSERT_TRUE(health);
      const json heavy = json::parse(health->body)["heavy_work"];
      EXPECT_EQ(heavy["running"], 1);
      EXPECT_EQ(heavy["slots"], 1);
      EXPECT_EQ(heavy["threads_per_job"], heavy["cores"]) << "the one slot has every core";
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
