// GPT-2's forward pass (attnlab/model/forward.hpp). Linear layers are OpenBLAS GEMMs; the
// rest is written as the maths, one loop per step.
#include "attnlab/model/forward.hpp"

#include <cblas.h>

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include "attnlab/core/deadline.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/kernels/flash_attention.hpp"
#include "attnlab/kernels/flash_decode.hpp"

namespace attnlab {

std::string to_string(HeadRef head) { return fmt::format("{}.{}", head.layer, head.head); }

HeadRef parse_head_ref(std::string_view text, std::string_view field) {
  const std::size_t dot = text.find('.');
  HeadRef h;
  const auto number = [&](std::string_view part, std::size_t& out) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), out);
    return error == std::errc() && end == part.data() + part.size() && !part.empty();
  };
  if (dot == std::string_view::npos || !number(text.substr(0, dot), h.layer) || !number(text.substr(dot + 1), h.head))
    fail(field, fmt::format("\"{}\" is not a head; write LAYER.HEAD, 0-based, e.g. 1.3", text.substr(0, 32)));
  return h;
}

namespace {

// y[n × out] = x[n × in] · W[in × out] + b (no bias when b is empty), W owned or viewed in its checkpoint.
void linear(const float* x, std::size_t n, std::size_t in, const Tensor& w, const Tensor& b, std::size_t out,
            float* y) {
  for (std::size_t i = 0; i < n; ++i)
    if (b.empty())
      std::fill_n(y + i * out, out, 0.0f);
    else
      std::copy(b.begin(), b.end(), y + i * out);
  multiply(x, n, in, w, out, y, 1.0f);
}

// The config's norm over each row of d numbers (rows stride `stride`, written to y with
// the same stride):
//   LayerNorm: y = (x − mean) / √(var + ε) · γ + β  (the biased variance, as PyTorch's LayerNorm)
//   RMSNorm:   y = x / √(mean(x²) + ε) · γ          (γ read as 1 + γ where the family stores w − 1)
void norm_rows(const ModelConfig& c, const float* x, std::size_t n, std::size_t d, std::size_t stride,
               const Tensor& gamma, const Tensor& beta, float* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = x + i * stride;
    float* out = y + i * stride;
    double mean = 0, var = 0;
    if (c.norm == NormKind::layer_norm) {
      for (std::size_t k = 0; k < d; ++k)
        mean += row[k];
      mean /= static_cast<double>(d);
    }
    for (std::size_t k = 0; k < d; ++k)
      var += (row[k] - mean) * (row[k] - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + c.layer_norm_epsilon);
    for (std::size_t k = 0; k < d; ++k) {
      const double g = c.norm_plus_one ? 1.0 + gamma[k] : gamma[k];
      out[k] = static_cast<float>((row[k] - mean) * inv * g + (beta.empty() ? 0.0 : beta[k]));
    }
  }
}

// The tanh GELU (GPT-2's gelu_new, PyTorch's gelu(approximate="tanh")):
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). Written as x · σ(2u) = x / (1 + e^(−2u)),
// u = √(2/π)·(x + 0.044715·x³), which is the same function (½(1 + tanh u) = σ(2u)) and costs one exp.
float gelu_new(float x) {
  constexpr float k = 0.7978845608028654f;  // √(2/π)
  const float u = k * (x + 0.044715f * x * x * x);
  return x / (1.0f + std::exp(-2.0f * u));
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// The MLP's activation over h = x · W_fc + b [n × fc_width], into act [n × n_inner]:
// GELU(h), or the gated act(gate) ⊙ up with h = gate | up; the rows shared among threads.
void activate(const ModelConfig& c, const std::vector<float>& h, std::size_t n, std::vector<float>& act) {
  const std::size_t inner = c.n_inner, width = c.fc_width();
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n * inner);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < count; ++k) {
    const std::size_t i = static_cast<std::size_t>(k) / inner, j = static_cast<std::size_t>(k) % inner;
    const float gate = h[i * width + j];
    switch (c.mlp) {
      case MlpKind::gelu: act[static_cast<std::size_t>(k)] = gelu_new(gate); break;
      case MlpKind::swiglu: act[static_cast<std::size_t>(k)] = silu(gate) * h[i * width + inner + j]; break;
      case MlpKind::geglu: act[static_cast<std::size_t>(k)] = gelu_new(gate) * h[i * width + inner + j]; break;
    }
  }
}

// Where a layer's heads sit in q | k | v ([n × qkv_width]) and how they attend.
struct HeadLayout {
  std::size_t H, H_kv, hd, width;  // width: the qkv row's length
  double scale;                    // scores × scale
  std::size_t window;              // 0: every earlier key
  std::size_t q(std::size_t h) const { return h * hd; }
  std::size_t k(std::size_t g) const { return (H + g) * hd; }
  std::size_t v(std::size_t g) const { return (H + H_kv + g) * hd; }
  std::size_t kv_of(std::size_t h) const { return h / (H / H_kv); }  // grouped-query: KV head of query head h
};

HeadLayout head_layout(const ModelConfig& c, std::size_t layer) {
  const std::size_t hd = c.head_dim();
  return {c.n_head,
          c.kv_heads(),
          hd,
          c.qkv_width(),
          c.query_scale > 0 ? c.query_scale : 1.0 / std::sqrt(static_cast<double>(hd)),
          c.window(layer)};
}

// QK-norm and rotary positions on q and k in place, token t at position first + t:
// each head's q and k RMS-normed (Qwen3, Gemma 3), then rotated pair by pair, (x_i, x_{i+r/2})
// by the angle position · f_i (rope_frequencies).
void position_queries_and_keys(const Model& model, std::size_t layer, float* qkv, std::size_t n, std::size_t first) {
  const ModelConfig& c = model.config;
  const HeadLayout at = head_layout(c, layer);
  const Block& b = model.blocks[layer];
  if (c.qk_norm) {
    ModelConfig head_norm = c;
    head_norm.norm = NormKind::rms_norm;
    for (std::size_t h = 0; h < at.H; ++h)
      norm_rows(head_norm, qkv + at.q(h), n, at.hd, at.width, b.q_norm_weight, {}, qkv + at.q(h));
    for (std::size_t g = 0; g < at.H_kv; ++g)
      norm_rows(head_norm, qkv + at.k(g), n, at.hd, at.width, b.k_norm_weight, {}, qkv + at.k(g));
  }
  if (!c.rotary) return;
  const std::vector<double> f = rope_frequencies(c, layer);
  const std::size_t half = f.size();
  for (std::size_t t = 0; t < n; ++t) {
    float* row = qkv + t * at.width;
    const double p = static_cast<double>(first + t);
    for (std::size_t i = 0; i < half; ++i) {
      const double cos = std::cos(p * f[i]), sin = std::sin(p * f[i]);
      const auto rotate = [&](float* head) {
        const double x1 = head[i], x2 = head[i + half];
        head[i] = static_cast<float>(x1 * cos - x2 * sin);
        head[i + half] = static_cast<float>(x2 * cos + x1 * sin);
      };
      for (std::size_t h = 0; h < at.H; ++h)
        rotate(row + at.q(h));
      for (std::size_t g = 0; g < at.H_kv; ++g)
        rotate(row + at.k(g));
    }
  }
}

// One head's causal attention with its weights written out: weights[n × n], the head's
// output into columns h·hd of z (row stride H·hd). Key j is visible to query i when j ≤ i
// (and i − j < w on a sliding-window layer).
void head_attention_kept(const float* qkv, std::size_t n, const HeadLayout& at, std::size_t h, float* weights,
                         float* z) {
  const float* q = qkv + at.q(h);
  const float* k = qkv + at.k(at.kv_of(h));
  const float* v = qkv + at.v(at.kv_of(h));
  const std::size_t z_width = at.H * at.hd;
  std::vector<double> logits(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j0 = at.window && i + 1 > at.window ? i + 1 - at.window : 0;
    double largest = -INFINITY;
    for (std::size_t j = j0; j <= i; ++j) {
      double s = 0;
      for (std::size_t col = 0; col < at.hd; ++col)
        s += static_cast<double>(q[i * at.width + col]) * k[j * at.width + col];
      logits[j] = s * at.scale;
      largest = std::max(largest, logits[j]);
    }
    double sum = 0;
    for (std::size_t j = j0; j <= i; ++j)
      sum += logits[j] = std::exp(logits[j] - largest);
    float* row = weights + i * n;
    std::fill(row, row + n, 0.0f);
    std::vector<double> out(at.hd, 0.0);
    for (std::size_t j = j0; j <= i; ++j) {
      const double a = logits[j] / sum;
      row[j] = static_cast<float>(a);
      for (std::size_t col = 0; col < at.hd; ++col)
        out[col] += a * v[j * at.width + col];
    }
    for (std::size_t col = 0; col < at.hd; ++col)
      z[i * z_width + h * at.hd + col] = static_cast<float>(out[col]);
  }
}

// Every head at once through the tiled kernel (no n × n grid): z[n × H·hd].
void attention_tiled(const float* qkv, std::size_t n, const HeadLayout& at, float* z) {
  const std::size_t hd = at.hd;
  std::vector<float> q(at.H * n * hd), k(at.H_kv * n * hd), v(k.size()), out(q.size());  // [H or H_kv × n × hd]
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = qkv + i * at.width;
    for (std::size_t h = 0; h < at.H; ++h)
      std::copy_n(row + at.q(h), hd, q.data() + (h * n + i) * hd);
    for (std::size_t g = 0; g < at.H_kv; ++g) {
      std::copy_n(row + at.k(g), hd, k.data() + (g * n + i) * hd);
      std::copy_n(row + at.v(g), hd, v.data() + (g * n + i) * hd);
    }
  }
  AttentionOptions options;
  options.causal = true;
  options.scale = at.scale;
  if (at.window) options.window = at.window;
  flash_attention(q.data(), k.data(), v.data(), out.data(), {at.H, at.H_kv, n, n, hd, hd}, options);
  for (std::size_t h = 0; h < at.H; ++h)
    for (std::size_t i = 0; i < n; ++i)
      std::copy_n(out.data() + (h * n + i) * hd, hd, z + i * at.H * hd + h * hd);
}

}  // namespace

std::vector<double> rope_frequencies(const ModelConfig& c, std::size_t layer) {
  const std::size_t rotated = c.rope.rotated ? c.rope.rotated : c.head_dim();
  // Sliding-window layers with a θ of their own (Gemma 3's) rotate with it, unscaled.
  const bool local = c.rope.local_theta > 0 && c.window(layer) > 0;
  const double theta = local ? c.rope.local_theta : c.rope.theta;
  std::vector<double> f(rotated / 2);
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotated));
    if (local) continue;
    if (c.rope.scaling == RopeScaling::linear) f[i] /= c.rope.factor;
    if (c.rope.scaling == RopeScaling::llama3) {
      // Llama 3: long wavelengths slowed by the factor, short ones kept, the band between blended.
      const double original = static_cast<double>(c.rope.original_positions);
      const double low_wavelength = original / c.rope.low_freq_factor;
      const double high_wavelength = original / c.rope.high_freq_factor;
      const double wavelength = 2 * M_PI / f[i];
      if (wavelength > low_wavelength) {
        f[i] /= c.rope.factor;
      } else if (wavelength >= high_wavelength) {
        const double smooth =
            (original / wavelength - c.rope.low_freq_factor) / (c.rope.high_freq_factor - c.rope.low_freq_factor);
        f[i] = (1 - smooth) * f[i] / c.rope.factor + smooth * f[i];
      }
    }
  }
  return f;
}

namespace {

// Token ids checked against the vocabulary, and the positions they would take.
void check_ids(const ModelConfig& c, std::span<const int> ids, std::size_t first_position) {
  if (ids.empty()) fail("ids", "no tokens; give at least one");
  if (first_position + ids.size() > c.n_positions)
    fail("ids",
         fmt::format("{} tokens is more than the model's {} positions", first_position + ids.size(), c.n_positions));
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= c.vocab_size)
      fail("ids", fmt::format("token id {} at position {} is outside the vocabulary (0 to {})", ids[i],
                              first_position + i, c.vocab_size - 1));
}

// The residual stream's start, [n × d]: the token's embedding (× √d_model for Gemma) plus,
// for learned positions, the position's.
std::vector<float> embed(const Model& model, std::span<const int> ids, std::size_t first_position) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd;
  const float scale = static_cast<float>(c.embedding_scale);
  std::vector<float> x(ids.size() * d), position(d, 0.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    float* row = x.data() + i * d;
    model.wte.row(static_cast<std::size_t>(ids[i]), d, row);
    if (!c.rotary) model.wpe.row(first_position + i, d, position.data());
    for (std::size_t col = 0; col < d; ++col)
      row[col] = row[col] * scale + position[col];
  }
  return x;
}

// What a block's heads compute from q | k | v ([n × qkv_width], positioned) into z
// ([n × H·hd]): the full causal attention (kept or tiled) in a forward pass, or the new
// tokens against the KV cache when decoding.
using HeadsStep = std::function<void(const float* qkv, float* z)>;

// One block on the residual stream x ([n × d], updated in place), tokens at positions
// first..: attention, then the MLP. `a` receives the attention's normed input, what the heads read.
void run_block(const Model& model, std::size_t l, std::size_t n, std::size_t first, std::vector<float>& x,
               std::vector<float>& a, const HeadsStep& heads_step, const std::vector<HeadRef>& ablate) {
  const ModelConfig& c = model.config;
  const Block& b = model.blocks[l];
  const std::size_t d = c.n_embd, dh = c.head_dim(), zw = c.attention_width();
  std::vector<float> qkv(n * c.qkv_width()), z(n * zw), proj(n * d), hidden(n * c.fc_width()), act(n * c.n_inner);
  // Attention: a = norm_1(x); q | k | v = a · W_qkv + b; QK-norm and rotation; the heads;
  // x += z · W_o + b_o (normed first with sandwich norms).
  norm_rows(c, x.data(), n, d, d, b.ln_1_weight, b.ln_1_bias, a.data());
  linear(a.data(), n, d, b.attn_weight, b.attn_bias, c.qkv_width(), qkv.data());
  position_queries_and_keys(model, l, qkv.data(), n, first);
  heads_step(qkv.data(), z.data());
  for (const HeadRef& h : ablate)
    if (h.layer == l)
      for (std::size_t i = 0; i < n; ++i)
        std::fill_n(z.data() + i * zw + h.head * dh, dh, 0.0f);
  linear(z.data(), n, zw, b.attn_proj_weight, b.attn_proj_bias, d, proj.data());
  if (c.sandwich_norms) norm_rows(c, proj.data(), n, d, d, b.post_attn_norm_weight, {}, proj.data());
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] += proj[k];
  // MLP: x += act(norm_2(x) · W_fc + b_fc) · W_mlp + b_mlp (normed first with sandwich norms).
  std::vector<float> m(n * d);
  norm_rows(c, x.data(), n, d, d, b.ln_2_weight, b.ln_2_bias, m.data());
  linear(m.data(), n, d, b.mlp_fc_weight, b.mlp_fc_bias, c.fc_width(), hidden.data());
  activate(c, hidden, n, act);
  linear(act.data(), n, c.n_inner, b.mlp_proj_weight, b.mlp_proj_bias, d, proj.data());
  if (c.sandwich_norms) norm_rows(c, proj.data(), n, d, d, b.post_mlp_norm_weight, {}, proj.data());
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] += proj[k];
}

// logits[n × vocab] = norm_f(x) · Uᵀ, U the LM head (wte when tied).
std::vector<float> lm_head(const Model& model, const std::vector<float>& x, std::size_t n) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd;
  std::vector<float> a(n * d), logits(n * c.vocab_size);
  norm_rows(c, x.data(), n, d, d, model.ln_f_weight, model.ln_f_bias, a.data());
  multiply_by_transpose(a.data(), n, d, c.tied ? model.wte : model.lm_head, c.vocab_size, logits.data());
  return logits;
}

void check_ablate(const ModelConfig& c, const std::vector<HeadRef>& ablate) {
  for (const HeadRef& h : ablate)
    if (h.layer >= c.n_layer || h.head >= c.n_head)
      fail("ablate", fmt::format("head {} does not exist; the model has layers 0 to {} and heads 0 to {}", to_string(h),
                                 c.n_layer - 1, c.n_head - 1));
}

}  // namespace

ForwardResult model_forward(const Model& model, std::span<const int> ids, const ForwardOptions& options) {
  const ModelConfig& c = model.config;
  const std::size_t n = ids.size(), d = c.n_embd, heads = c.n_head;
  check_ids(c, ids, 0);
  check_ablate(c, options.ablate);
  // Priced before work: the logits (n × vocab) and, when kept, every head's weights (L × H × n²).
  constexpr double kMaxForwardFloats = double(1u << 30);  // 4 GiB of f32 each
  if (double(n) * double(c.vocab_size) > kMaxForwardFloats)
    fail("ids",
         fmt::format("{} tokens × a vocabulary of {} is more logits than the limit of {} (4 GiB); use fewer tokens", n,
                     c.vocab_size, kMaxForwardFloats));
  if (options.keep_attention && double(c.n_layer) * double(heads) * double(n) * double(n) > kMaxForwardFloats)
    fail("ids", fmt::format("keeping every head's weights for {} tokens ({} layers × {} heads × n²) is more than the "
                            "limit of {} numbers (4 GiB); use fewer tokens",
                            n, c.n_layer, heads, kMaxForwardFloats));
  ForwardResult r;
  r.n = n;
  std::vector<float> x = embed(model, ids, 0), a(n * d);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    check_deadline();  // a server request's time budget (core/deadline.hpp): checked between layers
    const HeadLayout at = head_layout(c, l);
    const HeadsStep causal_heads = [&](const float* qkv, float* z) {
      if (!options.keep_attention) return attention_tiled(qkv, n, at, z);
      std::vector<float> weights(heads * n * n);  // [H × n × n]
      for (std::size_t h = 0; h < heads; ++h)
        head_attention_kept(qkv, n, at, h, weights.data() + h * n * n, z);
      r.attention.push_back(std::move(weights));
    };
    run_block(model, l, n, 0, x, a, causal_heads, options.ablate);
    r.block_inputs.push_back(a);
  }
  r.logits = lm_head(model, x, n);
  return r;
}

Decoder::Decoder(const Model& model, DType cache_dtype)
    : model_(model), cache_(model.config.n_layer, model.config.kv_heads(), model.config.head_dim(), cache_dtype) {}

std::vector<float> Decoder::step(std::span<const int> ids) {
  const ModelConfig& c = model_.config;
  const std::size_t n = ids.size(), d = c.n_embd, first = length_;
  check_ids(c, ids, first);
  cache_.reserve(first + n);
  std::vector<float> x = embed(model_, ids, first), a(n * d);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const HeadLayout at = head_layout(c, l);
    const HeadsStep cached_heads = [&](const float* qkv, float* z) {
      // The new tokens' keys and values join the cache; their queries ([n × H × hd], q's
      // columns as they are) attend to every cached token up to their own position.
      const std::size_t q_width = at.H * at.hd, kv_width = at.H_kv * at.hd;
      std::vector<float> queries(n * q_width);
      for (std::size_t t = 0; t < n; ++t) {
        const float* row = qkv + t * at.width;
        cache_.append(l, {row + at.k(0), kv_width}, {row + at.v(0), kv_width});
        std::copy_n(row, q_width, queries.data() + t * q_width);
      }
      DecodeOptions options;
      options.scale = at.scale;
      if (at.window) options.window = at.window;
      flash_decode(cache_, l, at.H, queries, n, {z, n * q_width}, options);
    };
    run_block(model_, l, n, first, x, a, cached_heads, {});
  }
  length_ += n;
  const std::vector<float> logits = lm_head(model_, x, n);
  return {logits.end() - static_cast<std::ptrdiff_t>(c.vocab_size), logits.end()};
}

double forward_flops(const ModelConfig& c, std::size_t n) {
  const double d = static_cast<double>(c.n_embd), tokens = static_cast<double>(n);
  const double linear = 2 * tokens *
                        (d * static_cast<double>(c.qkv_width()) + static_cast<double>(c.attention_width()) * d +
                         d * static_cast<double>(c.fc_width()) + static_cast<double>(c.n_inner) * d);
  // q·k and a·v over the causal half, every query head.
  const double attention = 2 * 2 * static_cast<double>(c.attention_width()) * tokens * (tokens + 1) / 2;
  return static_cast<double>(c.n_layer) * (linear + attention) + 2 * tokens * d * static_cast<double>(c.vocab_size);
}

std::size_t forward_buffer_bytes(const ModelConfig& c, std::size_t n) {
  const std::size_t d = c.n_embd, zw = c.attention_width();
  // q | k | v and its per-head copies, z and the kernel's output, the projection, the MLP's input, hidden and act.
  const std::size_t block = 2 * c.qkv_width() + 2 * zw + 2 * d + c.fc_width() + c.n_inner;
  // The logits, the residual stream, the attention's input, the final norm's, each layer's input kept.
  return sizeof(float) * n * (c.vocab_size + (c.n_layer + 3) * d + block);
}

std::vector<TokenProbability> top_k(std::span<const float> logits, std::size_t k) {
  const float largest = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits)
    sum += std::exp(static_cast<double>(x) - largest);
  std::vector<int> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(i);
  k = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<TokenProbability> out;
  for (std::size_t r = 0; r < k; ++r)
    out.push_back({order[r], std::exp(static_cast<double>(logits[order[r]]) - largest) / sum});
  return out;
}

double next_token_loss(const ForwardResult& result, std::span<const int> ids, std::size_t vocab, std::size_t first,
                       std::size_t last) {
  double total = 0;
  for (std::size_t i = first; i < last; ++i) {
    const float* row = result.logits.data() + i * vocab;
    const double largest = *std::max_element(row, row + vocab);
    double sum = 0;
    for (std::size_t v = 0; v < vocab; ++v)
      sum += std::exp(row[v] - largest);
    total += std::log(sum) + largest - row[ids[i + 1]];  // -log softmax(row)[next]
  }
  return last > first ? total / static_cast<double>(last - first) : 0.0;
}

AttentionInput head_attention_input(const Model& model, const ForwardResult& result, HeadRef head) {
  const ModelConfig& c = model.config;
  if (head.layer >= c.n_layer || head.head >= c.n_head)
    fail("head", fmt::format("head {} does not exist; the model has layers 0 to {} and heads 0 to {}", to_string(head),
                             c.n_layer - 1, c.n_head - 1));
  const std::size_t n = result.n, d = c.n_embd, dh = c.head_dim();
  const std::vector<float>& a = result.block_inputs[head.layer];
  const Block& b = model.blocks[head.layer];
  const HeadLayout at = head_layout(c, head.layer);
  AttentionInput input;
  input.queries_from = Matrix(n, d);
  for (std::size_t k = 0; k < n * d; ++k)
    input.queries_from.data[k] = a[k];
  input.keys_from = input.queries_from;
  input.mask.causal = true;
  if (c.window(head.layer)) input.mask.window = c.window(head.layer);
  if (c.rotary) input.rope = Rope{true, rope_frequencies(c, head.layer)};  // split halves, the model's frequencies
  // The head's columns of W_qkv: its query's, and its KV head's key and value.
  const auto slice = [&](std::size_t first) {
    Matrix w(d, dh);
    const std::vector<float> columns = b.attn_weight.columns(d, at.width, first, dh);
    std::copy(columns.begin(), columns.end(), w.data.begin());
    return w;
  };
  const auto bias = [&](std::size_t first) {
    if (b.attn_bias.empty()) return std::vector<double>(dh, 0.0);
    return std::vector<double>(b.attn_bias.begin() + static_cast<std::ptrdiff_t>(first),
                               b.attn_bias.begin() + static_cast<std::ptrdiff_t>(first + dh));
  };
  const std::size_t q0 = at.q(head.head), k0 = at.k(at.kv_of(head.head)), v0 = at.v(at.kv_of(head.head));
  HeadWeights w{to_string(head), slice(q0), slice(k0), slice(v0)};
  w.b_q = bias(q0), w.b_k = bias(k0), w.b_v = bias(v0);
  if (c.qk_norm) {  // γ as the forward applies it: 1 + w where the family stores w − 1
    const auto gamma = [&](const Tensor& weight) {
      std::vector<double> g(weight.begin(), weight.end());
      if (c.norm_plus_one)
        for (double& x : g)
          x += 1.0;
      return g;
    };
    w.q_norm = gamma(b.q_norm_weight), w.k_norm = gamma(b.k_norm_weight);
    w.norm_epsilon = c.layer_norm_epsilon;
  }
  input.score_scale = c.query_scale;
  input.heads.push_back(std::move(w));
  return input;
}

}  // namespace attnlab
