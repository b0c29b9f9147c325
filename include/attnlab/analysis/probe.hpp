// What drove this output? For one query token i and a scalar read off its output, the
// measures the attribution literature sets beside the attention weights, side by side:
//
//   1. the weight a_ij (per head and averaged over heads);
//   2. the value-weighted weight a_ij·‖v_j‖ (how much of the mix comes from j);
//   3. the erasure effect: the readout's change when key j is knocked out (masked, the
//      rest renormalise), computed by running the engine again;
//   4. gradient × input: the exact gradient of the readout with respect to the vector x_j
//      the heads read, written by hand through projection, rope, scores, softmax, the head
//      interventions, mixing and W_O, dotted with x_j;
//   5. Kendall τ between the weights and each other measure (Jain & Wallace), and whether
//      knocking out the highest-weighted token flips the decision while another token's
//      knock-out does (Serrano & Smith);
//
// and Jain & Wallace's counterfactual: another weight row for the same head and query, as
// far as possible in Jensen–Shannon divergence, with the readout within ε.
// docs/interventions.md says what each does and does not establish (plausible vs faithful).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/core/matrix.hpp"
#include "attnlab/core/trace.hpp"
#include "attnlab/scenario/scenario.hpp"

namespace attnlab {

// ---- the probe's limits: one run of the scenario per key token ---------------------

inline constexpr std::size_t kMaxProbeKeys = 512;
inline constexpr std::size_t kMaxProbeCells = std::size_t{1} << 25;  // score cells over all its runs
// The work of all its runs: (m + 1) × one run's work bytes (the runs follow one another, so
// this bounds time; memory is one run's).
inline constexpr std::uint64_t kMaxProbeWorkBytes = std::uint64_t{16} << 30;  // 16 GiB

// A scalar read off one query's layer output o (d_out numbers).
struct Readout {
  enum class Kind { coordinate, direction, norm, class_probability };
  Kind kind = Kind::norm;
  std::size_t coordinate = 0;       // coordinate: o[c]
  std::vector<double> direction;    // direction: o · u (d_out numbers)
  Matrix matrix;                    // class_probability: scores z = o · matrix [d_out × classes]
  std::vector<std::string> labels;  //   one per class
  std::size_t target = 0;           //   the readout is p(target) = softmax(z)[target]
  std::string description;          // "output[0]", "output · u", "‖output‖", "p(negative)"

  double value(std::span<const double> output) const;
  // ∂value/∂o (d_out numbers); for the norm, 0 at o = 0.
  std::vector<double> gradient(std::span<const double> output) const;
  // The decision an intervention can flip: the class argmax z, or the readout's sign
  // ("positive", "negative", "zero") for a coordinate or direction; none for the norm.
  std::optional<std::string> decision(std::span<const double> output) const;
  // Whether value(o) is linear in o (the counterfactual search is then exact).
  bool linear() const { return kind == Kind::coordinate || kind == Kind::direction; }
};

// Reads a readout: "norm", "coordinate:C", "direction:u1,u2,...", "class" (the class the
// output predicts) or "class:LABEL", for outputs of `scenario` (classes need its readout
// matrix). "" means "class" when the scenario has a readout, else "norm". `output` is the
// probed output row (it picks the class for "class"). Throws InputError naming `field`.
Readout parse_readout(std::string_view text, const Scenario& scenario, std::span<const double> output,
                      std::string_view field = "readout");

// The gradient of a scalar with respect to every input vector the heads read (the rows of
// attention_input(scenario): positions applied), given d_output = ∂scalar/∂output_i for
// one query i. Shapes: queries [n × d_in], keys [m × d_in]. In self-attention the same
// vector x_j is read on both sides, and its total gradient is queries_j + keys_j.
struct InputGradient {
  Matrix queries;  // through q_i = x_i · W_Q (and, with a mean ablation, every query row)
  Matrix keys;     // through k_j = s_j · W_K and v_j = s_j · W_V
};
InputGradient output_gradient(const Scenario& scenario, const Trace& trace, std::size_t query,
                              std::span<const double> d_output);

// Kendall's τ-b between two equally long lists (ties counted as Kendall's τ-b does); NaN
// when either list is constant or has fewer than two items.
double kendall_tau(std::span<const double> a, std::span<const double> b);

// Jensen–Shannon divergence of two distributions, in bits (0 for equal, at most 1).
double jensen_shannon(std::span<const double> p, std::span<const double> q);

struct TokenMeasures {
  std::size_t index = 0;
  std::string token;
  bool visible = false;         // the key takes part in query i's softmax
  std::vector<double> weights;  // a_ij per head (after the head's ablation, if any)
  double weight = 0;            // averaged over heads
  double value_weighted = 0;    // Σ_h a_ij^h ‖v_j^h‖ / H
  double readout_without = 0;   // the readout with key j knocked out
  double erasure = 0;           // readout_without - readout
  std::optional<std::string> decision_without;
  bool flips = false;            // decision_without differs from the decision
  std::vector<double> gradient;  // ∂readout/∂x_j (d_in)
  double grad_x_input = 0;       // gradient · x_j
};

struct Counterfactual {
  std::size_t head = 0;
  double epsilon = 0;
  std::vector<double> original;  // the head's weights for the query (m)
  std::vector<double> found;     // the most different row found, same support (m)
  double divergence = 0;         // JSD(original, found) in bits
  double readout_before = 0, readout_after = 0;
  std::optional<std::string> decision_before, decision_after;
  std::vector<double> output_after;  // the query's layer output with `found` (d_out)
  bool exact = false;                // the readout is linear in the weights: the maximum is exact
  std::string note;                  // why nothing was found, when nothing was
};

struct SerranoSmith {
  std::size_t top_weight = 0;   // the key with the largest averaged weight
  std::size_t top_erasure = 0;  // the key whose knock-out moves the readout most
  bool has_decision = false;
  bool top_flips = false;                    // knocking out top_weight flips the decision
  std::vector<std::size_t> others_flipping;  // other keys whose knock-out flips it
  std::string verdict;                       // one sentence
};

struct ProbeResult {
  std::string scenario;
  std::size_t query = 0;
  std::string query_token;
  std::vector<std::string> source_tokens;
  std::vector<std::string> head_names;
  Readout readout;
  std::vector<double> output;  // the query's layer output (d_out)
  double readout_value = 0;
  std::optional<std::string> decision;
  std::vector<TokenMeasures> tokens;  // one per key j
  // τ between the averaged weights and value_weighted, |erasure|, |grad_x_input|, over the
  // keys visible to the query (NaN: undefined, e.g. fewer than two visible keys).
  double tau_value_weighted = 0, tau_erasure = 0, tau_grad_x_input = 0;
  SerranoSmith serrano_smith;
  Counterfactual counterfactual;
};

struct ProbeOptions {
  std::optional<std::size_t> query;  // default: the scenario's query, else the last
  std::string readout;               // parse_readout's text
  std::size_t head = 0;              // the head whose weights the counterfactual replaces
  double epsilon = 0.01;             // |readout_after - readout_before| <= epsilon
};

// The probe refuses more than kMaxProbeKeys keys, and problems whose m + 1 forward passes
// would exceed kMaxProbeCells score cells or kMaxProbeWorkBytes of work (above).

// Runs the probe (m + 1 forward passes of the engine, plus the gradient and the search).
// Throws InputError naming query, readout, head or epsilon when one is bad.
ProbeResult probe(const Scenario& scenario, const ProbeOptions& options);

// Jain & Wallace's search on its own: for head `head` and query `query` of `trace`, a row
// of weights on the same visible keys maximising JSD to the head's row while
// |readout(o') - readout(o)| <= epsilon, where o' is the layer output with that row.
// Searches the edges of the simplex and the segments from the original row towards each
// key and between pairs of keys; for a linear readout the edges hold the exact maximum.
Counterfactual counterfactual(const Scenario& scenario, const Trace& trace, std::size_t query, std::size_t head,
                              const Readout& readout, double epsilon);

// The layer output of `query` when head `head`'s weights for it are replaced by `weights`
// (the head's ablation and scale and W_O applied as the engine applies them).
std::vector<double> output_with_weights(const Scenario& scenario, const Trace& trace, std::size_t query,
                                        std::size_t head, std::span<const double> weights);

// The probe as text: the per-token table, τ, Serrano & Smith, the counterfactual.
std::string format_probe(const ProbeResult& result, int precision);

// The probe as JSON (docs/api.md, POST /api/probe). NaN becomes null.
nlohmann::json probe_to_json(const ProbeResult& result);

}  // namespace attnlab
