// intervene(): the scenario run as given and with the interventions applied, each token's
// output compared with itself (a permuted token is followed to its new row).
#include "attnlab/analysis/intervene.hpp"

#include <algorithm>
#include <cmath>

namespace attnlab {

InterventionResult intervene(const Scenario& s, const Interventions& iv) {
  InterventionResult r;
  r.before_scenario = s;
  r.after_scenario = apply_interventions(s, iv);
  r.applied = describe(iv, s);
  r.before = run_scenario(r.before_scenario);
  r.after = run_scenario(r.after_scenario);

  const std::size_t n = s.n();
  r.after_row.resize(n);
  for (std::size_t k = 0; k < n; ++k)
    r.after_row[iv.permute ? (*iv.permute)[k] : k] = k;

  r.output_before = r.before.output;
  r.output_after = Matrix(n, r.after.output.cols);
  r.delta = Matrix(n, r.after.output.cols);
  for (std::size_t i = 0; i < n; ++i) {
    const auto after = r.after.output.row(r.after_row[i]);
    std::copy(after.begin(), after.end(), r.output_after.row(i).begin());
    double squares = 0.0;
    for (std::size_t c = 0; c < after.size(); ++c) {
      r.delta(i, c) = after[c] - r.output_before(i, c);
      squares += r.delta(i, c) * r.delta(i, c);
    }
    r.delta_norm.push_back(std::sqrt(squares));
  }
  return r;
}

}  // namespace attnlab
