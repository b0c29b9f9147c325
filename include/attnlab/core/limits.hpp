// Every limit attnlab holds untrusted input to, in one place: scenario files read by the
// CLI, and what `attnlab serve` accepts from a client. Work is priced against these before
// anything is allocated (docs/api.md; docs/security.md lists each with the
// error it gives). Checkpoints have their own limits (attnlab/model/model.hpp, safetensors.hpp,
// bpe.hpp), and so do the shapes `attnlab cost` and `attnlab kv` compute for (cost.hpp,
// kv_memory.hpp).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>

namespace attnlab {

// ---- any JSON document attnlab reads (scenario files, request bodies) -------------------

// Nesting of [ and {: a scenario needs 4 levels, a request 6.
inline constexpr int kMaxJsonDepth = 64;
// JSON values (every number, string, key, list and object) in a scenario file, counted
// before it is parsed: the parsed tree costs 16 bytes a number and up to about 100 bytes an
// object, so at most about 1.6 GB (270 MB of numbers).
inline constexpr std::size_t kMaxJsonValues = std::size_t{1} << 24;

// ---- scenarios, from a file or a request -------------------------------------------------

inline constexpr std::uint64_t kMaxScenarioFileBytes = std::uint64_t{64} << 20;  // 64 MiB
inline constexpr std::size_t kMaxTokens = 4096;                                  // per sequence
inline constexpr std::size_t kMaxWidth = 4096;                                   // d_model, d_k, d_v, d_out
inline constexpr std::size_t kMaxHeads = 64;
inline constexpr std::size_t kMaxTraceCells = std::size_t{1} << 25;  // Σ over heads of n·m
// The memory one reference run of a scenario holds, as doubles (attnlab/scenario/price.hpp):
// the inputs, every head's weights (d_in × (2·d_k + d_v) each) and every intermediate of the
// trace (per head (n + m)·d_k + m·d_v + 5·n·m grids + 2·n·d_v + 2·n, then n·Σd_v + n·d_out).
// Random heads are priced from their widths before they are drawn.
inline constexpr std::uint64_t kMaxWorkBytes = std::uint64_t{2} << 30;  // 2 GiB

// ---- the probe (attnlab/analysis/probe.hpp): one run of the scenario per key token ------

inline constexpr std::size_t kMaxProbeKeys = 512;
inline constexpr std::size_t kMaxProbeCells = std::size_t{1} << 25;  // score cells over all its runs
// The work of all its runs: (m + 1) × one run's work bytes (the runs follow one another, so
// this bounds time; memory is one run's).
inline constexpr std::uint64_t kMaxProbeWorkBytes = std::uint64_t{16} << 30;  // 16 GiB

// ---- training (`attnlab train`, `attnlab bench --train`) ---------------------------------

// The memory a training run holds, priced from its shape flags before anything is allocated
// (attnlab/model/train_run.hpp, price_training): the parameters' state (six float copies:
// weights, gradients, AdamW's moments, the model a checkpoint writes), one sequence's
// activations and the batch's token ids. The lab's own runs have narrower limits
// (attnlab/server/training_jobs.hpp).
inline constexpr std::uint64_t kMaxTrainBytes = std::uint64_t{4} << 30;  // 4 GiB

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
// Worker threads: a slow or idle client holds one until its read times out, so there are
// many more than cores (heavy work is limited to one slot per core separately).
inline constexpr std::size_t kServerThreads = 128;
// A request's time budget: its work stops at the next check past it (503).
inline constexpr std::chrono::seconds kRequestBudget{30};
// Keep-alive: requests per connection, and seconds a connection may sit idle between them.
inline constexpr std::size_t kMaxKeepAliveRequests = 1000;
inline constexpr time_t kKeepAliveSeconds = 2;

}  // namespace attnlab
