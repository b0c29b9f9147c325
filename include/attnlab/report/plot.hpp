// Log-log line charts as SVG text, for `--plot FILE.svg`: hand-written SVG, no library,
// one or more panels side by side, each with labelled axes, grid lines at the ticks and a
// legend under it.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab {

struct PlotSeries {
  std::string label;
  std::vector<double> x, y;  // points, x and y > 0 (others are skipped)
  std::string color = "#1f77b4";
  bool markers = true;  // a circle at each point
  bool dashed = false;  // a dashed line (formulas, fits) instead of a solid one
  bool hollow = false;  // larger open circles, to show points that lie on another series
  bool line = true;     // false: markers only
};

enum class AxisUnit { count, seconds, bytes };

struct PlotPanel {
  std::string title;
  std::string x_label, y_label;
  AxisUnit x_unit = AxisUnit::count, y_unit = AxisUnit::count;
  std::vector<PlotSeries> series;
};

// The SVG document: a title line on top, the panels side by side below it, each with
// logarithmic x and y axes (ticks at powers of 10 for counts and seconds, of 1024 or
// sub-multiples for bytes, labelled "1 ms", "64 MiB", "100k").
std::string loglog_svg(std::string_view title, const std::vector<PlotPanel>& panels);

// Writes `text` to `path`. Throws InputError naming `field` when the file cannot be written.
void write_text_file(const std::string& path, const std::string& text, std::string_view field);

// Refuses a plot path that ends in neither .svg nor .png (before any work is done).
void require_plot_path(std::string_view path, std::string_view field);

// Writes a chart to `path`: SVG as it is, or PNG (rasterised by rsvg-convert) when the
// path ends in .png. Throws InputError naming `field` for another extension, a missing
// rsvg-convert (it says which package to install) or a path that cannot be written.
void write_plot(const std::string& path, const std::string& svg, std::string_view field);

// A tick label for an axis unit: 1000 -> "1k", 0.001 s -> "1 ms", 2^20 bytes -> "1 MiB".
std::string axis_label(double value, AxisUnit unit);

}  // namespace attnlab
