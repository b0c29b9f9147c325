// `attnlab serve`: the lab's page (compiled into the binary) and the JSON API over HTTP.
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

namespace attnlab {

struct ModelDir;  // attnlab/model/model_dir.hpp

class LabServer {
 public:
  LabServer();
  // The lab with a real model as a source (`attnlab serve --model DIR`): GET /api/model,
  // POST /api/model/run, and {"model": {...}} scenarios in /api/attention and /api/probe.
  // Runs started from the page (POST /api/training/start) are written under ./attnlab-runs.
  explicit LabServer(std::shared_ptr<const ModelDir> model);
  // The same, with runs written under `runs_dir` (`attnlab serve --runs DIR`; created when the
  // first run starts). A run still training when the server is destroyed is cancelled and
  // keeps its last checkpoint.
  LabServer(std::shared_ptr<const ModelDir> model, std::filesystem::path runs_dir);
  ~LabServer();

  // The server answers only to requests whose Host (and Origin, when there is one) names
  // it: 127.0.0.1, localhost, [::1], the address it is bound to, and the names given here
  // (`attnlab serve --allow-host NAME`), on the port it is bound to; others get 403.
  // Throws InputError naming "--allow-host" for anything but a host name or an IP address.
  void allow_host(const std::string& name);
  // Heavy work (priced above a few MB: a big scenario, a probe, a model's forward pass, a
  // timed measure; a training run or an analysis job while it runs) runs in at most `slots`
  // at once, each on cores ÷ slots threads (by default a quarter as many slots as cores, at
  // least two, at most one per core); more is refused with 503 and Retry-After while small
  // requests are served.
  void set_heavy_slots(std::size_t slots);
  // Each request's work stops at the first check past `budget` (kRequestBudget by default):
  // 503, and the thread is free again.
  void set_request_budget(std::chrono::steady_clock::duration budget);
  // Binds to host:port (port 0 picks a free one) and returns the port bound. Throws
  // InputError when the address cannot be used (in use, not an address of this machine).
  int bind(const std::string& host, int port);
  // Serves until stop() is called (from another thread or a signal watcher), then returns
  // once every connection's thread has finished.
  void run();
  // Stops the server for good, promptly: the work of requests in flight stops at its next
  // check (between heads, layers, measured lengths) and they are answered 503 ("the server
  // is shutting down") on a closed connection, as is any request that reaches its work
  // afterwards; a run training here stops at its next step, and stop() returns once its
  // checkpoint of that step and its final model are written; then the listener closes and
  // run() returns. Safe to call from any thread, before run() or more than once.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab
