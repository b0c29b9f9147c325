// attnlab kv --model NAME --context 4096,32768,131072 --dtype f16 [--budget 24GiB]
//            [--layers --kv-heads --head-dim --heads --d-model --params]
//            [--measure [--measure-layers N]] [--plot FILE.svg] [--json]
// (its flags from KvRequest's description, operations/capacity.hpp)
// The KV cache from the formula 2 × L × H_kv × d_head × context × bytes, beside the
// weights; the longest context a budget allows; and --measure: the cache decoded here.
#include <fmt/format.h>

#include <cmath>

#include "attnlab/analysis/kv_memory.hpp"
#include "attnlab/analysis/measure.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/operations/capacity.hpp"
#include "attnlab/report/plot.hpp"
#include "common.hpp"
#include "numbers.hpp"
#include "operation_flags.hpp"

namespace attnlab::cli {

namespace {

std::string bytes_text(std::uint64_t b) { return fmt::format("{} ({})", format_count(b), format_bytes(b)); }

std::string print_report(const KVReport& r) {
  const ModelShape& m = r.model;
  const std::uint64_t group = m.heads / m.kv_heads;
  const auto plural = [](std::uint64_t k, const char* word) {
    return fmt::format("{} {}{}", k, word, k == 1 ? "" : "s");
  };
  std::string out =
      fmt::format("{}{}: {}, {} {}, d_head {}; KV cache in {}\n", m.name,
                  m.source.empty() || m.source == "given by hand" ? "" : " (" + m.source + ")",
                  plural(m.layers, "layer"), plural(m.heads, "query head"),
                  group == 1 ? fmt::format("with as many KV heads (no grouping)")
                             : fmt::format("sharing {} KV heads ({} query heads per KV head)", m.kv_heads, group),
                  m.head_dim, dtype_name(r.dtype));
  out += fmt::format(
      "KV cache = 2 × L × H_kv × d_head × context × bytes = 2 × {} × {} × {} × context × {} = {} bytes ({}) "
      "per token\n",
      m.layers, m.kv_heads, m.head_dim, dtype_bytes(r.dtype), format_count(r.bytes_per_token),
      format_bytes(r.bytes_per_token));
  if (r.weight_bytes)
    out += fmt::format("weights: {} parameters × {} bytes ({}) = {} bytes ({})\n", format_count(m.parameters),
                       dtype_bytes(r.dtype), dtype_name(r.dtype), format_count(r.weight_bytes),
                       format_bytes(r.weight_bytes));
  else
    out += "weights: unknown (give --params N to compare the cache with the weights)\n";
  if (!m.note.empty()) out += "note: " + m.note + "\n";

  std::vector<std::vector<std::string>> rows{{"context", "KV cache", "cache ÷ weights", "cache + weights", ""}};
  for (const KVRow& row : r.rows)
    rows.push_back({format_count(row.context), bytes_text(row.cache_bytes),
                    r.weight_bytes ? fmt::format("{:.2f}", row.cache_over_weights) : "-",
                    r.weight_bytes ? format_bytes(row.total_bytes) : "-",
                    row.cache_exceeds_weights ? "the cache is larger than the weights" : ""});
  out += "\n" + format_table(rows);
  if (r.crossover_context)
    out += fmt::format("\nThe cache outgrows the weights from {} tokens on.\n", format_count(*r.crossover_context));
  if (r.budget) {
    const KVBudget& b = *r.budget;
    if (!r.weight_bytes)
      out += fmt::format(
          "Budget {}: the longest context that fits (weights unknown, so the whole budget holds cache) is "
          "{} tokens.\n",
          format_bytes(b.budget_bytes), format_count(b.max_context));
    else if (!b.weights_fit)
      out += fmt::format("Budget {}: the weights alone take {}; no context fits.\n", format_bytes(b.budget_bytes),
                         format_bytes(r.weight_bytes));
    else
      out += fmt::format(
          "Budget {}: the weights take {}, leaving {} for the cache: the longest context that fits is {} "
          "tokens.\n",
          format_bytes(b.budget_bytes), format_bytes(r.weight_bytes), format_bytes(b.left_for_cache),
          format_count(b.max_context));
  }
  return out;
}

std::string print_measurement(const KVMeasurement& m, const KVReport& r) {
  std::string out = fmt::format(
      "\nMeasured on this machine: {} decoded with random weights (d_model {}) in {} of its {} layers, KV cache in "
      "{}:\n",
      r.model.name, m.d_model, m.layers, r.model.layers, dtype_name(r.dtype));
  std::vector<std::vector<std::string>> rows{
      {"context", fmt::format("formula ({} layer{})", m.layers, m.layers == 1 ? "" : "s"), "KVCache::bytes",
       "malloc in use", "resident (RSS)", "RSS ÷ formula", "decode step"}};
  for (const KVPoint& p : m.points)
    rows.push_back({format_count(p.context), format_bytes(p.formula_bytes), format_bytes(p.cache_bytes),
                    format_bytes(p.allocator_bytes), format_bytes(p.rss_bytes),
                    fmt::format("{:.3f}", static_cast<double>(p.rss_bytes) / static_cast<double>(p.formula_bytes)),
                    fmt::format("{:.2f} ms", p.decode_seconds * 1e3)});
  out += format_table(rows);
  const KVPoint& last = m.points.back();
  const double rss = static_cast<double>(last.rss_bytes) / static_cast<double>(last.formula_bytes) - 1;
  const double heap = static_cast<double>(last.allocator_bytes) / static_cast<double>(last.formula_bytes) - 1;
  out +=
      fmt::format("At {} tokens the measured cache differs from the formula by {:+.2f}% (malloc) and {:+.2f}% (RSS).\n",
                  format_count(last.context), heap * 100, rss * 100);
  return out;
}

void plot_kv(const std::string& path, const KVReport& r, const KVMeasurement* m) {
  std::vector<PlotPanel> panels;
  // The formula as a line over the contexts' range (from 1/64 of the largest when there is
  // one context), the contexts asked for as points on it, the weights as a level line.
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (const KVRow& row : r.rows)
    lo = std::min(lo, row.context), hi = std::max(hi, row.context);
  if (lo == hi) lo = std::max<std::uint64_t>(1, hi / 64);
  PlotSeries formula{fmt::format("formula, {} layers", r.model.layers), {}, {}, "#d62728", false, true};
  PlotSeries asked{"the contexts asked for", {}, {}, "#d62728", true, false, false, false};
  PlotSeries weights{"weights", {}, {}, "#555555", false, false};
  for (int k = 0; k <= 32; ++k) {
    const double c = static_cast<double>(lo) * std::pow(static_cast<double>(hi) / static_cast<double>(lo), k / 32.0);
    formula.x.push_back(c), formula.y.push_back(c * static_cast<double>(r.bytes_per_token));
    if (r.weight_bytes) weights.x.push_back(c), weights.y.push_back(static_cast<double>(r.weight_bytes));
  }
  for (const KVRow& row : r.rows)
    asked.x.push_back(static_cast<double>(row.context)), asked.y.push_back(static_cast<double>(row.cache_bytes));
  PlotPanel model{fmt::format("{}: KV cache and weights ({})", r.model.name, dtype_name(r.dtype)),
                  "context (tokens)",
                  "bytes",
                  AxisUnit::count,
                  AxisUnit::bytes,
                  {formula, asked}};
  if (r.weight_bytes) model.series.push_back(weights);
  panels.push_back(model);
  if (m) {
    PlotSeries f{
        fmt::format("formula, {} layer{}", m->layers, m->layers == 1 ? "" : "s"), {}, {}, "#d62728", false, true};
    PlotSeries heap{"malloc in use", {}, {}, "#1f77b4", true, false, true, false};
    PlotSeries rss{"resident (RSS)", {}, {}, "#2ca02c", true, false};
    for (const KVPoint& p : m->points) {
      const double c = static_cast<double>(p.context);
      f.x.push_back(c), f.y.push_back(static_cast<double>(p.formula_bytes));
      heap.x.push_back(c), heap.y.push_back(static_cast<double>(p.allocator_bytes));
      rss.x.push_back(c), rss.y.push_back(static_cast<double>(p.rss_bytes));
    }
    panels.push_back({fmt::format("measured: {} layer{} decoded", m->layers, m->layers == 1 ? "" : "s"),
                      "context (tokens)",
                      "bytes",
                      AxisUnit::count,
                      AxisUnit::bytes,
                      {f, heap, rss}});
  }
  write_plot(path, loglog_svg(fmt::format("attnlab kv{}: {}", m ? " --measure" : "", r.model.name), panels), "--plot");
}

}  // namespace

Command kv_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("kv", std::string(KvRequest::kHelp));
  auto flags = std::make_shared<OperationFlags>(*app, describe_operation<KvRequest>());
  auto json_output = std::make_shared<bool>(false);
  app->add_flag("--json", *json_output, "The reply as JSON, as POST /api/kv answers it (docs/operations.md)");
  app->footer("Model presets: " + model_names());
  return {app, [flags, json_output]() {
            const KvRequest request = read_flags<KvRequest>(*flags);
            try {
              KvResult result = price_kv(request);
              measure_kv(result);
              if (!request.plot.empty())
                plot_kv(request.plot, result.report, result.measured ? &*result.measured : nullptr);
              if (*json_output) {
                fmt::print("{}\n", kv_json(result).dump(2));
                return 0;
              }
              std::string text = print_report(result.report);
              if (result.measured) text += print_measurement(*result.measured, result.report);
              if (!request.plot.empty()) text += fmt::format("\nwrote {}\n", request.plot);
              fmt::print("{}", text);
              return 0;
            } catch (const InputError& e) {
              throw with_flag_name(e);
            }
          }};
}

}  // namespace attnlab::cli
