// What `attnlab serve` accepts from a client: every request is priced against these
// before anything is allocated (docs/api.md; docs/security.md lists each with the error it
// gives). The limits of the layers below (JSON documents, scenarios) are in core/limits.hpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include "attnlab/core/limits.hpp"

namespace attnlab {

// ---- the HTTP server (`attnlab serve`) -------------------------------------------------

// Bytes of a request body, counted as they arrive whatever the framing (Content-Length,
// chunked, or until the connection closes).
inline constexpr std::size_t kMaxRequestBytes = std::size_t{1} << 20;  // 1 MiB
// JSON values in a request body, counted before it is parsed: a parsed value costs 16 bytes
// (a number) to about 70 (a string, an object with its key), so the tree stays within about
// 19 MB, where a 1 MiB body of "" or {"":0} items would parse into 25 or 28 MB (measured).
// A 256-wide head's three weight matrices are 196,608 numbers.
inline constexpr std::size_t kMaxRequestJsonValues = std::size_t{1} << 18;
// Σ over heads of n·m score cells in a trace the API returns (about 8 heads of 180 tokens;
// one head of 512); `attnlab run --json` has kMaxTraceCells.
inline constexpr std::size_t kMaxApiTraceCells = std::size_t{1} << 18;
// A request's work, priced as kMaxWorkBytes prices a scenario's (twice for interventions:
// the run before and the run after); random heads are priced against it before they are drawn.
inline constexpr std::uint64_t kMaxApiWorkBytes = std::uint64_t{256} << 20;  // 256 MiB
// A trace reply's bytes: every number at its longest (25 bytes in JSON, 8 packed).
inline constexpr std::uint64_t kMaxApiReplyBytes = std::uint64_t{64} << 20;  // 64 MiB
// The probe on the server: (m + 1) runs of a request's work.
inline constexpr std::uint64_t kMaxApiProbeWorkBytes = std::uint64_t{2} << 30;  // 2 GiB
// "measure": true in /api/cost and /api/kv: the longest context timed, and the memory the
// measure holds (cost: q, k, v, out and the kernel's scratch; KV: the cache, the random
// weights and the token table), one measure at a time.
inline constexpr std::uint64_t kMaxApiMeasureTokens = 4096;
inline constexpr std::uint64_t kMaxApiMeasureBytes = std::uint64_t{1} << 30;  // 1 GiB
// POST /api/model/run: attention weights (layers × heads × n²) of one forward pass.
inline constexpr std::size_t kMaxApiModelWeights = std::size_t{1} << 24;
// POST /api/model/generate with "trace": every head's weights over the cache, summed over the
// steps (layers × heads × Σ cache): at most some 40 MB of JSON.
inline constexpr std::size_t kMaxApiTraceWeights = std::size_t{1} << 22;
// Worker threads: a slow or idle client holds one until its read times out, so there are
// many more than cores (heavy work is limited to one slot per core separately).
inline constexpr std::size_t kServerThreads = 128;
// A request's time budget: its work stops at the next check past it (503).
inline constexpr std::chrono::seconds kRequestBudget{30};
// Keep-alive: requests per connection, and seconds a connection may sit idle between them.
inline constexpr std::size_t kMaxKeepAliveRequests = 1000;
inline constexpr time_t kKeepAliveSeconds = 2;

}  // namespace attnlab
