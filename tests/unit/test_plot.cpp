// The SVG charts: a well-formed document with both panels, their labels, one polyline per
// series, and tick labels in the axis units.
#include <gtest/gtest.h>

#include <regex>

#include "attnlab/report/plot.hpp"

using namespace attnlab;

namespace {
std::size_t count(const std::string& text, const std::string& what) {
  std::size_t k = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++k;
  return k;
}
}  // namespace

TEST(Plot, AxisLabelsInTheirUnits) {
  EXPECT_EQ(axis_label(1000, AxisUnit::count), "1k");
  EXPECT_EQ(axis_label(100000, AxisUnit::count), "100k");
  EXPECT_EQ(axis_label(10, AxisUnit::count), "10");
  EXPECT_EQ(axis_label(0.001, AxisUnit::seconds), "1 ms");
  EXPECT_EQ(axis_label(10, AxisUnit::seconds), "10 s");
  EXPECT_EQ(axis_label(1 << 20, AxisUnit::bytes), "1 MiB");
}

TEST(Plot, TwoPanelsWithLabelsSeriesAndTicks) {
  PlotPanel time{"time",
                 "n (tokens)",
                 "seconds",
                 AxisUnit::count,
                 AxisUnit::seconds,
                 {{"measured", {128, 256, 512}, {0.001, 0.004, 0.016}, "#d62728", true, false},
                  {"n² fit", {128, 512}, {0.001, 0.016}, "#888", false, true}}};
  PlotPanel memory{
      "memory",        "n (tokens)",
      "bytes",         AxisUnit::count,
      AxisUnit::bytes, {{"grid <f32>", {128, 256, 512}, {65536, 262144, 1048576}, "#1f77b4", true, false}}};
  const std::string svg = loglog_svg("cost & time", {time, memory});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 3u);
  EXPECT_EQ(count(svg, "<circle"), 8u) << "six points and two legend markers";
  EXPECT_EQ(count(svg, "stroke-dasharray"), 2u) << "the fit's line and its legend entry";
  for (const char* label :
       {"n (tokens)", "seconds", "bytes", "cost &amp; time", "grid &lt;f32&gt;", "1 ms", "1 MiB", "n² fit"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_EQ(count(svg, "<g>"), count(svg, "</g>"));
  EXPECT_FALSE(std::regex_search(svg, std::regex("nan|inf"))) << "no non-finite coordinates";
}
