// Context mixing at one prediction: raw attention, value norms, rollout and ALTI
// (attnlab/analysis/attribution.hpp has the formulas).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/analysis/attribution.hpp"
#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {

// M · R for square matrices [rows × rows]: one more layer rolled out.
std::vector<double> times(const std::vector<double>& M, const std::vector<double>& R, std::size_t rows) {
  std::vector<double> out(rows * rows, 0.0);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < rows; ++k)
      if (const double m = M[i * rows + k]; m != 0)
        for (std::size_t j = 0; j < rows; ++j)
          out[i * rows + j] += m * R[k * rows + j];
  return out;
}

// The first `rows` rows and columns of a [rows × rows] matrix as [n × n], zero beyond.
std::vector<double> padded(const std::vector<double>& M, std::size_t rows, std::size_t n) {
  std::vector<double> out(n * n, 0.0);
  for (std::size_t i = 0; i < rows; ++i)
    std::copy_n(M.begin() + std::ptrdiff_t(i * rows), rows, out.begin() + std::ptrdiff_t(i * n));
  return out;
}

void normalise_row(double* row, std::size_t count) {
  double sum = 0;
  for (std::size_t j = 0; j < count; ++j)
    sum += row[j];
  if (sum > 0)
    for (std::size_t j = 0; j < count; ++j)
      row[j] /= sum;
}

}  // namespace

ContextMixing context_mixing(const Model& model, const ForwardResult& run, std::size_t position) {
  const ModelConfig& c = model.config;
  const std::size_t L = c.n_layer, H = c.n_head, H_kv = c.kv_heads(), n = run.n, d = c.n_embd, hd = c.head_dim(),
                    W = c.qkv_width(), p = position;
  if (run.stream.size() != L || run.attention.size() != L)
    fail("stream", "the forward did not keep the residual stream; run it with keep_stream");
  if (p >= n) fail("position", fmt::format("{} is past the last token ({} tokens, positions 0 to {})", p, n, n - 1));
  const std::size_t rows = p + 1;  // rows past the prediction's cannot reach it
  const double work = double(L) * double(rows) * double(rows) * (double(H) * double(d) / 2 + double(rows));
  if (work > kMaxMixingWork)
    fail("ids", fmt::format("ALTI over {} tokens is {:.3g} multiply-adds, more than the limit of {:.3g}; use fewer "
                            "tokens",
                            rows, work, kMaxMixingWork));
  ContextMixing out;
  out.layers = L, out.heads = H, out.n = n, out.position = p;
  out.attention.assign(L * H * n, 0.0);
  out.value_norms.assign(L * n, 0.0);
  // Â_l ··· Â_1 and C_l ··· C_1 so far [rows × rows], and the weights' mean over layers and heads.
  std::vector<double> rolled(rows * rows, 0.0), alti(rows * rows, 0.0), attention(rows * rows, 0.0);
  for (std::size_t i = 0; i < rows; ++i)
    rolled[i * rows + i] = alti[i * rows + i] = 1;
  for (std::size_t l = 0; l < L; ++l) {
    check_deadline();
    const LayerStream& s = run.stream[l];
    const float* a = run.attention[l].data();  // [H × n × n]
    // f[j][h] = v_h[j] · W_O_h [d]: what head h writes for source j at weight 1.
    const std::vector<float> w_o = model.blocks[l].attn_proj_weight.to_f32();  // [H·hd × d]
    std::vector<float> f(rows * H * d, 0.0f);
    for (std::size_t j = 0; j < rows; ++j)
      for (std::size_t h = 0; h < H; ++h) {
        const float* v = s.qkv.data() + j * W + (H + H_kv + h / (H / H_kv)) * hd;
        float* out_row = f.data() + (j * H + h) * d;
        for (std::size_t k = 0; k < hd; ++k) {
          const float* w_row = w_o.data() + (h * hd + k) * d;
          for (std::size_t e = 0; e < d; ++e)
            out_row[e] += v[k] * w_row[e];
        }
      }
    // Sandwich norms scale the attention's output per row by γ_post · rstd_i.
    std::vector<float> gamma;
    if (c.sandwich_norms) {
      gamma = model.blocks[l].post_attn_norm_weight.to_f32();
      if (c.norm_plus_one)
        for (float& g : gamma)
          g += 1.0f;
    }
    std::vector<double> A(rows * rows, 0.0), C(rows * rows, 0.0);  // this layer's Â_l and C_l
    std::vector<double> y(d), t(d);
    for (std::size_t i = 0; i < rows; ++i) {
      double y_norm = 0;  // ‖y_i‖₁, y_i the stream after the attention's residual
      for (std::size_t e = 0; e < d; ++e)
        y_norm += std::abs(y[e] = double(s.x_in[i * d + e]) + double(s.attention[i * d + e]));
      for (std::size_t j = 0; j <= i; ++j) {
        std::fill(t.begin(), t.end(), 0.0);
        double mean_weight = 0;
        for (std::size_t h = 0; h < H; ++h) {
          const double weight = a[(h * n + i) * n + j];
          mean_weight += weight / double(H);
          if (i == p) out.attention[(l * H + h) * n + j] = weight;
          if (weight == 0) continue;
          const float* fj = f.data() + (j * H + h) * d;
          for (std::size_t e = 0; e < d; ++e)
            t[e] += weight * fj[e];
        }
        if (!gamma.empty())
          for (std::size_t e = 0; e < d; ++e)
            t[e] *= gamma[e] * s.attention_rstd[i];
        if (i == p) {
          double norm = 0;
          for (double x : t)
            norm += x * x;
          out.value_norms[l * n + j] = std::sqrt(norm);
        }
        if (i == j)
          for (std::size_t e = 0; e < d; ++e)
            t[e] += s.x_in[i * d + e];
        double distance = 0;  // ‖y_i − T_i(x_j)‖₁
        for (std::size_t e = 0; e < d; ++e)
          distance += std::abs(y[e] - t[e]);
        C[i * rows + j] = std::max(0.0, y_norm - distance);
        A[i * rows + j] = 0.5 * mean_weight + (i == j ? 0.5 : 0.0);
        attention[i * rows + j] += mean_weight / double(L);
      }
      normalise_row(&C[i * rows], rows);
      normalise_row(&A[i * rows], rows);
    }
    rolled = times(A, rolled, rows), alti = times(C, alti, rows);
  }
  out.attention_map = padded(attention, rows, n);
  out.rollout_map = padded(rolled, rows, n);
  out.alti_map = padded(alti, rows, n);
  out.rollout.assign(out.rollout_map.begin() + std::ptrdiff_t(p * n),
                     out.rollout_map.begin() + std::ptrdiff_t((p + 1) * n));
  out.alti.assign(out.alti_map.begin() + std::ptrdiff_t(p * n), out.alti_map.begin() + std::ptrdiff_t((p + 1) * n));
  return out;
}

}  // namespace attnlab
