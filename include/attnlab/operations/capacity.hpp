// `cost` and `kv`, described once (operations/request.hpp): what n tokens cost in
// attention, and what the KV cache takes. The command (attnlab cost, attnlab kv), POST
// /api/cost and /api/kv, and Python's attnlab.cost() and attnlab.kv() read these requests,
// call these entries and write these replies.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/measure.hpp"
#include "attnlab/operations/request.hpp"

namespace attnlab {

// How much a face lets a measurement take (the server's limits are smaller than the
// command's, which has the machine to itself).
struct MeasureLimits {
  std::uint64_t max_tokens = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();
  std::string_view who = "this machine";  // who measures, for the message ("the server")
  std::string_view elsewhere = "";        // where to go for more ("run `attnlab cost --measure` for more")
};

// ---- cost --------------------------------------------------------------------------------

struct CostRequest {
  static constexpr std::string_view kName = "cost";
  static constexpr std::string_view kHelp =
      "What n tokens cost in attention: grid cells, FLOPs, grid bytes; measure times it here";

  std::vector<std::uint64_t> tokens;
  CostShape shape;  // its defaults are the library's (analysis/cost.hpp)
  bool measure = false;
  std::string kernel = "grid";
  bool causal = false;
  std::string plot;

  template <class Field>
  void for_each(Field&& field) {
    field(tokens, {.name = "tokens",
                   .help = "Context lengths n",
                   .unit = "tokens",
                   .required = true,
                   .short_flag = "-n",
                   .example = "3,6,100000"});
    field(shape.d_model, {.name = "d_model", .help = "Embedding width d_model = H · d_k"});
    field(shape.heads, {.name = "heads", .help = "Heads H per layer"});
    field(shape.layers, {.name = "layers", .help = "Layers L"});
    field(shape.dtype, {.name = "dtype", .help = "The dtype of a grid cell"});
    field(shape.window, {.name = "window", .help = "Keys per query in the sliding-window pattern", .unit = "tokens"});
    field(shape.stride,
          {.name = "stride", .help = "The strided pattern's stride l (0: ⌈√n⌉ for each n)", .range = {0, 1ull << 32}});
    field(measure, {.name = "measure",
                    .help = "Time attnlab's kernel on one head at doubling lengths up to the largest n, with memory "
                            "and the fitted exponent"});
    field(kernel, {.name = "kernel", .help = "The kernel measure times: grid (materialised) or tiled"});
    field(causal, {.name = "causal", .help = "Measure with a causal mask"});
    field(plot, {.name = "plot",
                 .help = "Write a log-log chart to FILE.svg or .png (time and memory with measure)",
                 .faces = kCommandLine});
  }
};

struct CostResult {
  CostShape shape;
  std::vector<GridCost> rows;
  std::optional<CostMeasurement> measured;
};

// Checks the request (shape, lengths, kernel, and a measurement against `limits`) and
// counts the grid: everything that can be refused is refused here, before any timing.
CostResult price_cost(const CostRequest& request, const MeasureLimits& limits = {});
// Times the kernel when the request asks (price_cost first).
void measure_cost(const CostRequest& request, CostResult& result);
// {"shape", "rows": [grid_cost_json...], "measured": null | {"kernel", "d_k", "causal", "points":
// [{"n", "seconds", "runs", "kernel_bytes", "grid_formula_bytes", "rss_peak_bytes"}],
// "time_exponent", "memory_exponent"}} (docs/api.md).
nlohmann::json cost_json(const CostResult& result);

// ---- kv ----------------------------------------------------------------------------------

struct KvRequest {
  static constexpr std::string_view kName = "kv";
  static constexpr std::string_view kHelp =
      "KV-cache memory: the formula beside the weights, a budget's longest context; measure decodes it here";

  std::optional<std::string> model;
  std::vector<std::uint64_t> context = {4096, 32768, 131072};
  DType dtype = DType::f16;
  ByteSize budget;
  ShapeOverrides shape;
  bool measure = false;
  std::optional<std::uint64_t> measure_layers;
  std::string plot;

  template <class Field>
  void for_each(Field&& field) {
    field(model, {.name = "model", .help = "A model preset (attnlab kv's list, GET /api/models)", .short_flag = "-m"});
    field(context, {.name = "context", .help = "Context lengths", .unit = "tokens", .short_flag = "-c"});
    field(dtype, {.name = "dtype", .help = "Storage dtype of the cache and the weights"});
    field(budget, {.name = "budget",
                   .help = "Memory budget (24GiB, 512MiB, 1.5GB or bytes): the longest context "
                           "that fits",
                   .unit = "bytes"});
    field(shape.layers, {.name = "layers", .help = "Layers L (any other shape, or override the preset)"});
    field(shape.kv_heads, {.name = "kv_heads", .help = "Key/value heads H_kv"});
    field(shape.head_dim, {.name = "head_dim", .help = "Width d_head of one head's keys and values"});
    field(shape.heads, {.name = "heads", .help = "Query heads H (a multiple of H_kv; default H_kv)"});
    field(shape.d_model,
          {.name = "d_model", .help = "Embedding width, for measure's projections (default H × d_head)"});
    field(shape.parameters,
          {.name = "params", .help = "Parameter count, for the weights line of a shape given by hand"});
    field(measure, {.name = "measure",
                    .help = "Decode with random weights into a real KV cache up to the largest context and measure "
                            "its bytes"});
    field(measure_layers, {.name = "measure_layers",
                           .help = "Layers measure decodes (default: all, or as many as fit in 2 GiB / half the free "
                                   "memory)",
                           .range = {1}});
    field(plot, {.name = "plot",
                 .help = "Write a log-log chart of the cache against context to FILE.svg or .png",
                 .faces = kCommandLine});
  }
};

struct KvResult {
  KVReport report;
  std::optional<KVMeasureOptions> measure;  // what measure_kv will decode, when asked
  std::optional<KVMeasurement> measured;
};

KvResult price_kv(const KvRequest& request, const MeasureLimits& limits = {});
void measure_kv(KvResult& result);
// kv_report_json with "measured": null | {"layers", "d_model", "points": [{"context",
// "formula_bytes", "cache_bytes", "allocator_bytes", "rss_bytes", "decode_seconds"}]}.
nlohmann::json kv_json(const KvResult& result);

}  // namespace attnlab
