// Hand-written SVG for log-log charts: map each value through log10, draw grid lines at
// the ticks, the series as polylines, a legend in the top-left corner of each panel.
#include "attnlab/report/plot.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "attnlab/analysis/units.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

constexpr double kPanelWidth = 480, kPanelHeight = 380, kTitleHeight = 34;
constexpr double kLeft = 78, kRight = 18, kTop = 34, kBottom = 56;

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string trim_number(double v) {
  std::string s = fmt::format("{:.3g}", v);
  return s;
}

// Tick values between lo and hi (both > 0): powers of 10 (counts, seconds) or of 2 with a
// step that gives at most 8 ticks (bytes).
std::vector<double> ticks(double lo, double hi, AxisUnit unit) {
  std::vector<double> out;
  if (unit == AxisUnit::bytes) {
    const int first = static_cast<int>(std::floor(std::log2(lo))), last = static_cast<int>(std::ceil(std::log2(hi)));
    int step = 1;
    while ((last - first) / step > 7)
      step *= 2;
    for (int e = first - (first % step + step) % step; e <= last; e += step) {
      const double v = std::ldexp(1.0, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push_back(v);
    }
  } else {
    const int first = static_cast<int>(std::floor(std::log10(lo))), last = static_cast<int>(std::ceil(std::log10(hi)));
    int step = 1;
    while ((last - first) / step > 7)
      ++step;
    for (int e = first; e <= last; e += step) {
      const double v = std::pow(10.0, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push_back(v);
    }
  }
  return out;
}

}  // namespace

std::string axis_label(double v, AxisUnit unit) {
  switch (unit) {
    case AxisUnit::bytes: return format_bytes(static_cast<std::uint64_t>(std::llround(v)));
    case AxisUnit::seconds:
      if (v >= 1) return trim_number(v) + " s";
      if (v >= 1e-3) return trim_number(v * 1e3) + " ms";
      if (v >= 1e-6) return trim_number(v * 1e6) + " µs";
      return trim_number(v * 1e9) + " ns";
    case AxisUnit::count:
      if (v >= 1e9) return trim_number(v / 1e9) + "G";
      if (v >= 1e6) return trim_number(v / 1e6) + "M";
      if (v >= 1e3) return trim_number(v / 1e3) + "k";
      return trim_number(v);
  }
  return trim_number(v);
}

std::string loglog_svg(std::string_view title, const std::vector<PlotPanel>& panels) {
  const double width = kPanelWidth * static_cast<double>(std::max<std::size_t>(panels.size(), 1));
  // The legends sit under the panels, one line per series.
  std::size_t most_series = 0;
  for (const PlotPanel& panel : panels)
    most_series = std::max(most_series, panel.series.size());
  const double height = kTitleHeight + kPanelHeight + 18 * static_cast<double>(most_series) + 6;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      width, height, width / 2, escape(title));

  for (std::size_t p = 0; p < panels.size(); ++p) {
    const PlotPanel& panel = panels[p];
    const double x0 = kPanelWidth * static_cast<double>(p) + kLeft,
                 x1 = kPanelWidth * static_cast<double>(p + 1) - kRight;
    const double y0 = kTitleHeight + kTop, y1 = kTitleHeight + kPanelHeight - kBottom;  // y0 top, y1 bottom

    // The data's range, widened to whole ticks around it.
    double x_lo = INFINITY, x_hi = 0, y_lo = INFINITY, y_hi = 0;
    for (const PlotSeries& s : panel.series)
      for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
        if (s.x[i] > 0 && s.y[i] > 0) {
          x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
          y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
        }
    if (!(x_hi > 0)) x_lo = 1, x_hi = 10, y_lo = 1, y_hi = 10;
    const auto widen = [](double& lo, double& hi, AxisUnit unit) {
      const double base = unit == AxisUnit::bytes ? 2.0 : 10.0;
      lo = std::pow(base, std::floor(std::log(lo) / std::log(base) + 1e-9));
      hi = std::pow(base, std::ceil(std::log(hi * 1.2) / std::log(base) - 1e-9));  // room above the top point
      if (hi <= lo) hi = lo * base;
    };
    widen(x_lo, x_hi, panel.x_unit);
    widen(y_lo, y_hi, panel.y_unit);
    const auto px = [&](double x) {
      return x0 + (std::log(x) - std::log(x_lo)) / (std::log(x_hi) - std::log(x_lo)) * (x1 - x0);
    };
    const auto py = [&](double y) {
      return y1 - (std::log(y) - std::log(y_lo)) / (std::log(y_hi) - std::log(y_lo)) * (y1 - y0);
    };

    svg += fmt::format("<g>\n<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
                       (x0 + x1) / 2, y0 - 12, escape(panel.title));
    for (double t : ticks(x_lo, x_hi, panel.x_unit))
      svg += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
          "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
          px(t), y0, y1, y1 + 16, escape(axis_label(t, panel.x_unit)));
    for (double t : ticks(y_lo, y_hi, panel.y_unit))
      svg += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
          "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
          x0, py(t), x1, x0 - 6, py(t) + 4, escape(axis_label(t, panel.y_unit)));
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#333\"/>\n", x0, y0,
        x1 - x0, y1 - y0);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", (x0 + x1) / 2, y1 + 38,
                       escape(panel.x_label));
    svg += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                       x0 - 62, (y0 + y1) / 2, escape(panel.y_label));

    std::string legend;
    for (std::size_t k = 0; k < panel.series.size(); ++k) {
      const PlotSeries& s = panel.series[k];
      std::string points;
      for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
        if (s.x[i] > 0 && s.y[i] > 0) points += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y[i]));
      if (s.line)
        svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n", s.color,
                           s.dashed ? " stroke-dasharray=\"6 4\"" : "", points);
      const auto marker = [&](double cx, double cy) {
        return s.hollow ? fmt::format(
                              "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"6\" fill=\"none\" stroke=\"{}\" "
                              "stroke-width=\"2\"/>\n",
                              cx, cy, s.color)
                        : fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", cx, cy, s.color);
      };
      if (s.markers)
        for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
          if (s.x[i] > 0 && s.y[i] > 0) svg += marker(px(s.x[i]), py(s.y[i]));
      // Legend entry, under the panel: the line (if any) and the marker (if any).
      const double lx = x0;
      const double ly = kTitleHeight + kPanelHeight + 4 + 18 * static_cast<double>(k);
      if (s.line)
        legend += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
            "stroke-width=\"2\"{4}/>",
            lx, ly, lx + 24, s.color, s.dashed ? " stroke-dasharray=\"6 4\"" : "");
      if (s.markers) legend += marker(lx + 12, ly);
      legend += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 30, ly + 4, escape(s.label));
    }
    svg += legend;
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

void write_text_file(const std::string& path, const std::string& text, std::string_view field) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out)
    fail(field, fmt::format("cannot write \"{}\" ({}); give a path in a directory that exists and is writable", path,
                            std::strerror(errno)));
}

void require_plot_path(std::string_view path, std::string_view field) {
  if (!path.ends_with(".svg") && !path.ends_with(".png"))
    fail(field, fmt::format("\"{}\" ends in neither .svg nor .png; give e.g. plot.svg or plot.png", path));
}

void write_plot(const std::string& path, const std::string& svg, std::string_view field) {
  require_plot_path(path, field);
  if (path.ends_with(".svg")) return write_text_file(path, svg, field);
  // PNG: the same SVG, rasterised by librsvg's rsvg-convert (Debian package librsvg2-bin).
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0)
    fail(field, fmt::format("writing a PNG needs rsvg-convert (apt-get install librsvg2-bin); or write {}.svg",
                            path.substr(0, path.size() - 4)));
  const std::string svg_path = path + ".tmp.svg";
  write_text_file(svg_path, svg, field);
  const std::string command = fmt::format("rsvg-convert --background-color=white -o '{}' '{}' 2>&1", path, svg_path);
  const int status = path.find('\'') == std::string::npos ? std::system(command.c_str()) : -1;
  std::remove(svg_path.c_str());
  if (status != 0)
    fail(field, fmt::format("could not write the PNG \"{}\" (rsvg-convert failed; the path must be writable and "
                            "contain no quote)",
                            path));
}

}  // namespace attnlab
