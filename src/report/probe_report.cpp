// The probe for people (tables in the notation of explain) and for the API (JSON).
#include <cmath>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnlab/analysis/probe.hpp"
#include "attnlab/report/explain.hpp"
#include "attnlab/report/trace_json.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

std::string signed_number(double x, int p) {
  const std::string s = format_number(x, p);
  return s.starts_with('-') || s == "0" || s.find_first_not_of("0.") == std::string::npos ? s : "+" + s;
}

std::string tau_text(double tau) { return std::isnan(tau) ? "undefined" : fmt::format("{:.2f}", tau); }

json optional_text(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

std::string_view kind_name(Readout::Kind kind) {
  switch (kind) {
    case Readout::Kind::coordinate: return "coordinate";
    case Readout::Kind::direction: return "direction";
    case Readout::Kind::norm: return "norm";
    case Readout::Kind::class_probability: return "class";
  }
  return "norm";
}

}  // namespace

std::string format_probe(const ProbeResult& r, int p) {
  const std::size_t heads = r.head_names.size();
  std::string out = fmt::format("Probe: {}, query {} \"{}\", readout {}\n", r.scenario, r.query, r.query_token,
                                r.readout.description);
  out +=
      fmt::format("   output {}  →  readout {}{}\n", format_vector(r.output, p), format_number(r.readout_value, p + 2),
                  r.decision ? fmt::format(", decision {}", *r.decision) : "");

  out += "\nPer key token j, side by side:\n";
  std::vector<std::string> header{"key"};
  if (heads > 1) header.push_back(fmt::format("weight per head (0..{})", heads - 1));
  header.insert(header.end(),
                {heads > 1 ? "avg weight" : "weight", "weight·‖v‖", "erasure Δ", "without j", "grad×input"});
  std::vector<std::vector<std::string>> rows{header};
  for (const TokenMeasures& t : r.tokens) {
    std::vector<std::string> row{fmt::format("{} {}{}", t.index, t.token, t.visible ? "" : " (hidden)")};
    if (heads > 1) row.push_back(format_vector(t.weights, p));
    row.push_back(format_number(t.weight, p));
    row.push_back(format_number(t.value_weighted, p));
    row.push_back(signed_number(t.erasure, p + 1));
    row.push_back(format_number(t.readout_without, p + 1) +
                  (t.decision_without ? fmt::format(" ({}{})", *t.decision_without, t.flips ? ", flips" : "") : ""));
    row.push_back(signed_number(t.grad_x_input, p + 1));
    rows.push_back(row);
  }
  out += render_table(rows);
  out +=
      "   weight·‖v‖: how much of the mix comes from j; erasure: the readout's change when j is knocked out "
      "(the engine run again);\n   grad×input: the exact gradient of the readout with respect to x_j, dotted with "
      "x_j.\n";

  std::size_t visible = 0;
  for (const TokenMeasures& t : r.tokens)
    visible += t.visible;
  out += fmt::format("\nKendall τ between the {}weights and each measure (over the {} keys the query sees):\n",
                     heads > 1 ? "averaged " : "", visible);
  out += fmt::format("   weight·‖v‖ {},   |erasure| {},   |grad×input| {}\n", tau_text(r.tau_value_weighted),
                     tau_text(r.tau_erasure), tau_text(r.tau_grad_x_input));
  out +=
      "   (1: the same order; 0: unrelated; -1: reversed. Jain & Wallace found learned weights often "
      "uncorrelated with such measures.)\n";

  out += "\nSerrano & Smith's test (erase the highest-weighted token):\n   " + r.serrano_smith.verdict + "\n";

  const Counterfactual& c = r.counterfactual;
  out += fmt::format(
      "\nJain & Wallace's counterfactual: the most different weights for head {} \"{}\" and this query with "
      "the readout within ε = {}\n",
      c.head, r.head_names[c.head], format_number(c.epsilon, std::max(p, 3)));
  std::vector<std::vector<std::string>> cf{{"key", "weights", "counterfactual"}};
  for (std::size_t j = 0; j < c.original.size(); ++j)
    cf.push_back(
        {fmt::format("{} {}", j, r.source_tokens[j]), format_number(c.original[j], p), format_number(c.found[j], p)});
  out += render_table(cf);
  out += fmt::format("   Jensen–Shannon divergence {} bits (0: the same, 1: disjoint); readout {} → {}{}\n",
                     format_number(c.divergence, p + 1), format_number(c.readout_before, p + 2),
                     format_number(c.readout_after, p + 2),
                     c.decision_before ? fmt::format(", decision {} → {}", *c.decision_before, *c.decision_after) : "");
  out += c.exact ? "   (the readout is linear in the weights: this is the largest divergence possible)\n"
                 : "   (found by searching the edges of the simplex and moves from the original weights; a larger one "
                   "may exist)\n";
  if (!c.note.empty()) out += "   " + c.note + "\n";
  out +=
      "\nA weight shows where the head mixed from (plausible); erasure and the gradient test what the output "
      "depends on (faithful).\nNone of these alone is the model's reason: see docs/interventions.md.\n";
  return out;
}

json probe_to_json(const ProbeResult& r) {
  json tokens = json::array();
  for (const TokenMeasures& t : r.tokens)
    tokens.push_back({{"index", t.index},
                      {"token", t.token},
                      {"visible", t.visible},
                      {"weights", t.weights},
                      {"weight", t.weight},
                      {"value_weighted", t.value_weighted},
                      {"erasure", t.erasure},
                      {"readout_without", t.readout_without},
                      {"decision_without", optional_text(t.decision_without)},
                      {"flips", t.flips},
                      {"gradient", t.gradient},
                      {"grad_x_input", t.grad_x_input}});
  const SerranoSmith& ss = r.serrano_smith;
  const Counterfactual& c = r.counterfactual;
  json readout = {{"kind", std::string(kind_name(r.readout.kind))}, {"description", r.readout.description}};
  if (r.readout.kind == Readout::Kind::coordinate) readout["coordinate"] = r.readout.coordinate;
  if (r.readout.kind == Readout::Kind::direction) readout["direction"] = r.readout.direction;
  if (r.readout.kind == Readout::Kind::class_probability) {
    readout["labels"] = r.readout.labels;
    readout["class"] = r.readout.labels[r.readout.target];
  }
  return {{"scenario", r.scenario},
          {"query", r.query},
          {"query_token", r.query_token},
          {"source_tokens", r.source_tokens},
          {"heads", r.head_names},
          {"readout", readout},
          {"output", r.output},
          {"value", r.readout_value},
          {"decision", optional_text(r.decision)},
          {"tokens", tokens},
          {"kendall_tau",
           {{"value_weighted", number_or_null(r.tau_value_weighted)},
            {"erasure", number_or_null(r.tau_erasure)},
            {"grad_x_input", number_or_null(r.tau_grad_x_input)}}},
          {"serrano_smith",
           {{"top_weight", ss.top_weight},
            {"top_erasure", ss.top_erasure},
            {"has_decision", ss.has_decision},
            {"top_flips", ss.top_flips},
            {"others_flipping", ss.others_flipping},
            {"weights_agree", ss.top_weight == ss.top_erasure},
            {"verdict", ss.verdict}}},
          {"counterfactual",
           {{"head", c.head},
            {"epsilon", c.epsilon},
            {"original", c.original},
            {"found", c.found},
            {"divergence", c.divergence},
            {"readout_before", c.readout_before},
            {"readout_after", c.readout_after},
            {"decision_before", optional_text(c.decision_before)},
            {"decision_after", optional_text(c.decision_after)},
            {"output_after", c.output_after},
            {"exact", c.exact},
            {"note", c.note.empty() ? json(nullptr) : json(c.note)}}}};
}

}  // namespace attnlab
