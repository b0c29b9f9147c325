// `attnlab explain`: a trace written out the way docs/worked-example.md writes it,
// every intermediate and the arithmetic behind it ("2×1 + 1×2 = 4").
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/core/trace.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// A number as the worked example writes it: whole numbers without decimals ("4", "-1"), others with
// `precision` decimals ("2.12"); never "-0.00".
std::string format_number(double x, int precision);

// A vector as the worked example writes it: numbers separated by one space ("0.69 0.93").
std::string format_vector(std::span<const double> v, int precision);

// Display width of a UTF-8 string: code points, which is right for the symbols used here.
std::size_t display_width(const std::string& text);

// How render_table lays out its cells: the worked example's left-aligned columns three
// spaces apart, or the CLI's figures right-aligned (labels in the first column left).
struct TableStyle {
  std::string_view indent = "   ";  // each line starts with it
  std::size_t gap = 3;              // spaces between columns
  bool right_aligned = false;       // numbers: each column right-aligned to its widest cell
  bool first_left = false;          // with right_aligned, the first column (labels) stays left
};

// The one table renderer: rows of text cells in columns as wide as their widest cell
// (display_width), no line ending in spaces.
std::string render_table(const std::vector<std::vector<std::string>>& rows, const TableStyle& style = {});

struct ExplainOptions {
  std::size_t head = 0;              // which head the steps are shown for
  std::optional<std::size_t> query;  // the query worked in full (default: scenario's, else last)
  int precision = 2;
};

// The whole explanation: scenario summary, the projection table, the score, scaled, logit
// and weight grids for one head, one query worked in full, and the layer's output.
std::string explain(const Scenario& scenario, const Trace& trace, const ExplainOptions& options);

// Runs the scenario as given and with its tokens reordered (new k = old order[k]) and
// says, token by token, whether its output changed or only moved to another row.
std::string explain_permutation(const Scenario& scenario, std::span<const std::size_t> order, int precision);

}  // namespace attnlab
