// A layer's attention through the tiled kernel: the same AttentionInput the reference
// takes, the outputs only (the tiled kernel never builds the score grid, so a trace from it
// has projections and outputs but no scores, logits or weights).
#include <fmt/format.h>
#include <cmath>

#include "attnlab/core/error.hpp"
#include "attnlab/kernels/flash_attention.hpp"

namespace attnlab {

namespace {
std::vector<float> to_floats(const Matrix& m) { return std::vector<float>(m.data.begin(), m.data.end()); }
}  // namespace

Trace attend_tiled(const AttentionInput& input, AttentionOptions options) {
  if (!input.mask.hidden_keys.empty())
    fail("mask_tokens",
         "the tiled kernel takes causal and window masks only; hide tokens with the reference kernel "
         "(--kernel reference, or \"kernel\": \"reference\" in the API)");
  options.causal = input.mask.causal;
  options.window = input.mask.window;
  options.temperature = input.temperature;
  if (input.score_scale > 0) options.scale = input.score_scale;
  Trace trace;
  const std::size_t n = input.queries_from.rows, m = input.keys_from.rows;
  for (const HeadWeights& w : input.heads) {
    HeadTrace h;
    project_head(input, w, h);
    const std::vector<float> q = to_floats(h.queries), k = to_floats(h.keys), v = to_floats(h.values);
    std::vector<float> out(n * h.d_v);
    flash_attention(q.data(), k.data(), v.data(), out.data(), {1, 1, n, m, h.d_k, h.d_v}, options);
    h.output = Matrix(n, h.d_v);
    std::copy(out.begin(), out.end(), h.output.data.begin());
    trace.heads.push_back(std::move(h));
  }
  trace.concatenated = Matrix(n, 0);
  for (const HeadTrace& head : trace.heads)
    trace.concatenated = concat_columns(trace.concatenated, head.output);
  trace.output = input.w_o ? matmul(trace.concatenated, *input.w_o) : trace.concatenated;
  return trace;
}

}  // namespace attnlab
