// An intervention's result for people (a before/after table) and for the API (JSON).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnlab/report/explain.hpp"
#include "attnlab/report/intervention_report.hpp"
#include "attnlab/report/trace_json.hpp"

namespace attnlab {

std::string format_intervention(const InterventionResult& r, int p) {
  std::string out = "Interventions (applied in this order):\n";
  for (const std::string& line : r.applied)
    out += "   - " + line + "\n";
  out += "Each token's output before and after (Δ = after − before; a permuted token is compared with itself):\n";
  std::vector<std::vector<std::string>> rows{{"token", "before", "after", "Δ", "‖Δ‖"}};
  std::size_t largest = 0;
  const std::size_t n = r.before.tokens.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::string after_name = r.after.tokens[r.after_row[i]];
    const std::string label = after_name == r.before.tokens[i]
                                  ? fmt::format("{} {}", i, r.before.tokens[i])
                                  : fmt::format("{} {} → {}", i, r.before.tokens[i], after_name);
    rows.push_back({label, format_vector(r.output_before.row(i), p), format_vector(r.output_after.row(i), p),
                    format_vector(r.delta.row(i), p), format_number(r.delta_norm[i], p)});
    if (r.delta_norm[i] > r.delta_norm[largest]) largest = i;
  }
  // Left-aligned columns, as explain writes its tables.
  std::vector<std::size_t> widths(rows[0].size(), 0);
  const auto width = [](const std::string& s) {
    std::size_t w = 0;
    for (unsigned char c : s)
      w += (c & 0xC0) != 0x80;
    return w;
  };
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], width(row[c]));
  for (const auto& row : rows) {
    std::string line = "   ";
    for (std::size_t c = 0; c < row.size(); ++c)
      line += row[c] + (c + 1 < row.size() ? std::string(widths[c] - width(row[c]) + 3, ' ') : "");
    out += line + "\n";
  }
  if (n > 0 && r.delta_norm[largest] > 0)
    out += fmt::format("Largest change: token {} \"{}\", ‖Δ‖ = {}\n", largest, r.before.tokens[largest],
                       format_number(r.delta_norm[largest], p + 2));
  else
    out += "No token's output changed.\n";
  return out;
}

nlohmann::json intervention_to_json(const InterventionResult& r) {
  return {{"applied", r.applied},
          {"tokens", r.before.tokens},
          {"tokens_after", r.after.tokens},
          {"after_row", r.after_row},
          {"before", matrix_to_json(r.output_before)},
          {"after", matrix_to_json(r.output_after)},
          {"delta", matrix_to_json(r.delta)},
          {"delta_norm", r.delta_norm}};
}

}  // namespace attnlab
