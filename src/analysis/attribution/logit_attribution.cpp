// Direct logit attribution and the logit lens (attnlab/analysis/attribution.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"  // text_excerpt
#include "attnlab/model/stream.hpp"

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
  const std::size_t n = run.n, d = c.n_embd, H = c.n_head;
  LogitAttribution out;
  out.n = n;
  out.position = want.position.value_or(n - 1);
  if (out.position >= n)
    fail("position", fmt::format("{} is past the last token ({} tokens, positions 0 to {})", out.position, n, n - 1));
  const std::span<const float> logits = run.logits_at(out.position);
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
  options.logits = LogitRows::last;
  const ForwardResult run = model_forward(model, ids, options);
  const std::size_t n = run.n, V = c.vocab_size;
  LogitLens lens;
  lens.rows = c.n_layer + 1, lens.n = n;
  lens.target = target >= 0 ? target : top_token(run.logits_at(n - 1));
  check_token_id(c, lens.target, "target");
  for (std::size_t row = 0; row < lens.rows; ++row) {
    check_deadline();
    // The stream entering block `row`, or after the last one.
    const std::vector<float>& x = row < c.n_layer ? run.stream[row].x_in : run.final_stream;
    const std::vector<float> logits = unembed(model, x, n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::span<const float> z(logits.data() + i * V, V);
      const int top = top_token(z);
      const double normalizer = log_sum_exp(z);
      const float t = z[static_cast<std::size_t>(lens.target)];
      const auto above = static_cast<std::size_t>(std::count_if(z.begin(), z.end(), [&](float v) { return v > t; }));
      lens.cells.push_back({top, std::exp(double(z[static_cast<std::size_t>(top)]) - normalizer),
                            std::exp(double(t) - normalizer), 1 + above});
    }
  }
  return lens;
}

double patching_flops(const ModelConfig& c, std::size_t n) {
  // Each residual site reruns the blocks after it; each head and MLP those from its layer on.
  const double L = double(c.n_layer);
  return ((L + 1) / 2 * double(n) + double(c.n_head + 1) * (L + 1) / 2) * forward_flops(c, n);
}

ResidualPatching patch_residual(const Model& model, std::span<const int> clean, std::span<const int> corrupt,
                                int target, int contrast, const Progress& progress,
                                const std::vector<PatchPath>& paths) {
  const ModelConfig& c = model.config;
  const std::size_t n = clean.size(), d = c.n_embd, V = c.vocab_size, L = c.n_layer;
  if (corrupt.size() != n)
    fail("corrupt", fmt::format("is {} tokens and the clean text {}; patching compares the same positions, so give "
                                "texts of the same length in tokens",
                                corrupt.size(), n));
  const double work = patching_flops(c, n);
  if (work > kMaxPatchingFlops)
    fail("corrupt", fmt::format("patching every (layer, position) of {} tokens reruns {:.3g} FLOPs, more than the "
                                "{:.3g} attnlab does for one request; use fewer tokens",
                                n, work, kMaxPatchingFlops));
  ForwardOptions options;
  options.keep_stream = true;
  options.logits = LogitRows::last;
  const ForwardResult a = model_forward(model, clean, options), b = model_forward(model, corrupt, options);
  const std::span<const float> clean_last = a.logits_at(n - 1), corrupt_last = b.logits_at(n - 1);
  ResidualPatching out;
  out.rows = L + 1, out.n = n;
  out.target = target >= 0 ? target : top_token(clean_last);
  if (contrast < 0) {
    const std::vector<TokenProbability> top = top_k(corrupt_last, 2);
    contrast = top[0].id != out.target ? top[0].id : top[1].id;
  }
  out.contrast = contrast;
  check_token_id(c, out.target, "target");
  check_token_id(c, out.contrast, "contrast");
  const auto metric = [&](std::span<const float> logits) {  // the last row of logits [rows × V]
    const float* last = logits.data() + logits.size() - V;
    return double(last[out.target]) - double(last[out.contrast]);
  };
  out.clean = metric(clean_last), out.corrupt = metric(corrupt_last);
  // The share restored by rerunning the corrupted text from block `layer` with `options`.
  const auto restored = [&](std::size_t layer, std::vector<float> x, const ForwardOptions& options = {}) {
    return (metric(forward_from(model, layer, std::move(x), options, n - 1)) - out.corrupt) / (out.clean - out.corrupt);
  };
  if (std::abs(out.clean - out.corrupt) < 1e-6)
    fail("corrupt", fmt::format("gives the same logit difference as the clean text ({:.6f}); there is nothing for "
                                "a site to restore, so choose texts or a target and contrast they disagree on",
                                out.clean));
  for (std::size_t row = 0; row <= L; ++row) {
    const std::vector<float>& from = row < L ? a.stream[row].x_in : a.final_stream;
    const std::vector<float>& into = row < L ? b.stream[row].x_in : b.final_stream;
    for (std::size_t i = 0; i < n; ++i) {
      // The corrupted rows from i on, row i the clean one; the rows before i are the
      // corrupted run's, and enter through its kept keys and values (forward_suffix).
      std::vector<float> x(into.begin() + std::ptrdiff_t(i * d), into.end());
      std::copy_n(from.begin() + std::ptrdiff_t(i * d), d, x.begin());
      const std::vector<float> logits = row == L ? unembed(model, std::span<const float>(x).last(d), 1)
                                                 : forward_suffix(model, row, b.stream, i, std::move(x));
      out.restored.push_back((metric(logits) - out.corrupt) / (out.clean - out.corrupt));
    }
    if (progress) progress("stream", row + 1, L + 1);
  }
  // Each head's output and each MLP's, at every position, from the clean run.
  const std::size_t H = c.n_head, hd = c.head_dim(), Z = c.attention_width();
  out.layers = L, out.heads = H;
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t h = 0; h < H; ++h) {
      ForwardOptions patched;
      HeadReplacement& r = patched.replace_heads.emplace_back(HeadReplacement{{l, h}, {}});
      for (std::size_t i = 0; i < n; ++i)
        r.z.insert(r.z.end(), a.stream[l].z.begin() + std::ptrdiff_t(i * Z + h * hd),
                   a.stream[l].z.begin() + std::ptrdiff_t(i * Z + (h + 1) * hd));
      out.heads_restored.push_back(restored(l, b.stream[l].x_in, patched));
    }
    ForwardOptions patched;
    patched.replace_mlps = {{l, a.stream[l].mlp}};
    out.mlps_restored.push_back(restored(l, b.stream[l].x_in, patched));
    if (progress) progress("components", l + 1, L);
  }
  // Each path: the receiver's input reads the corrupted stream with the sender's part of it
  // swapped for the clean run's, x' = x_corrupt + (sender_clean − sender_corrupt); the rest of
  // the corrupted run reruns from the receiver's layer.
  for (const PatchPath& path : paths) {
    const std::vector<float> clean_part = head_output(model, a, path.sender),
                             corrupt_part = head_output(model, b, path.sender);
    std::vector<float> x = b.stream[path.receiver.layer].x_in;
    for (std::size_t k = 0; k < x.size(); ++k)
      x[k] += clean_part[k] - corrupt_part[k];
    ForwardOptions patched;
    patched.replace_inputs = {{path.receiver, path.input, std::move(x)}};
    out.paths.push_back(path);
    out.paths_restored.push_back(restored(path.receiver.layer, b.stream[path.receiver.layer].x_in, patched));
  }
  return out;
}

std::string to_string(const PatchPath& path) {
  return fmt::format("{}:{}:{}", to_string(path.sender), to_string(path.receiver), path.input);
}

PatchPath parse_patch_path(std::string_view text, const ModelConfig& c, std::string_view field) {
  const std::size_t first = text.find(':'),
                    second = first == std::string_view::npos ? first : text.find(':', first + 1);
  const auto refuse = [&](std::string_view why) {
    fail(field, fmt::format("\"{}\" {}; write SENDER:RECEIVER:INPUT, e.g. 0.0:1.0:k (the input q, k or v)",
                            text_excerpt(text, 40), why));
  };
  if (second == std::string_view::npos || text.size() != second + 2) refuse("is not a path");
  PatchPath path;
  path.sender = parse_head_ref(text.substr(0, first), field);
  path.receiver = parse_head_ref(text.substr(first + 1, second - first - 1), field);
  path.input = text[second + 1];
  if (path.input != 'q' && path.input != 'k' && path.input != 'v') refuse("names no input");
  check_head(c, path.sender, field);
  check_head(c, path.receiver, field);
  if (path.sender.layer >= path.receiver.layer)
    refuse(fmt::format("does not go forward: the sender's layer {} is not below the receiver's {}", path.sender.layer,
                       path.receiver.layer));
  return path;
}

}  // namespace attnlab
