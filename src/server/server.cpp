// The HTTP face: routes to the API functions and the embedded page. Every reply is JSON,
// a packed trace (docs/api.md, "encoding": "packed") or a page file; errors are
// {"error": ...} with 400/403/404/405/411/413/415/500, and nothing a client sends takes the
// server down.
//
// Every request is screened before it is routed and before its body is read
// (request_guard.hpp): its Host, its Origin, its method for the path, and for a POST its
// Content-Type and its length. A POST body is then read by the handler through a receiver
// that counts, so the body limit holds whatever the framing.
#include "attnlab/server/server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <fmt/format.h>
#include <algorithm>
#include <mutex>
#include <regex>
#include <thread>

#include "admission.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/embedded.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "attnlab/server/analysis_jobs.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/model_sources.hpp"
#include "attnlab/server/training_jobs.hpp"
#include "request_guard.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// With a charset parameter, cpp-httplib does not compress an application/* reply: Debian's
// build would otherwise brotli-compress every trace at its slowest setting (seconds for a
// few MB). The same holds for the scripts, hence application/javascript (30 ms a file as
// text/javascript); text/html and text/css are always compressed (a few KB, once a load).
constexpr const char* kJson = "application/json; charset=utf-8";
// The packed trace (docs/api.md, "encoding": "packed"); cpp-httplib never compresses it.
constexpr const char* kPacked = "application/octet-stream";

// JSON text of a reply; a string that is not UTF-8 (it should not get here) becomes U+FFFD
// rather than an exception.
std::string json_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), kJson);
}

void reply_error(httplib::Response& res, int status, const std::string& message) {
  reply_json(res, status, {{"error", message}});
}

// An error reply after which the connection is closed: the request's body was not read (or
// not all of it), and what is left of it must not be taken for the next request. cpp-httplib
// 0.11 closes a connection whose reply's content provider fails, so the provider writes the
// whole reply and then reports failure.
void refuse_and_close(httplib::Response& res, int status, const std::string& message, const json& field = nullptr) {
  res.status = status;
  res.set_header("Connection", "close");
  auto text = std::make_shared<std::string>(json_text({{"error", message}, {"field", field}}));
  res.set_content_provider(text->size(), kJson,
                           [text](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             sink.write(text->data() + offset, length);
                             return false;
                           });
}

// 400 with {"error": "field: message", "field": field} (field null when the error is about
// no one field); 409 for a request the server cannot take now (ConflictError: a training run
// is busy).
void reply_input_error(httplib::Response& res, const InputError& e) {
  const int status = dynamic_cast<const ConflictError*>(&e) ? 409 : 400;
  reply_json(res, status, {{"error", e.what()}, {"field", e.field().empty() ? json(nullptr) : json(e.field())}});
}

// A GET's query parameters as a JSON object of strings (each name once).
json query_json(const httplib::Request& req) {
  json q = json::object();
  for (const auto& [name, value] : req.params) {
    if (q.contains(name)) fail(name, "is given twice; give it once");
    q[name] = value;
  }
  return q;
}

std::string no_such_path(const httplib::Request& req) {
  return fmt::format("no such path: {} {} (the API is under /api/, see docs/api.md)", text_excerpt(req.method),
                     text_excerpt(req.path));
}

std::string content_type(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "application/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  if (name.ends_with(".png")) return "image/png";
  if (name.ends_with(".wasm")) return "application/wasm";
  if (name.ends_with(".json")) return kJson;
  return "application/octet-stream";
}

bool has_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// The body of a POST, read through a receiver that counts: cpp-httplib 0.11 applies its
// payload limit to Content-Length only, so a chunked body (or a compressed one as it
// inflates) would otherwise grow without bound. Reading stops at kMaxRequestBytes, whatever
// the framing, rather than refusing chunked bodies outright (411): a chunked request within
// the limit is a valid request. A Content-Length over the limit cpp-httplib refuses itself
// (status 413), after reading and dropping the body so that the client reads the reply.
// False when the request was refused (413, or 400 for a broken framing), the connection then
// closed.
bool read_body(const httplib::ContentReader& reader, httplib::Response& res, std::string& body) {
  bool over = false;
  const bool complete = reader([&](const char* data, std::size_t size) {
    if (size > kMaxRequestBytes - body.size()) {
      over = true;
      return false;
    }
    body.append(data, size);
    return true;
  });
  over = over || res.status == 413;
  if (over)
    refuse_and_close(
        res, 413, fmt::format("the request body is larger than {} bytes; send a smaller scenario", kMaxRequestBytes));
  else if (!complete)
    refuse_and_close(res, 400, "the request body ended early or its chunked framing is broken");
  return !over && complete;
}

}  // namespace

// Destroyed in reverse: the HTTP server first, then the training (a run still training is
// cancelled and waited for), then the models, and last the heavy slots the jobs held.
struct LabServer::Impl {
  Impl(std::shared_ptr<const ModelDir> model, std::filesystem::path runs_dir)
      : models(std::move(model), std::move(runs_dir)), training(models), analysis(models) {}
  HeavySlots heavy;     // default_heavy_slots(cores()), each job on cores ÷ slots threads
  ModelSources models;  // the --model directory (or none), the runs under --runs, checkpoints
  TrainingJobs training;
  AnalysisJobs analysis;  // the verdict or patching running for the page
  httplib::Server http;
  AllowedHosts allowed;
  std::chrono::steady_clock::duration budget = kRequestBudget;
  CancelToken shutdown;  // cancelled by stop(): every request's work registers it (admitted)
  // run() and stop() meet here: a stop that comes before run() starts listening is not lost.
  std::mutex lifecycle;
  bool running = false, stopped = false;
  // Each route's pattern and method, for 405 and its Allow header.
  std::vector<std::pair<std::regex, std::string>> routes;

  void get(const std::string& pattern, httplib::Server::Handler handler) {
    http.Get(pattern, [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      admitted(res, [&] { handler(req, res); });
    });
    routes.emplace_back(std::regex(pattern), "GET, HEAD");
  }

  // Runs a request's work with its time budget and its claim on the heavy-work slots
  // (admission.hpp): heavy work with every slot taken, and work past its budget, are 503s.
  // Stopping the server cancels `shutdown`: work in flight stops at its next check, and work
  // not yet started does not start; both answer 503 saying so, and the connection is closed.
  void admitted(httplib::Response& res, const std::function<void()>& work) {
    RequestScope scope(heavy);
    try {
      if (shutdown.cancelled()) throw WorkCancelled("the server is shutting down");
      CancelScope cancel(shutdown);
      DeadlineScope deadline(budget);
      work();
    } catch (const WorkCancelled&) {
      res.set_header("Connection", "close");
      reply_json(res, 503,
                 {{"error",
                   "the server is shutting down: the request was stopped before it finished; ask again once the "
                   "server is running again"},
                  {"field", nullptr}});
    } catch (const ServerBusy& e) {
      res.set_header("Retry-After", "1");
      reply_json(res, 503, {{"error", e.what()}, {"field", nullptr}});
    } catch (const DeadlineExceeded&) {
      reply_json(res, 503,
                 {{"error", fmt::format("the request took longer than the server's budget of {} s and was stopped; "
                                        "ask for less (fewer tokens, heads or probe keys) or use the CLI",
                                        std::chrono::duration<double>(budget).count())},
                  {"field", nullptr}});
    }
  }
  // A POST route: its body read and parsed (within kMaxRequestBytes and
  // kMaxRequestJsonValues), then handed to `api`; an InputError is a 400 naming the field.
  // With `body_optional`, an empty body is handed over as null.
  void post(const std::string& pattern, std::function<void(const json&, httplib::Response&)> api,
            bool body_optional = false) {
    http.Post(pattern, [this, api = std::move(api), body_optional](const httplib::Request&, httplib::Response& res,
                                                                   const httplib::ContentReader& reader) {
      std::string body;
      if (!read_body(reader, res, body)) return;
      try {
        const bool empty = body.find_first_not_of(" \t\r\n") == std::string::npos;
        const json request =
            body_optional && empty ? json(nullptr) : parse_json_document(body, "request body", kMaxRequestJsonValues);
        admitted(res, [&] { api(request, res); });
      } catch (const InputError& e) {
        reply_input_error(res, e);
      }
    });
    routes.emplace_back(std::regex(pattern), "POST");
  }

  // The methods `path` takes ("GET, HEAD", "POST"), or "" for a path no route serves.
  std::string allowed_methods(const std::string& path) const {
    std::string methods;
    for (const auto& [pattern, method] : routes)
      if (std::regex_match(path, pattern) && methods.find(method) == std::string::npos)
        methods += (methods.empty() ? "" : ", ") + method;
    return methods;
  }

  // Refuses, before routing and before its body is read, a request the server must not
  // serve (true: the reply is written). Every refusal closes the connection: the body, if
  // any, is left unread.
  bool refused(const httplib::Request& req, httplib::Response& res) const {
    if (!req.has_header("Host")) {
      refuse_and_close(res, 400, "the request has no Host header", "Host");
      return true;
    }
    const std::string host = req.get_header_value("Host");
    if (!host_allowed(host, allowed)) {
      refuse_and_close(res, 403,
                       fmt::format("the Host \"{}\" is not a name this server answers to ({} on port {}); if you "
                                   "reach it by that name, start it with --allow-host {}",
                                   text_excerpt(host), allowed.listed(), allowed.port, text_excerpt(host_name(host))),
                       "Host");
      return true;
    }
    if (req.has_header("Origin") && !origin_allowed(req.get_header_value("Origin"), allowed)) {
      refuse_and_close(
          res, 403,
          fmt::format("requests from the page at \"{}\" are refused: only the lab's own page (http://NAME:{} "
                      "for NAME in {}) may use this server; --allow-host NAME adds a name",
                      text_excerpt(req.get_header_value("Origin")), allowed.port, allowed.listed()),
          "Origin");
      return true;
    }
    const std::string methods = allowed_methods(req.path);
    if (methods.empty()) {
      if (!has_body(req)) return false;  // the router's 404 (the error handler's reply)
      refuse_and_close(res, 404, no_such_path(req));
      return true;
    }
    const bool is_post = req.method == "POST", is_get = req.method == "GET" || req.method == "HEAD";
    if (methods.find(is_post ? "POST" : is_get ? "GET" : "-") == std::string::npos) {
      res.set_header("Allow", methods);
      refuse_and_close(res, 405,
                       fmt::format("{} {} is not served; this path takes {}", text_excerpt(req.method),
                                   text_excerpt(req.path), methods));
      return true;
    }
    if (!is_post) {
      if (!has_body(req)) return false;
      refuse_and_close(res, 400, fmt::format("a {} request carries no body", text_excerpt(req.method)));
      return true;
    }
    if (!is_json_content_type(req.get_header_value("Content-Type"))) {
      refuse_and_close(res, 415,
                       fmt::format("the body's Content-Type is \"{}\"; send the JSON body as application/json",
                                   text_excerpt(req.get_header_value("Content-Type"))),
                       "Content-Type");
      return true;
    }
    if (req.has_header("Content-Encoding") && req.get_header_value("Content-Encoding") != "identity") {
      refuse_and_close(res, 415, "the request body is compressed; send it uncompressed", "Content-Encoding");
      return true;
    }
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      refuse_and_close(res, 411, "a POST needs a Content-Length (or a chunked body)");
      return true;
    }
    return false;  // a Content-Length over the limit is read_body's 413
  }
};

LabServer::LabServer() : LabServer(nullptr) {}

LabServer::LabServer(std::shared_ptr<const ModelDir> model) : LabServer(std::move(model), "attnlab-runs") {}

LabServer::LabServer(std::shared_ptr<const ModelDir> model, std::filesystem::path runs_dir)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(runs_dir))) {
  Impl& impl = *impl_;
  for (const char* name : {"127.0.0.1", "localhost", "[::1]"})
    impl.allowed.add(name);
  const ModelSources* m = &impl.models;  // lives as long as the server
  TrainingJobs* training = &impl.training;
  AnalysisJobs* analysis = &impl.analysis;
  httplib::Server& http = impl.http;
  http.set_payload_max_length(kMaxRequestBytes);  // Content-Length only; read_body counts the rest
  // Without it, the last segment of a reply can wait for the client's delayed ACK
  // (Nagle's algorithm), and the lab trades many small request-reply pairs.
  http.set_tcp_nodelay(true);
  // A page sends a request per slider step: keep its connection (cpp-httplib closes it
  // after 5 requests by default, and a new one costs a handshake).
  http.set_keep_alive_max_count(kMaxKeepAliveRequests);
  http.set_keep_alive_timeout(kKeepAliveSeconds);
  // Many more threads than cores: a slow or idle client holds a thread, not a core, so the
  // health check and the page's small requests find a free thread (admission.hpp).
  http.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  http.set_pre_routing_handler([&impl](const httplib::Request& req, httplib::Response& res) {
    return impl.refused(req, res) ? httplib::Server::HandlerResponse::Handled
                                  : httplib::Server::HandlerResponse::Unhandled;
  });

  // Health, and the heavy work running now: a client (or a test) sees that work has started.
  impl.get("/api/health", [&impl](const httplib::Request&, httplib::Response& res) {
    json health = api_health();
    health["heavy_work"] = {{"running", impl.heavy.taken()},
                            {"slots", impl.heavy.total()},
                            {"threads_per_job", impl.heavy.threads_per_job()},
                            {"cores", impl.heavy.cores()}};
    reply_json(res, 200, health);
  });
  impl.get("/api/scenarios",
           [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_scenarios()); });
  impl.get("/api/operations",
           [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_operations()); });
  impl.get("/api/models", [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_models()); });
  impl.get("/api/defaults",
           [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_defaults()); });
  impl.get(R"(/api/scenarios/([^/]+))", [](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (const auto text = api_scenario_file(name)) {
      res.set_content(std::string(*text), kJson);
      return;
    }
    reply_error(res, 404,
                fmt::format("unknown scenario \"{}\"; GET /api/scenarios lists the bundled ones", text_excerpt(name)));
  });
  impl.post("/api/attention", [m](const json& request, httplib::Response& res) {
    if (wants_packed_reply(request))
      res.set_content(api_attention_packed(request, *m), kPacked);
    else
      reply_json(res, 200, api_attention(request, *m));
  });
  impl.post("/api/probe",
            [m](const json& request, httplib::Response& res) { reply_json(res, 200, api_probe(request, *m)); });
  // The model (docs/api.md): what is loaded (?run=NAME&step=N: a training run's checkpoint),
  // and a run of it (written as text already).
  impl.get("/api/model", [m](const httplib::Request& req, httplib::Response& res) {
    try {
      json query = query_json(req);
      for (const auto& [name, value] : query.items())
        if (name != "run" && name != "step") fail(name, "unknown parameter (known: run, step)");
      if (query.contains("step")) {  // a number in the query string, checked as the body's would be
        const std::string text = query["step"];
        query["step"] = !text.empty() && text.size() <= 12 && text.find_first_not_of("0123456789") == std::string::npos
                            ? json(std::stoull(text))
                            : json(text);
      }
      reply_json(res, 200, api_model(*m, ModelSources::choice(query, "")));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  impl.post("/api/model/generate", [m](const json& request, httplib::Response& res) {
    reply_json(res, 200, api_model_generate(*m, request));
  });
  impl.post("/api/model/map",
            [m](const json& request, httplib::Response& res) { reply_json(res, 200, api_model_map(*m, request)); });
  impl.post("/api/model/run",
            [m](const json& request, httplib::Response& res) { res.set_content(api_model_run(*m, request), kJson); });
  // Attribution (docs/api.md, "Attribution"): the quick read-outs at once, the verdict and
  // patching as a job the page follows and can cancel.
  impl.post("/api/model/attribute", [m](const json& request, httplib::Response& res) {
    reply_json(res, 200, api_model_attribute(*m, request));
  });
  impl.post("/api/model/kv",
            [m](const json& request, httplib::Response& res) { reply_json(res, 200, api_model_kv(*m, request)); });
  impl.post("/api/model/circuits", [m](const json& request, httplib::Response& res) {
    reply_json(res, 200, api_model_circuits(*m, request));
  });
  impl.post("/api/model/qk",
            [m](const json& request, httplib::Response& res) { reply_json(res, 200, api_model_qk(*m, request)); });
  impl.post("/api/model/analysis", [analysis](const json& request, httplib::Response& res) {
    reply_json(res, 202, analysis->start(request));
  });
  impl.get("/api/model/analysis",
           [analysis](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, analysis->view()); });
  impl.post(
      "/api/model/analysis/cancel",
      [analysis](const json&, httplib::Response& res) { reply_json(res, 200, analysis->cancel()); },
      /*body_optional=*/true);
  // Training (docs/api.md, "Training"): a run's log and checkpoints, and runs started here.
  impl.get("/api/training", [training](const httplib::Request& req, httplib::Response& res) {
    try {
      reply_json(res, 200, training->view(query_json(req)));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  impl.get("/api/training/job",
           [training](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, training->job()); });
  impl.post("/api/training/start", [training](const json& request, httplib::Response& res) {
    reply_json(res, 202, training->start(request));
  });
  impl.post(
      "/api/training/cancel",
      [training](const json& request, httplib::Response& res) { reply_json(res, 200, training->cancel(request)); },
      /*body_optional=*/true);
  impl.post("/api/cost", [](const json& request, httplib::Response& res) { reply_json(res, 200, api_cost(request)); });
  impl.post("/api/kv", [](const json& request, httplib::Response& res) { reply_json(res, 200, api_kv(request)); });

  // The page: every embedded web file at /NAME, index.html also at /.
  impl.get(R"(/([^/]*))", [](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1];
    if (name.empty()) name = "index.html";
    for (const auto& files : {web_files(), page_engine_files()})
      for (const EmbeddedFile& f : files)
        if (f.name == name) {
          res.set_content(std::string(f.bytes), content_type(f.name));
          return;
        }
    reply_error(res, 404, fmt::format("no such page: /{}", text_excerpt(name)));
  });

  // Anything no route produced: a JSON body for 404 (unknown path), 413 (body over the
  // limit) and the rest, unless a handler already wrote one (it set a Content-Type).
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.has_header("Content-Type")) return;
    if (res.status == 413)
      reply_error(res, 413,
                  fmt::format("the request body is larger than {} bytes; send a smaller scenario", kMaxRequestBytes));
    else if (res.status == 404)
      reply_error(res, 404, no_such_path(req));
    else
      reply_error(res, res.status, fmt::format("the request could not be served (HTTP {})", res.status));
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, 500, fmt::format("internal error: {}; please report it with the request that caused it", what));
  });
}

LabServer::~LabServer() = default;

void LabServer::allow_host(const std::string& name) { impl_->allowed.add(name); }

void LabServer::set_heavy_slots(std::size_t slots) { impl_->heavy.resize(slots); }

void LabServer::set_request_budget(std::chrono::steady_clock::duration budget) { impl_->budget = budget; }

int LabServer::bind(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    fail("--port", fmt::format("{} is not a port; use 1 to 65535, or 0 for any free port", port));
  // cpp-httplib (Debian's, compiled) listens with a backlog of 5: under a burst of new
  // connections the kernel's accept queue overflows and drops a SYN, whose client then waits
  // its 1 s retransmission timeout (the soak's one health check in a thousand at ~1.02 s;
  // /proc/net/netstat's ListenOverflows counted them). The listening socket is taken as it
  // is made and listened on again with the kernel's largest backlog.
  int listening = -1;
  impl_->http.set_socket_options([&listening](socket_t sock) {
    httplib::default_socket_options(sock);
    listening = sock;
  });
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound >= 0 && listening >= 0) ::listen(listening, SOMAXCONN);
  if (bound < 0)
    throw InputError(
        fmt::format("cannot listen on {}:{} (in use, or not an address of this machine); try --port 0 "
                    "for any free port",
                    host, port));
  try {
    impl_->allowed.add(host);  // the address it listens on is a name it answers to
  } catch (const InputError&) {
    // an address cpp-httplib took but no Host header can name (it stays unreachable by name)
  }
  impl_->allowed.port = bound;
  return bound;
}

void LabServer::run() {
  {
    const std::lock_guard<std::mutex> lock(impl_->lifecycle);
    if (impl_->stopped) return;
    impl_->running = true;
  }
  impl_->http.listen_after_bind();
  const std::lock_guard<std::mutex> lock(impl_->lifecycle);
  impl_->running = false;
}

void LabServer::stop() {
  Impl& impl = *impl_;
  // First the work: requests in flight stop at their next check (503), a run training here
  // stops at its next step and writes its checkpoint and final model before this returns.
  impl.shutdown.cancel();
  impl.training.shut_down();
  impl.analysis.shut_down();
  // Then the listener. cpp-httplib's stop() does nothing until listen_after_bind() has begun
  // (it sets is_running first thing): wait for that when run() is on its way.
  std::unique_lock<std::mutex> lock(impl.lifecycle);
  impl.stopped = true;
  while (impl.running && !impl.http.is_running()) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.lock();
  }
  impl.http.stop();
}

}  // namespace attnlab
