// The lab's JSON API as plain functions (docs/api.md): the HTTP server only routes to
// these, and tests can call them without a socket.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attnlab {

// The API refuses traces larger than this (Σ over heads of n·m score cells): the reply
// carries every intermediate of every cell. `attnlab run --json` has no such limit.
inline constexpr std::size_t kMaxApiTraceCells = 1u << 18;
inline constexpr std::size_t kMaxRequestBytes = 1u << 20;  // 1 MiB

// GET /api/health -> {"ok": true, "version": "..."}
nlohmann::json api_health();

// GET /api/scenarios -> {"scenarios": [{"name", "description", "default"}]}
nlohmann::json api_scenarios();

// GET /api/scenarios/{name} -> the bundled file's text, or nothing for an unknown name.
std::optional<std::string_view> api_scenario_file(std::string_view name);

// POST /api/attention: {"scenario": name or object, "options": {...}} -> the trace plus
// "scenario_json". Throws InputError naming the field for a bad request.
nlohmann::json api_attention(const nlohmann::json& request);

}  // namespace attnlab
