// Who may drive the server (private to src/server): the checks every request passes before
// it is routed, as plain functions of header values, so that server.cpp only wires them in.
//
// Why. A web page on any site can make the browser send requests to 127.0.0.1: with a name
// it controls that resolves to 127.0.0.1 (DNS rebinding) the requests even count as its own
// origin, and a "simple" cross-origin POST (text/plain, no preflight) needs no permission
// at all. So the server answers only to the host names it was started for, refuses an
// Origin that is not its own, and takes POST bodies only as application/json, which a
// browser never sends cross-origin without a preflight this server does not grant.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace attnlab {

// The names (and the one port) the server answers to: 127.0.0.1, localhost and [::1], the
// address it listens on, and any given by `attnlab serve --allow-host NAME`.
struct AllowedHosts {
  std::vector<std::string> names;  // lower case; IPv6 addresses in brackets
  int port = 0;

  // Adds a name, normalised (lower case, an IPv6 address bracketed). Throws InputError
  // naming "--allow-host" for anything but a host name or an IP address.
  void add(std::string_view name);
  std::string listed() const;  // "127.0.0.1, localhost, [::1]"
};

// A Host header value: an allowed name, with no port or with the server's.
bool host_allowed(std::string_view host, const AllowedHosts& allowed);
// The name of a Host header value, without its port ("evil.example:8080" -> "evil.example").
std::string host_name(std::string_view host);
// An Origin header value: http://NAME[:PORT] with NAME allowed and PORT the server's (80
// when absent), the server's own origin under any name it answers to.
bool origin_allowed(std::string_view origin, const AllowedHosts& allowed);
// A Content-Type that says JSON: application/json, with at most a charset=utf-8 parameter.
bool is_json_content_type(std::string_view content_type);

}  // namespace attnlab
