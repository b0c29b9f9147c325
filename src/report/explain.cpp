// Writes a Trace as text for people: tables of every intermediate, and one query's
// arithmetic written out in full, in the notation of docs/worked-example.md.
#include "attnlab/report/explain.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <vector>

namespace attnlab {

namespace {

constexpr std::size_t kMaxGridRows = 24;  // larger grids are cut, with a note
constexpr std::size_t kMaxGridCols = 12;
constexpr std::size_t kMaxTermsShown = 16;  // per written-out sum

std::string token_label(std::size_t index, const std::string& name) { return fmt::format("{} {}", index, name); }

// A factor inside a written-out product: negative numbers in parentheses.
std::string factor(double x, int precision) {
  const std::string s = format_number(x, precision);
  return s.starts_with('-') ? "(" + s + ")" : s;
}

// An n × m grid with query labels down the side and key labels across the top.
std::string render_grid(const Matrix& grid, const Trace& trace, int precision) {
  const std::size_t rows = std::min(grid.rows, kMaxGridRows), cols = std::min(grid.cols, kMaxGridCols);
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header{""};
  for (std::size_t j = 0; j < cols; ++j)
    header.push_back("key " + token_label(j, trace.source_tokens[j]));
  table.push_back(header);
  for (std::size_t i = 0; i < rows; ++i) {
    std::vector<std::string> line{"query " + token_label(i, trace.tokens[i])};
    for (std::size_t j = 0; j < cols; ++j)
      line.push_back(std::isinf(grid(i, j)) ? "-inf" : format_number(grid(i, j), precision));
    table.push_back(line);
  }
  std::string out = render_table(table);
  if (grid.rows > rows || grid.cols > cols)
    out += fmt::format("   (showing {} of {} rows and {} of {} columns; `attnlab run --json` has them all)\n", rows,
                       grid.rows, cols, grid.cols);
  return out;
}

// "a + b + c" over at most kMaxTermsShown terms, noting how many were left out.
std::string join_terms(const std::vector<std::string>& terms, std::string_view separator) {
  std::string out;
  for (std::size_t k = 0; k < terms.size() && k < kMaxTermsShown; ++k)
    out += (k ? std::string(separator) : "") + terms[k];
  if (terms.size() > kMaxTermsShown) out += fmt::format("{}... ({} terms in all)", separator, terms.size());
  return out;
}

std::string describe_mask(const Scenario& s) {
  std::vector<std::string> parts;
  if (s.mask.causal) parts.push_back("causal");
  if (s.mask.window) parts.push_back(fmt::format("window {}", *s.mask.window));
  if (!s.mask.hidden_keys.empty()) parts.push_back(fmt::format("hidden keys {}", fmt::join(s.mask.hidden_keys, ",")));
  return parts.empty() ? "no mask" : fmt::format("mask: {}", fmt::join(parts, ", "));
}

// A vector for a table or a sum: in full up to kMaxNumbersShown numbers; a wider one (a
// real model's 768-wide stream) as its first and last few numbers and its width.
constexpr std::size_t kMaxNumbersShown = 16;
std::string shown_vector(std::span<const double> v, int p) {
  if (v.size() <= kMaxNumbersShown) return format_vector(v, p);
  return fmt::format("{} ... {} ({} numbers)", format_vector(v.first(4), p), format_vector(v.last(2), p), v.size());
}

std::size_t argmax(std::span<const double> v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

// One query's row, every step written out as docs/worked-example.md writes it.
std::string work_query(const Scenario& s, const Trace& trace, const HeadTrace& h, std::size_t i, int p) {
  const std::size_t m = h.keys.rows;
  std::string out = fmt::format("Query {} \"{}\", worked in full\n", i, trace.tokens[i]);

  std::vector<std::vector<std::string>> steps;
  for (std::size_t j = 0; j < m && j < kMaxTermsShown; ++j) {
    std::vector<std::string> products;
    for (std::size_t t = 0; t < h.d_k; ++t)
      if (h.d_k <= kMaxNumbersShown || t < 4 || t + 2 >= h.d_k)
        products.push_back(factor(h.queries(i, t), p) + "×" + factor(h.keys(j, t), p));
      else if (t == 4)
        products.push_back(fmt::format("... ({} terms)", h.d_k - 6));
    steps.push_back({j == 0 ? "score" : "", fmt::format("q·k_{} = {} = {}", j, join_terms(products, " + "),
                                                        format_number(h.scores(i, j), p))});
  }
  if (m > kMaxTermsShown) steps.push_back({"", fmt::format("... ({} keys in all)", m)});
  const double sqrt_d_k = std::sqrt(static_cast<double>(h.d_k));
  std::vector<std::string> scaled, logits, exps, exp_values, weights, mix;
  for (std::size_t j = 0; j < m; ++j) {
    scaled.push_back(fmt::format("{} {} {} = {}", format_number(h.scores(i, j), p), s.score_scale > 0 ? "×" : "/",
                                 format_number(s.score_scale > 0 ? s.score_scale : sqrt_d_k, p),
                                 format_number(h.scaled(i, j), p)));
    if (std::isinf(h.logits(i, j))) {
      logits.push_back("masked: -inf");
      exps.push_back("e^-inf = 0");
      weights.push_back("0 (masked)");
      continue;
    }
    logits.push_back(fmt::format("{} / {} = {}", format_number(h.scaled(i, j), p), format_number(s.temperature, p),
                                 format_number(h.logits(i, j), p)));
    const std::string power =
        h.shifts[i] == 0.0 ? format_number(h.logits(i, j), p)
                           : fmt::format("({} - {})", format_number(h.logits(i, j), p), format_number(h.shifts[i], p));
    exps.push_back(fmt::format("e^{} = {}", power, format_number(h.exponentials(i, j), p)));
    exp_values.push_back(format_number(h.exponentials(i, j), p));
    weights.push_back(fmt::format("{} / {} = {}", format_number(h.exponentials(i, j), p),
                                  format_number(h.row_sums[i], p),
                                  format_number(h.exponentials(i, j) / h.row_sums[i], p)));
    mix.push_back(fmt::format("{}×({})", format_number(h.weights(i, j), p), shown_vector(h.values.row(j), p)));
  }
  steps.push_back({"scale", s.score_scale > 0 ? fmt::format("× the model's score scale {}:   {}",
                                                            format_number(s.score_scale, p), join_terms(scaled, ",   "))
                                              : fmt::format("÷ √d_k = √{} ≈ {}:   {}", h.d_k,
                                                            format_number(sqrt_d_k, p), join_terms(scaled, ",   "))});
  steps.push_back({"temperature", fmt::format("÷ T:   {}", join_terms(logits, ",   "))});
  if (h.fully_masked[i]) {
    steps.push_back({"softmax", "every key is hidden from this query: all weights are 0 and the output is 0"});
    out += render_table(steps);
    return out;
  }
  if (h.shifts[i] != 0.0)
    steps.push_back(
        {"shift", fmt::format("the largest logit, {}, is subtracted first so e^x stays finite (the weights do "
                              "not change)",
                              format_number(h.shifts[i], p))});
  steps.push_back({"exp", join_terms(exps, ",   ")});
  steps.push_back({"sum", fmt::format("{} = {}", join_terms(exp_values, " + "), format_number(h.row_sums[i], p))});
  double weight_sum = 0;  // of the softmax's weights (a uniform ablation replaces them below)
  for (double e : h.exponentials.row(i))
    weight_sum += e / h.row_sums[i];
  if (h.ablation == HeadAblation::uniform) {
    const std::size_t visible = exp_values.size();
    steps.push_back(
        {"weights", fmt::format("{}   (softmax: sum {:.{}f})", join_terms(weights, ",   "), weight_sum, p)});
    steps.push_back({"ablated", fmt::format("uniform weights instead: 1/{} = {} on each visible key", visible,
                                            format_number(1.0 / static_cast<double>(visible), p))});
    mix.clear();
    for (std::size_t j = 0; j < m; ++j)
      if (!std::isinf(h.logits(i, j)))
        mix.push_back(fmt::format("{}×({})", format_number(h.weights(i, j), p), shown_vector(h.values.row(j), p)));
  } else {
    steps.push_back({"weights", fmt::format("{}   (sum {:.{}f})", join_terms(weights, ",   "), weight_sum, p)});
  }
  steps.push_back({"mix", fmt::format("{} = {}", join_terms(mix, " + "), shown_vector(h.mixed.row(i), p))});
  if (h.ablation == HeadAblation::zero) steps.push_back({"ablated", "the head's output is set to 0"});
  if (h.ablation == HeadAblation::mean)
    steps.push_back({"ablated", "the head's output is its mean mixed output over the tokens"});
  if (h.ablation == HeadAblation::zero || h.ablation == HeadAblation::mean || h.scale != 1.0)
    steps.push_back(
        {"output", fmt::format("{}{}", h.scale != 1.0 ? fmt::format("× {} = ", format_number(h.scale, p)) : "",
                               shown_vector(h.output.row(i), p))});
  out += render_table(steps);
  const std::size_t top = argmax(h.weights.row(i));
  out += fmt::format("   largest weight: key {} \"{}\" ({})\n", top, trace.source_tokens[top],
                     format_number(h.weights(i, top), p));
  return out;
}

}  // namespace

std::string format_number(double x, int precision) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (std::isnan(x)) return "nan";
  if (x == std::round(x) && std::abs(x) < 1e15) return fmt::format("{:.0f}", x == 0.0 ? 0.0 : x);
  std::string s = fmt::format("{:.{}f}", x, precision);
  if (s.starts_with('-') && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);  // "-0.00" -> "0.00"
  return s;
}

std::string format_vector(std::span<const double> v, int precision) {
  std::string out;
  for (std::size_t k = 0; k < v.size(); ++k)
    out += (k ? " " : "") + format_number(v[k], precision);
  return out;
}

// Display width of a UTF-8 string (counts code points, which is right for our symbols).
std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s)
    w += (c & 0xC0) != 0x80;
  return w;
}

std::string render_table(const std::vector<std::vector<std::string>>& rows, const TableStyle& style) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], display_width(row[c]));
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line(style.indent);
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(widths[c] - display_width(row[c]), ' ');
      if (c > 0) line += std::string(style.gap, ' ');
      const bool left = !style.right_aligned || (c == 0 && style.first_left);
      line += left ? row[c] + pad : pad + row[c];
    }
    while (line.size() > style.indent.size() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string explain(const Scenario& s, const Trace& trace, const ExplainOptions& options) {
  const int p = options.precision;
  const HeadTrace& h = trace.heads.at(options.head);
  const std::size_t n = trace.tokens.size(), m = trace.source_tokens.size();
  const std::size_t query = options.query.value_or(s.query.value_or(n - 1));

  std::string out = fmt::format("{}{}\n", s.name, s.description.empty() ? "" : ": " + s.description);
  out += fmt::format("{} tokens{}, d_model {}, positions {}, {} head{}, {}, temperature T = {}\n", n,
                     s.source ? fmt::format(" attending to {} source tokens (cross-attention)", m) : "", s.d_model(),
                     describe(s.positions), trace.heads.size(), trace.heads.size() == 1 ? "" : "s", describe_mask(s),
                     format_number(s.temperature, p));
  if (!s.notes.empty()) out += "\n" + s.notes + "\n";

  out += fmt::format("\nHead {} \"{}\": d_k = {}, d_v = {}\n", options.head, h.name, h.d_k, h.d_v);
  for (std::size_t k = 0; k < trace.heads.size(); ++k) {
    const HeadTrace& other = trace.heads[k];
    if (other.ablation != HeadAblation::none || other.scale != 1.0)
      out += fmt::format(
          "Intervention on head {} \"{}\": {}{}\n", k, other.name,
          other.ablation == HeadAblation::none ? "" : fmt::format("{} ablation", to_string(other.ablation)),
          other.scale == 1.0 ? ""
                             : fmt::format("{}output × {}", other.ablation == HeadAblation::none ? "" : ", ",
                                           format_number(other.scale, p)));
  }
  const AttentionInput input = attention_input(s);
  const HeadSpec& spec = s.heads[options.head];
  const auto plus = [](const std::vector<double>& bias, const char* name) {
    return bias.empty() ? std::string() : fmt::format(" + {}", name);
  };
  out += fmt::format("\n1. Project: query q = x·W_Q{}, key k = x·W_K{}, value v = x·W_V{}{}{}{}\n",
                     plus(spec.b_q, "b_Q"), plus(spec.b_k, "b_K"), plus(spec.b_v, "b_V"),
                     s.source ? " (keys and values from the source tokens)" : "",
                     spec.q_norm.empty() ? "" : " (q and k each RMS-normed by the head's weights: QK-norm)",
                     s.positions.kind == PositionKind::rope ? " (q and k then rotated by position: rope)" : "");
  std::vector<std::vector<std::string>> projection{{"token", "vector x", "query q"}};
  if (!s.source) projection[0].insert(projection[0].end(), {"key k", "value v"});
  for (std::size_t i = 0; i < n && i < kMaxGridRows; ++i) {
    projection.push_back({token_label(i, trace.tokens[i]), shown_vector(input.queries_from.row(i), p),
                          shown_vector(h.queries.row(i), p)});
    if (!s.source)
      projection.back().insert(projection.back().end(),
                               {shown_vector(h.keys.row(i), p), shown_vector(h.values.row(i), p)});
  }
  out += render_table(projection);
  if (s.source) {
    std::vector<std::vector<std::string>> source{{"source token", "vector s", "key k", "value v"}};
    for (std::size_t j = 0; j < m && j < kMaxGridRows; ++j)
      source.push_back({token_label(j, trace.source_tokens[j]), shown_vector(input.keys_from.row(j), p),
                        shown_vector(h.keys.row(j), p), shown_vector(h.values.row(j), p)});
    out += "\n" + render_table(source);
  }

  out += "\n2. Score every query against every key: q_i·k_j\n" + render_grid(h.scores, trace, p);
  out += (s.score_scale > 0 ? fmt::format("\n3. Scale: multiply by the model's score scale {} (not 1/√d_k)\n",
                                          format_number(s.score_scale, p))
                            : fmt::format("\n3. Scale: divide by √d_k = √{} ≈ {}\n", h.d_k,
                                          format_number(std::sqrt(double(h.d_k)), p))) +
         render_grid(h.scaled, trace, p);
  out += fmt::format("\n4. Logits: divide by the temperature T = {}; hidden keys become -inf ({})\n",
                     format_number(s.temperature, p), describe_mask(s)) +
         render_grid(h.logits, trace, p);
  out += "\n5. Softmax: each row of logits becomes weights that sum to 1\n" + render_grid(h.weights, trace, p);
  out += "\n" + work_query(s, trace, h, query, p);

  out += fmt::format("\nLayer output: {}\n",
                     s.w_o ? "the heads' outputs concatenated, times W_O"
                           : (trace.heads.size() > 1 ? "the heads' outputs concatenated" : "the head's output"));
  std::vector<std::vector<std::string>> outputs;
  for (std::size_t i = 0; i < n && i < kMaxGridRows; ++i)
    outputs.push_back({token_label(i, trace.tokens[i]), shown_vector(trace.output.row(i), p)});
  out += render_table(outputs);
  return out;
}

std::string explain_permutation(const Scenario& s, std::span<const std::size_t> order, int p) {
  const Trace before = run_scenario(s);
  const Trace after = run_scenario(permute_tokens(s, order));
  const std::size_t n = s.n();
  std::vector<std::size_t> new_row(n);
  for (std::size_t k = 0; k < n; ++k)
    new_row[order[k]] = k;

  std::string out = fmt::format("Permutation {}: new row k holds old token order[k]\n", fmt::join(order, ","));
  std::vector<std::vector<std::string>> table{{"token", "output before (row)", "output after (row)", "largest |Δ|"}};
  double largest = 0.0;
  std::size_t largest_at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = before.output.row(i), b = after.output.row(new_row[i]);
    double delta = 0.0;
    for (std::size_t c = 0; c < a.size(); ++c)
      delta = std::max(delta, std::abs(a[c] - b[c]));
    if (delta > largest) largest = delta, largest_at = i;
    table.push_back({token_label(i, s.tokens[i]), fmt::format("row {}: {}", i, format_vector(a, p)),
                     fmt::format("row {}: {}", new_row[i], format_vector(b, p)), format_number(delta, p + 2)});
  }
  out += render_table(table);
  double scale = 1.0;
  for (double x : before.output.data)
    scale = std::max(scale, std::abs(x));
  if (largest <= 1e-9 * scale) {
    out += "Every token's output is unchanged; only its row moved. ";
    out += s.positions.kind == PositionKind::none
               ? "Without positions, attention cannot tell the two orders apart (it is permutation-equivariant).\n"
               : "\n";
  } else {
    out += fmt::format("Outputs changed (largest |Δ| = {} at token {} \"{}\"): ", format_number(largest, p + 2),
                       largest_at, s.tokens[largest_at]);
    if (s.positions.kind != PositionKind::none)
      out += fmt::format("with {} positions, where a token stands is part of its input.\n", describe(s.positions));
    else
      out += "the mask depends on the order (a causal mask or a window sees different neighbours).\n";
  }
  return out;
}

}  // namespace attnlab
