// The limits every layer shares: any JSON document attnlab reads, and a scenario, from a
// file or a request. Each other limit lives beside the layer it limits: checkpoints
// (attnlab/model/model.hpp, safetensors.hpp, bpe.hpp), training (model/train_run.hpp), the
// probe (analysis/probe.hpp), the shapes `attnlab cost` and `attnlab kv` compute for
// (cost.hpp, kv_memory.hpp), and what `attnlab serve` accepts from a client
// (server/limits.hpp). Work is priced against them before anything is allocated;
// docs/security.md lists each with the error it gives.
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

}  // namespace attnlab
