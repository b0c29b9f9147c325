// Direct logit attribution and the logit lens (attnlab/analysis/attribution.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

double dot(std::span<const float> x, const std::vector<double>& r) {
  double s = 0;
  for (std::size_t k = 0; k < r.size(); ++k)
    s += double(x[k]) * r[k];
  return s;
}

int top_token(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

LogitAttribution attribute_logit(const Model& model, std::span<const int> ids, const LogitTarget& want) {
  const ModelConfig& c = model.config;
  ForwardOptions options;
  options.keep_stream = true;
  const ForwardResult run = model_forward(model, ids, options);
  const std::size_t n = run.n, d = c.n_embd, V = c.vocab_size, H = c.n_head;
  LogitAttribution out;
  out.n = n;
  out.position = want.position.value_or(n - 1);
  if (out.position >= n)
    fail("position", fmt::format("{} is past the last token ({} tokens, positions 0 to {})", out.position, n, n - 1));
  const std::span<const float> logits(run.logits.data() + out.position * V, V);
  out.target = want.target >= 0 ? want.target : top_token(logits);
  out.contrast = want.contrast;
  const std::span<const float> x(run.final_stream.data() + out.position * d, d);
  const LogitDirection direction = logit_direction(model, x, out.target, out.contrast);
  out.logit = logits[static_cast<std::size_t>(out.target)] -
              (out.contrast >= 0 ? logits[static_cast<std::size_t>(out.contrast)] : 0.0);
  out.final_bias = direction.bias;
  out.heads.assign(c.n_layer * H, 0.0);
  for (const StreamPart& part : stream_parts(model, ids, run, out.position)) {
    const double logit = dot(part.vector, direction.r);
    out.parts.push_back({part.kind, part.layer, part.head, logit});
    if (part.kind == PartKind::head) out.heads[part.layer * H + part.head] = logit;
  }
  out.sources.assign(c.n_layer * H * n, 0.0);
  out.by_source.assign(n, 0.0);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    check_deadline();
    for (std::size_t h = 0; h < H; ++h) {
      const std::vector<float> rows = head_source_parts(model, run, {l, h}, out.position);
      for (std::size_t j = 0; j <= out.position; ++j) {
        const double logit = dot({rows.data() + j * d, d}, direction.r);
        out.sources[(l * H + h) * n + j] = logit;
        out.by_source[j] += logit;
      }
    }
  }
  return out;
}

LogitLens logit_lens(const Model& model, std::span<const int> ids, int target) {
  const ModelConfig& c = model.config;
  ForwardOptions options;
  options.keep_stream = true;
  const ForwardResult run = model_forward(model, ids, options);
  const std::size_t n = run.n, V = c.vocab_size;
  LogitLens lens;
  lens.rows = c.n_layer + 1, lens.n = n;
  lens.target = target >= 0 ? target : top_token({run.logits.data() + (n - 1) * V, V});
  if (static_cast<std::size_t>(lens.target) >= V)
    fail("target", fmt::format("token id {} is outside the vocabulary (0 to {})", lens.target, V - 1));
  for (std::size_t row = 0; row < lens.rows; ++row) {
    check_deadline();
    // The stream entering block `row`, or after the last one.
    const std::vector<float>& x = row < c.n_layer ? run.stream[row].x_in : run.final_stream;
    const std::vector<float> logits = unembed(model, x, n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::span<const float> z(logits.data() + i * V, V);
      const int top = top_token(z);
      double sum = 0;
      for (float v : z)
        sum += std::exp(double(v) - z[static_cast<std::size_t>(top)]);
      const float t = z[static_cast<std::size_t>(lens.target)];
      const auto above = static_cast<std::size_t>(std::count_if(z.begin(), z.end(), [&](float v) { return v > t; }));
      lens.cells.push_back({top, 1 / sum, std::exp(double(t) - z[static_cast<std::size_t>(top)]) / sum, 1 + above});
    }
  }
  return lens;
}

ResidualPatching patch_residual(const Model& model, std::span<const int> clean, std::span<const int> corrupt,
                                int target, int contrast) {
  const ModelConfig& c = model.config;
  const std::size_t n = clean.size(), d = c.n_embd, V = c.vocab_size, L = c.n_layer;
  if (corrupt.size() != n)
    fail("corrupt", fmt::format("is {} tokens and the clean text {}; patching compares the same positions, so give "
                                "texts of the same length in tokens",
                                corrupt.size(), n));
  const double work = double(L) * double(L + 1) / 2 * double(n) * (forward_flops(c, n) / double(L));
  if (work > kMaxPatchingFlops)
    fail("corrupt", fmt::format("patching every (layer, position) of {} tokens reruns {:.3g} FLOPs, more than the "
                                "{:.3g} attnlab does for one request; use fewer tokens",
                                n, work, kMaxPatchingFlops));
  ForwardOptions options;
  options.keep_stream = true;
  const ForwardResult a = model_forward(model, clean, options), b = model_forward(model, corrupt, options);
  const std::span<const float> clean_last(a.logits.data() + (n - 1) * V, V),
      corrupt_last(b.logits.data() + (n - 1) * V, V);
  ResidualPatching out;
  out.rows = L + 1, out.n = n;
  out.target = target >= 0 ? target : top_token(clean_last);
  if (contrast < 0) {
    const std::vector<TokenProbability> top = top_k(corrupt_last, 2);
    contrast = top[0].id != out.target ? top[0].id : top[1].id;
  }
  out.contrast = contrast;
  for (const int id : {out.target, out.contrast})
    if (id < 0 || static_cast<std::size_t>(id) >= V)
      fail(id == out.target ? "target" : "contrast",
           fmt::format("token id {} is outside the vocabulary (0 to {})", id, V - 1));
  const auto metric = [&](const std::vector<float>& logits) {
    const float* last = logits.data() + (n - 1) * V;
    return double(last[out.target]) - double(last[out.contrast]);
  };
  out.clean = metric(a.logits), out.corrupt = metric(b.logits);
  if (std::abs(out.clean - out.corrupt) < 1e-6)
    fail("corrupt", fmt::format("gives the same logit difference as the clean text ({:.6f}); there is nothing for "
                                "a site to restore, so choose texts or a target and contrast they disagree on",
                                out.clean));
  for (std::size_t row = 0; row <= L; ++row) {
    const std::vector<float>& from = row < L ? a.stream[row].x_in : a.final_stream;
    const std::vector<float>& into = row < L ? b.stream[row].x_in : b.final_stream;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<float> x = into;
      std::copy_n(from.begin() + std::ptrdiff_t(i * d), d, x.begin() + std::ptrdiff_t(i * d));
      out.restored.push_back((metric(forward_from(model, row, std::move(x))) - out.corrupt) /
                             (out.clean - out.corrupt));
    }
  }
  return out;
}

}  // namespace attnlab
