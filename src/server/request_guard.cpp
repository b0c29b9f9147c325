// The host, origin and content-type checks of every request (request_guard.hpp).
#include "request_guard.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>

#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trimmed(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && space(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && space(text.back()))
    text.remove_suffix(1);
  return text;
}

bool all_of(std::string_view text, const char* allowed_punctuation) {
  return std::all_of(text.begin(), text.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view(allowed_punctuation).find(c) != std::string_view::npos;
  });
}

// "NAME" or "NAME:PORT" ("[v6]" or "[v6]:PORT"), split; false when it is neither.
bool split_host(std::string_view host, std::string_view& name, std::string_view& port) {
  if (host.starts_with('[')) {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    name = host.substr(0, close + 1);
    const std::string_view rest = host.substr(close + 1);
    if (rest.empty()) {
      port = {};
      return true;
    }
    if (!rest.starts_with(':')) return false;
    port = rest.substr(1);
  } else {
    const std::size_t colon = host.find(':');
    name = host.substr(0, colon);
    port = colon == std::string_view::npos ? std::string_view{} : host.substr(colon + 1);
    if (colon != std::string_view::npos && port.empty()) return false;
  }
  return port.empty() || all_of(port, "");
}

bool name_allowed(std::string_view name, const AllowedHosts& allowed) {
  const std::string wanted = lower(name);
  return std::find(allowed.names.begin(), allowed.names.end(), wanted) != allowed.names.end();
}

bool port_is(std::string_view port, int expected) { return port == std::to_string(expected); }

}  // namespace

void AllowedHosts::add(std::string_view name) {
  std::string n = lower(name);
  if (n.find(':') != std::string::npos && !n.starts_with('[')) n = "[" + n + "]";  // an IPv6 address
  const bool bracketed = n.size() > 2 && n.front() == '[' && n.back() == ']';
  const std::string_view inside = bracketed ? std::string_view(n).substr(1, n.size() - 2) : std::string_view{};
  const bool ipv6 = bracketed && std::all_of(inside.begin(), inside.end(), [](char c) {
                      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
                    });
  const bool name_or_ipv4 = !n.empty() && n.size() <= 253 && all_of(n, ".-_");
  if (!ipv6 && !name_or_ipv4)
    fail("--allow-host",
         fmt::format("\"{}\" is not a host name or an IP address; give a name such as lab.example or 192.168.1.5, "
                     "without a scheme, port or path",
                     std::string(name.substr(0, 80))));
  if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
}

std::string AllowedHosts::listed() const { return fmt::format("{}", fmt::join(names, ", ")); }

bool host_allowed(std::string_view host, const AllowedHosts& allowed) {
  std::string_view name, port;
  return split_host(host, name, port) && name_allowed(name, allowed) && (port.empty() || port_is(port, allowed.port));
}

std::string host_name(std::string_view host) {
  std::string_view name, port;
  return split_host(host, name, port) ? std::string(name) : std::string(host);
}

bool origin_allowed(std::string_view origin, const AllowedHosts& allowed) {
  constexpr std::string_view scheme = "http://";
  if (!lower(origin.substr(0, scheme.size())).starts_with(scheme)) return false;
  std::string_view name, port;
  return split_host(origin.substr(scheme.size()), name, port) && name_allowed(name, allowed) &&
         port_is(port.empty() ? "80" : port, allowed.port);
}

bool is_json_content_type(std::string_view content_type) {
  const std::size_t semicolon = content_type.find(';');
  if (lower(trimmed(content_type.substr(0, semicolon))) != "application/json") return false;
  if (semicolon == std::string_view::npos) return true;
  const std::string parameter = lower(trimmed(content_type.substr(semicolon + 1)));
  return parameter == "charset=utf-8" || parameter == "charset=\"utf-8\"";
}

}  // namespace attnlab
