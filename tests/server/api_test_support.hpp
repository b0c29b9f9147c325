// What every API test shares: a LabServer on a free loopback port serving from its own
// thread, the `Api` fixture (one server for the suite) and small request helpers. The tests
// are split by endpoint: test_api.cpp (the page, scenarios, attention, hostile clients),
// test_api_cost_kv.cpp, test_api_probe.cpp (interventions, the probe, the input document),
// test_api_model.cpp, test_api_training.cpp, test_api_admission.cpp (heavy work, budgets,
// slow clients, stopping the server).
#pragma once
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
#include "attnlab/analysis/attribution.hpp"
#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/memory.hpp"
#include "attnlab/analysis/probe.hpp"
#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/rng.hpp"
#include "attnlab/model/detectors.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/model/threads.hpp"
#include "attnlab/report/input_document.hpp"
#include "attnlab/report/packed_reply.hpp"
#include "attnlab/server/analysis_jobs.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/model_sources.hpp"
#include "attnlab/server/server.hpp"

namespace api_test {

using nlohmann::json;

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

  inline static RunningServer* running_ = nullptr;
  inline static int port_ = 0;
};

inline json three_tokens_object() { return json::parse(std::string(*attnlab::api_scenario_file("three-tokens"))); }

inline json post_to(httplib::Client client, const std::string& path, const json& body, int expected_status) {
  auto r = client.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response";
  if (!r) return {};
  EXPECT_EQ(r->status, expected_status) << r->body;
  return json::parse(r->body);
}

}  // namespace api_test

using api_test::Api;
using api_test::post_to;
using api_test::RunningServer;
using api_test::three_tokens_object;
using nlohmann::json;
