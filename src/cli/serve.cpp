// attnlab serve [--host 127.0.0.1] [--port 8080] [--open] [--model DIR] [--runs DIR]
// [--allow-host NAME]: the lab in a browser, with a real model as a source when --model names
// a GPT-2 directory (a training run's directory adds its curves and checkpoints), and
// training runs started from the page written under --runs.
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/server/server.hpp"
#include "common.hpp"

namespace attnlab::cli {

namespace {

// A request allocates a few MB (the trace's grids) and frees it. By default glibc gives
// each server thread its own arena and hands freed memory back to the kernel, so the next
// request faults every page in again, which on these virtual machines costs microseconds a
// page: a 64-token, 8-head trace took 12 ms, 3.6 ms with one arena that keeps its memory.
void keep_freed_memory() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
}

// SIGINT and SIGTERM, taken by a handler that writes a byte to a pipe, which a watcher thread
// reads before it stops the server. Blocking the signals and waiting for them (sigwait) would
// not do: threads started before serve runs (OpenBLAS starts its own when it loads) keep them
// unblocked, the kernel may hand the signal to one of those, and its default action ends the
// process at once, with code 143 and the work in flight cut off.
class StopSignals {
 public:
  StopSignals() {
    if (pipe(fds_) != 0) throw std::runtime_error("cannot create a pipe for the stop signals");
    write_end = fds_[1];
    struct sigaction action {};
    action.sa_handler = [](int) {
      const char byte = 's';
      [[maybe_unused]] const ssize_t written = write(write_end, &byte, 1);  // async-signal-safe
    };
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    close(fds_[0]);
    close(fds_[1]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Waits for a signal (true) or wake() (false).
  bool wait() {
    char byte = 0;
    while (read(fds_[0], &byte, 1) < 0 && errno == EINTR) {
    }
    return byte == 's';
  }
  void wake() {
    const char byte = 'w';
    [[maybe_unused]] const ssize_t written = write(fds_[1], &byte, 1);
  }

 private:
  static inline int write_end = -1;  // for the handler
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace

Command serve_command(CLI::App& parent) {
  struct State {
    std::string host = "127.0.0.1";
    int port = 8080;
    bool open = false;
    std::string model;                     // a GPT-2 directory (docs/models.md), or none
    std::string runs = "attnlab-runs";     // where runs started from the page go (docs/training.md)
    std::vector<std::string> allow_hosts;  // host names the server answers to besides its own
    std::size_t heavy_slots = 0;           // 0: the server's default
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand("serve", "Serve the lab's page and JSON API (docs/api.md)");
  app->add_option("--host", state->host, "Address to listen on (default: this machine only)")->capture_default_str();
  app->add_option("--port", state->port, "Port to listen on; 0 picks a free one")->capture_default_str();
  app->add_flag("--open", state->open, "Open the lab in the default browser");
  app->add_option("--model", state->model,
                  "A model for the lab's Model source: a folder (config.json, model.safetensors, the tokenizer's "
                  "files), a .gguf file, or ollama:NAME[:TAG] (docs/models.md)")
      ->check(kModelPath);
  app->add_option("--runs", state->runs,
                  "Directory for training runs started from the page (each in a new run-N inside it; created when "
                  "the first starts)")
      ->capture_default_str();
  app->add_option("--allow-host", state->allow_hosts,
                  "Also answer to requests for this host name (repeatable); by default only 127.0.0.1, localhost, "
                  "[::1] and --host are (other names get 403: a defence against DNS rebinding)")
      ->allow_extra_args(false);
  app->add_option("--heavy-slots", state->heavy_slots,
                  "Heavy requests and jobs (a model's forward, a probe, a training run) that run at once, each on "
                  "cores / N threads; more are answered 503 'busy' (default: cores / 4, at least 2, at most one per "
                  "core)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  return {app, [state]() {
            // Ctrl-C and SIGTERM stop the server cleanly (stop_on_signal).
            StopSignals signals;

            keep_freed_memory();
            // The model is loaded (and checked) once, before the port is taken: a broken
            // directory exits with code 2 and the loader's message, as `attnlab model` does.
            std::shared_ptr<const ModelDir> model;
            if (!state->model.empty()) model = std::make_shared<const ModelDir>(open_model_dir(state->model));
            if (state->runs.empty()) fail("--runs", "is empty; give a directory, e.g. --runs attnlab-runs");
            LabServer server(model, state->runs);
            for (const std::string& name : state->allow_hosts)
              server.allow_host(name);
            if (state->heavy_slots) server.set_heavy_slots(state->heavy_slots);
            const int port = server.bind(state->host, state->port);
            const std::string url = fmt::format("http://{}:{}/", state->host, port);
            fmt::print("{}\n", url);
            fmt::print("attnlab lab: open {} in a browser; Ctrl-C stops the server\n", url);
            if (model)
              fmt::print("model: {} ({}{})\n", state->model, describe(model->model.config),
                         model->tokenizer ? "" : "; no tokenizer: token ids");
            fmt::print("training runs started from the page go to {}/run-N\n", state->runs);
            std::fflush(stdout);
            if (state->open && std::system(fmt::format("xdg-open '{}' >/dev/null 2>&1 &", url).c_str()) != 0)
              fmt::print("could not start a browser; open the URL above by hand\n");

            std::thread watcher([&server, &signals]() {
              if (signals.wait()) server.stop();
            });
            server.run();
            signals.wake();  // if run() returned for another reason, the watcher still waits
            watcher.join();
            fmt::print("attnlab lab: stopped\n");
            // (a run still training is cancelled as `server` goes, keeping its last checkpoint)
            return 0;
          }};
}

}  // namespace attnlab::cli
