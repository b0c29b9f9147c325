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
// no one field).
void reply_input_error(httplib::Response& res, const InputError& e) {
  reply_json(res, 400, {{"error", e.what()}, {"field", e.field().empty() ? json(nullptr) : json(e.field())}});
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

struct LabServer::Impl {
  httplib::Server http;
  std::shared_ptr<const ModelDir> model;  // null: the lab without a model
};

LabServer::LabServer() : LabServer(nullptr) {}

LabServer::LabServer(std::shared_ptr<const ModelDir> model) : impl_(std::make_unique<Impl>()) {
  impl_->model = std::move(model);
  const ModelDir* m = impl_->model.get();  // lives as long as the server
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
        res.set_content(api_attention_packed(request, m), kPacked);
      else
        reply_json(res, 200, api_attention(request, m));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  http.Post("/api/probe", [m](const httplib::Request& req, httplib::Response& res) {
    try {
      reply_json(res, 200, api_probe(parse_json_document(req.body, "request body"), m));
    } catch (const InputError& e) {
      reply_input_error(res, e);
    }
  });
  // The model (docs/api.md): what is loaded, and a run of it (written as text already).
  http.Get("/api/model", [m](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, api_model(m)); });
  http.Post("/api/model/run", [m](const httplib::Request& req, httplib::Response& res) {
    try {
      res.set_content(api_model_run(m, parse_json_document(req.body, "request body")), kJson);
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
