// attnlab cost --tokens 3,6,100000 [--d-model --heads --layers --dtype --window]
//              [--measure [--kernel grid|tiled] [--causal]] [--plot FILE.svg]
// What n tokens cost in attention: the grid's cells, the FLOPs, the grid's bytes, dense
// and beside a sliding window and the strided sparse pattern; --measure times attnlab's
// own kernel at doubling lengths and fits the exponent.
#include <fmt/format.h>

#include <cmath>

#include "attnlab/analysis/cost.hpp"
#include "attnlab/analysis/measure.hpp"
#include "attnlab/analysis/units.hpp"
#include "attnlab/report/plot.hpp"
#include "common.hpp"
#include "numbers.hpp"

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

  std::vector<std::vector<std::string>> cells{{"n", "dense n²", "causal n(n+1)/2",
                                               fmt::format("window w={}", format_count(shape.window)),
                                               "strided √n (Child)", "stride l"}};
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
  struct State {
    std::string tokens, d_model = "4096", heads = "32", layers = "32", window = "4096", dtype = "f16", kernel = "grid",
                        plot;
    bool measure = false, causal = false;
  };
  auto state = std::make_shared<State>();
  CLI::App* app = parent.add_subcommand(
      "cost", "What n tokens cost in attention: grid cells, FLOPs, grid bytes; --measure times it here");
  app->add_option("--tokens,-n", state->tokens, "Context lengths n, comma-separated (e.g. 3,6,100000)")->required();
  app->add_option("--d-model", state->d_model, "Embedding width d_model = H · d_k")->capture_default_str();
  app->add_option("--heads", state->heads, "Heads H per layer")->capture_default_str();
  app->add_option("--layers", state->layers, "Layers L")->capture_default_str();
  app->add_option("--dtype", state->dtype, "dtype of a grid cell: f32, f16 or bf16")->capture_default_str();
  app->add_option("--window", state->window, "Keys per query in the sliding-window pattern")->capture_default_str();
  app->add_flag("--measure", state->measure,
                "Time attnlab's kernel on one head at doubling lengths up to the largest n, with memory and the "
                "fitted exponent");
  app->add_option("--kernel", state->kernel, "The kernel --measure times: grid (materialised) or tiled")
      ->capture_default_str();
  app->add_flag("--causal", state->causal, "--measure with a causal mask");
  app->add_option("--plot", state->plot, "Write a log-log chart to FILE.svg (time and memory with --measure)");
  return {app, [state]() {
            try {
              CostShape shape;
              shape.d_model = parse_count(state->d_model, "--d-model");
              shape.heads = parse_count(state->heads, "--heads");
              shape.layers = parse_count(state->layers, "--layers");
              shape.window = parse_count(state->window, "--window");
              shape.dtype = parse_dtype(state->dtype, "--dtype");
              const std::vector<std::uint64_t> tokens = parse_count_list(state->tokens, "--tokens");
              if (!state->plot.empty()) require_plot_path(state->plot, "--plot");
              validate_cost_shape(shape);
              std::vector<GridCost> costs;
              for (std::uint64_t n : tokens)
                costs.push_back(grid_cost(n, shape));
              const MeasuredKernel& kernel = find_measured_kernel(state->kernel, "--kernel");

              // Everything that can be refused is refused before anything is printed.
              std::optional<CostMeasurement> measured;
              std::string text = print_costs(costs, shape);
              if (state->measure) {
                CostMeasureOptions options;
                options.max_tokens = *std::max_element(tokens.begin(), tokens.end());
                options.d_k = shape.d_k();
                options.causal = state->causal;
                measured = measure_attention_cost(options, kernel);
                text += print_measurement(*measured, kernel);
              }
              if (!state->plot.empty()) {
                plot_costs(state->plot, costs, shape, measured ? &*measured : nullptr);
                text += fmt::format("\nwrote {}\n", state->plot);
              }
              fmt::print("{}", text);
              return 0;
            } catch (const InputError& e) {
              throw with_flag_name(e);
            }
          }};
}

}  // namespace attnlab::cli
