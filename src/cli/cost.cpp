// attnlab cost --tokens 3,6,100000 [--d-model --heads --layers --dtype --window]
//              [--measure [--kernel grid|tiled] [--causal]] [--plot FILE.svg] [--json]
// (its flags from CostRequest's description, operations/capacity.hpp)
// What n tokens cost in attention: the grid's cells, the FLOPs, the grid's bytes, dense
// and beside a sliding window and the strided sparse pattern; --measure times attnlab's
// own kernel at doubling lengths and fits the exponent.
#include <fmt/format.h>

#include <cmath>

#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/measure.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/operations/capacity.hpp"
#include "attnlab/report/plot.hpp"
#include "common.hpp"
#include "numbers.hpp"
#include "operation_flags.hpp"

namespace attnlab::cli {

namespace {

std::string seconds_text(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} µs", s * 1e6);
}

std::string print_costs(const std::vector<GridCost>& costs, const CostShape& shape) {
  std::string out = fmt::format(
      "Attention cost by context length n: d_model {} = {} heads × d_k {}, {} layers, grid cells in {} ({} bytes)\n"
      "A cell is one query-key dot product. FLOPs per cell per head: 4·d_k (2·d_k for q·k, 2·d_v for weight·v).\n\n",
      shape.d_model, shape.heads, shape.d_k(), shape.layers, dtype_name(shape.dtype), dtype_bytes(shape.dtype));

  std::vector<std::vector<std::string>> cells{
      {"n", "dense n²", "causal n(n+1)/2", fmt::format("window w={}", format_count(shape.window)),
       shape.stride ? fmt::format("strided l={} (Child)", shape.stride) : std::string("strided √n (Child)"),
       "stride l"}};
  std::vector<std::vector<std::string>> flops{{"n", "dense", "causal",
                                               fmt::format("window w={}", format_count(shape.window)), "strided",
                                               fmt::format("dense, all {} layers", shape.layers)}};
  std::vector<std::vector<std::string>> bytes{{"n", "one head", fmt::format("one layer ({} heads)", shape.heads)}};
  for (const GridCost& c : costs) {
    const std::string n = format_count(c.n);
    cells.push_back({n, format_count(c.dense_cells), format_count(c.causal_cells), format_count(c.window_cells),
                     format_count(c.strided_cells), format_count(c.strided_stride)});
    flops.push_back({n, format_count(c.flops_layer_dense), format_count(c.flops_layer_causal),
                     format_count(c.flops_layer_window), format_count(c.flops_layer_strided),
                     format_count(c.flops_model_dense)});
    bytes.push_back({n, fmt::format("{} ({})", format_count(c.grid_bytes_head), format_bytes(c.grid_bytes_head)),
                     fmt::format("{} ({})", format_count(c.grid_bytes_layer), format_bytes(c.grid_bytes_layer))});
  }
  out += "Cells in one head's score grid (dot products):\n" + format_table(cells) + "\n";
  out += "FLOPs of one layer's attention (all heads):\n" + format_table(flops) + "\n";
  out += fmt::format("Bytes of one materialised dense grid in {}:\n", dtype_name(shape.dtype)) + format_table(bytes);
  return out;
}

std::string print_measurement(const CostMeasurement& m, const MeasuredKernel& kernel) {
  std::string out = fmt::format("\nMeasured on this machine: the {} kernel ({}), one head, d_k {}{}, n = m:\n",
                                m.kernel, kernel.description, m.d_k, m.causal ? ", causal" : "");
  std::vector<std::vector<std::string>> rows{
      {"n", "time (best)", "runs", "kernel memory (peak)", "grid n²·4 B (f32)", "peak RSS above start"}};
  for (const CostPoint& p : m.points)
    rows.push_back({format_count(p.n), seconds_text(p.seconds), std::to_string(p.runs),
                    format_bytes(p.scratch_peak_bytes), format_bytes(p.n * p.n * 4),
                    m.rss_peak_measured ? format_bytes(p.rss_peak_bytes) : "n/a"});
  out += format_table(rows);
  if (!m.time_exponent || !m.memory_exponent)
    return out + fmt::format("one length only: no exponent to fit (give a largest --tokens of at least {})\n",
                             2 * kMinMeasuredTokens);
  out += fmt::format("time grows as n^{:.2f} (least-squares fit of log time on log n; 2 for a dense grid)\n",
                     *m.time_exponent);
  out +=
      fmt::format("kernel memory grows as n^{:.2f} (2 when the n×n grid is materialised, 1 or less when it is not)\n",
                  *m.memory_exponent);
  return out;
}

void plot_costs(const std::string& path, const std::vector<GridCost>& costs, const CostShape& shape,
                const CostMeasurement* m) {
  std::vector<PlotPanel> panels;
  if (m) {
    PlotSeries time{"measured time", {}, {}, "#d62728", true, false};
    // The fit exists only with two lengths or more; without one no line is drawn.
    const double exponent = m->time_exponent.value_or(0.0);
    PlotSeries fit{fmt::format("least-squares fit: n^{:.2f}", exponent), {}, {}, "#888888", false, true};
    PlotSeries scratch{"kernel memory (allocator)", {}, {}, "#1f77b4", true, false, true, false};
    PlotSeries rss{"peak RSS above start", {}, {}, "#2ca02c", true, false};
    PlotSeries grid{"formula n²·4 B", {}, {}, "#888888", false, true};
    // The fitted line: log t = log a + b·log n with b the exponent, through the means.
    double mean_log_n = 0, mean_log_t = 0;
    for (const CostPoint& p : m->points)
      mean_log_n += std::log(static_cast<double>(p.n)), mean_log_t += std::log(std::max(p.seconds, 1e-9));
    mean_log_n /= static_cast<double>(m->points.size());
    mean_log_t /= static_cast<double>(m->points.size());
    for (const CostPoint& p : m->points) {
      const double n = static_cast<double>(p.n);
      time.x.push_back(n), time.y.push_back(p.seconds);
      fit.x.push_back(n), fit.y.push_back(std::exp(mean_log_t + exponent * (std::log(n) - mean_log_n)));
      scratch.x.push_back(n), scratch.y.push_back(static_cast<double>(p.scratch_peak_bytes));
      if (m->rss_peak_measured) rss.x.push_back(n), rss.y.push_back(static_cast<double>(p.rss_peak_bytes));
      grid.x.push_back(n), grid.y.push_back(n * n * 4);
    }
    std::vector<PlotSeries> timing{time};
    if (m->time_exponent) timing.push_back(fit);
    panels.push_back(
        {"time of one head's attention", "n (tokens)", "time", AxisUnit::count, AxisUnit::seconds, timing});
    panels.push_back({"memory", "n (tokens)", "bytes", AxisUnit::count, AxisUnit::bytes, {scratch, rss, grid}});
  } else {
    PlotSeries dense{"dense n²", {}, {}, "#d62728", true, false};
    PlotSeries window{fmt::format("window w={}", shape.window), {}, {}, "#1f77b4", true, false};
    PlotSeries strided{"strided (Child et al.)", {}, {}, "#2ca02c", true, false};
    for (const GridCost& c : costs) {
      const double n = static_cast<double>(c.n);
      dense.x.push_back(n), dense.y.push_back(static_cast<double>(c.dense_cells));
      window.x.push_back(n), window.y.push_back(static_cast<double>(c.window_cells));
      strided.x.push_back(n), strided.y.push_back(static_cast<double>(c.strided_cells));
    }
    panels.push_back({"cells in one head's grid",
                      "n (tokens)",
                      "dot products",
                      AxisUnit::count,
                      AxisUnit::count,
                      {dense, window, strided}});
  }
  write_plot(path,
             loglog_svg(m ? fmt::format("attnlab cost --measure: the {} kernel, d_k {}", m->kernel, m->d_k)
                          : "attnlab cost: what n tokens cost in attention",
                        panels),
             "--plot");
}

}  // namespace

Command cost_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("cost", std::string(CostRequest::kHelp));
  auto flags = std::make_shared<OperationFlags>(*app, describe_operation<CostRequest>());
  auto json_output = std::make_shared<bool>(false);
  app->add_flag("--json", *json_output, "The reply as JSON, as POST /api/cost answers it (docs/operations.md)");
  return {app, [flags, json_output]() {
            const CostRequest request = read_flags<CostRequest>(*flags);
            try {
              // Everything that can be refused is refused before anything is printed.
              CostResult result = price_cost(request);
              measure_cost(request, result);
              if (!request.plot.empty())
                plot_costs(request.plot, result.rows, result.shape, result.measured ? &*result.measured : nullptr);
              if (*json_output) {
                fmt::print("{}\n", cost_json(result).dump(2));
                return 0;
              }
              std::string text = print_costs(result.rows, result.shape);
              if (result.measured)
                text += print_measurement(*result.measured, find_measured_kernel(request.kernel, "kernel"));
              if (!request.plot.empty()) text += fmt::format("\nwrote {}\n", request.plot);
              fmt::print("{}", text);
              return 0;
            } catch (const InputError& e) {
              throw with_flag_name(e);
            }
          }};
}

}  // namespace attnlab::cli
