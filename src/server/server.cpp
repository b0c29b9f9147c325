// The HTTP face: routes to the API functions and the embedded page. Every reply is JSON,
// a packed trace (docs/api.md, "encoding": "packed") or a page file; errors are
// {"error": ...} with 400/404/413/500, and nothing a client sends takes the server down.
#include "attnlab/server/server.hpp"

#include <httplib.h>

#include <fmt/format.h>

#include "attnlab/core/embedded.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/model/model_dir.hpp"
#include "attnlab/scenario/scenario.hpp"
#include "attnlab/server/api.hpp"
#include "attnlab/server/model_sources.hpp"
#include "attnlab/server/training_jobs.hpp"

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

void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), kJson);
}

void reply_error(httplib::Response& res, int status, const std::string& message) {
  reply_json(res, status, {{"error", message}});
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

// A body that may be empty (POST /api/training/cancel): null, or the parsed document.
json optional_body(const httplib::Request& req) {
  return req.body.find_first_not_of(" \t\r\n") == std::string::npos ? json(nullptr)
                                                                    : parse_json_document(req.body, "request body");
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

}  // namespace

// Destroyed in reverse: the HTTP server first, then the training (a run still training is
// cancelled and waited for), then the models.
struct LabServer::Impl {
  Impl(std::shared_ptr<const ModelDir> model, std::filesystem::path runs_dir)
      : models(std::move(model), std::move(runs_dir)), training(models) {}
  ModelSources models;  // the --model directory (or none), the runs under --runs, checkpoints
  TrainingJobs training;
  httplib::Server http;
};

LabServer::LabServer() : LabServer(nullptr) {}

LabServer::LabServer(std::shared_ptr<const ModelDir> model) : LabServer(std::move(model), "attnlab-runs") {}

LabServer::LabServer(std::shared_ptr<const ModelDir> model, std::filesystem::path runs_dir)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(runs_dir))) {
  const ModelSources* m = &impl_->models;  // lives as long as the server
  TrainingJobs* training = &impl_->training;
  httplib::Server& http = impl_->http;
  http.set_payload_max_length(kMaxRequestBytes);
  // Without it, the last segment of a reply can wait for the client's delayed ACK
  // (Nagle's algorithm), and the lab trades many small request-reply pairs.
  http.set_tcp_nodelay(true);
  // A page sends a request per slider step: keep its connection (cpp-httplib closes it
  // after 5 requests by default, and a new one costs a handshake).
  http.set_keep_alive_max_count(10000);

  http.Get("/api/health", [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_health()); });
  http.Get("/api/scenarios",
           [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_scenarios()); });
  http.Get("/api/models", [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_models()); });
  http.Get(R"(/api/scenarios/([^/]+))", [](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (const auto text = api_scenario_file(name)) {
      res.set_content(std::string(*text), kJson);
      return;
    }
    reply_error(res, 404, fmt::format("unknown scenario \"{}\"; GET /api/scenarios lists the bundled ones", name));
  });
  http.Post("/api/attention", [m](const httplib::Request& req, httplib::Response& res) {
    try {
      const json request = parse_json_document(req.body, "request body");
      if (wants_packed_reply(request))
        res.set_content(api_attention_packed(request, *m), kPacked);
      else
        reply_json(res, 200, api_attention(request, *m));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  http.Post("/api/probe", [m](const httplib::Request& req, httplib::Response& res) {
    try {
      reply_json(res, 200, api_probe(parse_json_document(req.body, "request body"), *m));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  // The model (docs/api.md): what is loaded (?run=NAME&step=N: a training run's checkpoint),
  // and a run of it (written as text already).
  http.Get("/api/model", [m](const httplib::Request& req, httplib::Response& res) {
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
  http.Post("/api/model/run", [m](const httplib::Request& req, httplib::Response& res) {
    try {
      res.set_content(api_model_run(*m, parse_json_document(req.body, "request body")), kJson);
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  // Training (docs/api.md, "Training"): a run's log and checkpoints, and runs started here.
  http.Get("/api/training", [training](const httplib::Request& req, httplib::Response& res) {
    try {
      reply_json(res, 200, training->view(query_json(req)));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  http.Get("/api/training/job",
           [training](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, training->job()); });
  http.Post("/api/training/start", [training](const httplib::Request& req, httplib::Response& res) {
    try {
      reply_json(res, 202, training->start(parse_json_document(req.body, "request body")));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  http.Post("/api/training/cancel", [training](const httplib::Request& req, httplib::Response& res) {
    try {
      reply_json(res, 200, training->cancel(optional_body(req)));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  // The other POST endpoints: a JSON body in, the API function's JSON out.
  for (const auto& [path, api] : {std::pair{"/api/cost", &api_cost}, std::pair{"/api/kv", &api_kv}})
    http.Post(path, [api](const httplib::Request& req, httplib::Response& res) {
      try {
        reply_json(res, 200, api(parse_json_document(req.body, "request body")));
      } catch (const InputError& e) {
        reply_input_error(res, e);
      }
    });

  // The page: every embedded web file at /NAME, index.html also at /.
  http.Get(R"(/([^/]*))", [](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1];
    if (name.empty()) name = "index.html";
    for (const auto& files : {web_files(), page_engine_files()})
      for (const EmbeddedFile& f : files)
        if (f.name == name) {
          res.set_content(std::string(f.bytes), content_type(f.name));
          return;
        }
    reply_error(res, 404, fmt::format("no such page: /{}", name));
  });

  // Anything no route produced: a JSON body for 404 (unknown path), 413 (body over the
  // limit), 405 and the rest, unless a handler already wrote one.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      reply_error(res, 413,
                  fmt::format("the request body is larger than {} bytes; send a smaller scenario", kMaxRequestBytes));
    else if (res.status == 404)
      reply_error(res, 404,
                  fmt::format("no such path: {} {} (the API is under /api/, see docs/api.md)", req.method, req.path));
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

int LabServer::bind(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    fail("--port", fmt::format("{} is not a port; use 1 to 65535, or 0 for any free port", port));
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound < 0)
    throw InputError(
        fmt::format("cannot listen on {}:{} (in use, or not an address of this machine); try --port 0 "
                    "for any free port",
                    host, port));
  return bound;
}

void LabServer::run() { impl_->http.listen_after_bind(); }

void LabServer::stop() { impl_->http.stop(); }

}  // namespace attnlab
