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

// y[n × out] = x[n × in] · W[in × out] + b.
void linear(const float* x, std::size_t n, std::size_t in, const std::vector<float>& w, const std::vector<float>& b,
            std::size_t out, float* y) {
  for (std::size_t i = 0; i < n; ++i)
    std::copy(b.begin(), b.end(), y + i * out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(out),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), w.data(), static_cast<int>(out), 1.0f, y,
              static_cast<int>(out));
}

// y = (x - mean) / √(var + ε) · γ + β, per row (the biased variance, as PyTorch's LayerNorm).
void layer_norm(const float* x, std::size_t n, std::size_t d, const std::vector<float>& gamma,
                const std::vector<float>& beta, double epsilon, float* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    double mean = 0, var = 0;
    for (std::size_t c = 0; c < d; ++c)
      mean += row[c];
    mean /= static_cast<double>(d);
    for (std::size_t c = 0; c < d; ++c)
      var += (row[c] - mean) * (row[c] - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + epsilon);
    for (std::size_t c = 0; c < d; ++c)
      y[i * d + c] = static_cast<float>((row[c] - mean) * inv * gamma[c] + beta[c]);
  }
}

// GPT-2's GELU, the tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// Written as x · σ(2u) = x / (1 + e^(−2u)), u = √(2/π)·(x + 0.044715·x³), which is the same
// function (½(1 + tanh u) = σ(2u)) and costs one exp.
float gelu_new(float x) {
  constexpr float k = 0.7978845608028654f;  // √(2/π)
  const float u = k * (x + 0.044715f * x * x * x);
  return x / (1.0f + std::exp(-2.0f * u));
}

// GELU over a whole activation, the rows shared among the threads.
void gelu_all(std::vector<float>& values) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(values.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < count; ++k)
    values[static_cast<std::size_t>(k)] = gelu_new(values[static_cast<std::size_t>(k)]);
}

// One head's causal attention with its weights written out: weights[n × n], z[n × dh] into
// the head's columns of `z` (row stride d).
void head_attention_kept(const float* qkv, std::size_t n, std::size_t d, std::size_t dh, std::size_t h, float* weights,
                         float* z) {
  const float* q = qkv + h * dh;
  const float* k = qkv + d + h * dh;
  const float* v = qkv + 2 * d + h * dh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> logits(n);
  for (std::size_t i = 0; i < n; ++i) {
    double largest = -INFINITY;
    for (std::size_t j = 0; j <= i; ++j) {  // causal: key j <= query i
      double s = 0;
      for (std::size_t c = 0; c < dh; ++c)
        s += static_cast<double>(q[i * 3 * d + c]) * k[j * 3 * d + c];
      logits[j] = s * scale;
      largest = std::max(largest, logits[j]);
    }
    double sum = 0;
    for (std::size_t j = 0; j <= i; ++j)
      sum += logits[j] = std::exp(logits[j] - largest);
    float* row = weights + i * n;
    std::fill(row, row + n, 0.0f);
    std::vector<double> out(dh, 0.0);
    for (std::size_t j = 0; j <= i; ++j) {
      const double a = logits[j] / sum;
      row[j] = static_cast<float>(a);
      for (std::size_t c = 0; c < dh; ++c)
        out[c] += a * v[j * 3 * d + c];
    }
    for (std::size_t c = 0; c < dh; ++c)
      z[i * d + h * dh + c] = static_cast<float>(out[c]);
  }
}

// Every head at once through the tiled kernel (no n × n grid): z[n × d].
void attention_tiled(const float* qkv, std::size_t n, std::size_t d, std::size_t heads, float* z) {
  const std::size_t dh = d / heads;
  std::vector<float> q(heads * n * dh), k(q.size()), v(q.size()), out(q.size());  // [H × n × dh]
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < dh; ++c) {
        const std::size_t at = (h * n + i) * dh + c;
        q[at] = qkv[i * 3 * d + h * dh + c];
        k[at] = qkv[i * 3 * d + d + h * dh + c];
        v[at] = qkv[i * 3 * d + 2 * d + h * dh + c];
      }
  AttentionOptions options;
  options.causal = true;
  flash_attention(q.data(), k.data(), v.data(), out.data(), {heads, heads, n, n, dh, dh}, options);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < n; ++i)
      std::copy_n(out.data() + (h * n + i) * dh, dh, z + i * d + h * dh);
}

}  // namespace

namespace {

// Token ids checked against the vocabulary, and the positions they would take.
void check_ids(const Gpt2Config& c, std::span<const int> ids, std::size_t first_position) {
  if (ids.empty()) fail("ids", "no tokens; give at least one");
  if (first_position + ids.size() > c.n_positions)
    fail("ids",
         fmt::format("{} tokens is more than the model's {} positions", first_position + ids.size(), c.n_positions));
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= c.vocab_size)
      fail("ids", fmt::format("token id {} at position {} is outside the vocabulary (0 to {})", ids[i],
                              first_position + i, c.vocab_size - 1));
}

// The residual stream's start: token embedding plus position embedding, [n × d].
std::vector<float> embed(const Gpt2Model& model, std::span<const int> ids, std::size_t first_position) {
  const std::size_t d = model.config.n_embd;
  std::vector<float> x(ids.size() * d);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t col = 0; col < d; ++col)
      x[i * d + col] =
          model.wte[static_cast<std::size_t>(ids[i]) * d + col] + model.wpe[(first_position + i) * d + col];
  return x;
}

// What a block's heads compute from q | k | v ([n × 3d]) into z ([n × d]): the full
// causal attention (kept or tiled) in a forward pass, or the new tokens against the KV
// cache when decoding.
using HeadsStep = std::function<void(const float* qkv, float* z)>;

// One block on the residual stream x ([n × d], updated in place): attention, then the MLP.
// `a` receives LN_1(x), the heads' input.
void run_block(const Gpt2Model& model, std::size_t l, std::size_t n, std::vector<float>& x, std::vector<float>& a,
               const HeadsStep& heads_step, const std::vector<HeadRef>& ablate) {
  const Gpt2Config& c = model.config;
  const Gpt2Block& b = model.blocks[l];
  const std::size_t d = c.n_embd, dh = c.head_dim(), inner = c.n_inner;
  std::vector<float> qkv(n * 3 * d), z(n * d), proj(n * d), hidden(n * inner);
  // Attention: a = LN_1(x); q | k | v = a · W_attn + b; the heads; x += z · W_proj + b.
  layer_norm(x.data(), n, d, b.ln_1_weight, b.ln_1_bias, c.layer_norm_epsilon, a.data());
  linear(a.data(), n, d, b.attn_weight, b.attn_bias, 3 * d, qkv.data());
  heads_step(qkv.data(), z.data());
  for (const HeadRef& h : ablate)
    if (h.layer == l)
      for (std::size_t i = 0; i < n; ++i)
        std::fill_n(z.data() + i * d + h.head * dh, dh, 0.0f);
  linear(z.data(), n, d, b.attn_proj_weight, b.attn_proj_bias, d, proj.data());
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] += proj[k];
  // MLP: x += GELU(LN_2(x) · W_fc + b_fc) · W_mlp + b_mlp.
  std::vector<float> m(n * d);
  layer_norm(x.data(), n, d, b.ln_2_weight, b.ln_2_bias, c.layer_norm_epsilon, m.data());
  linear(m.data(), n, d, b.mlp_fc_weight, b.mlp_fc_bias, inner, hidden.data());
  gelu_all(hidden);
  linear(hidden.data(), n, inner, b.mlp_proj_weight, b.mlp_proj_bias, d, proj.data());
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] += proj[k];
}

// logits[n × vocab] = LN_f(x) · wteᵀ (the LM head is the token embedding, tied).
std::vector<float> lm_head(const Gpt2Model& model, const std::vector<float>& x, std::size_t n) {
  const Gpt2Config& c = model.config;
  const std::size_t d = c.n_embd;
  std::vector<float> a(n * d), logits(n * c.vocab_size);
  layer_norm(x.data(), n, d, model.ln_f_weight, model.ln_f_bias, c.layer_norm_epsilon, a.data());
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(c.vocab_size),
              static_cast<int>(d), 1.0f, a.data(), static_cast<int>(d), model.wte.data(), static_cast<int>(d), 0.0f,
              logits.data(), static_cast<int>(c.vocab_size));
  return logits;
}

void check_ablate(const Gpt2Config& c, const std::vector<HeadRef>& ablate) {
  for (const HeadRef& h : ablate)
    if (h.layer >= c.n_layer || h.head >= c.n_head)
      fail("ablate", fmt::format("head {} does not exist; the model has layers 0 to {} and heads 0 to {}", to_string(h),
                                 c.n_layer - 1, c.n_head - 1));
}

}  // namespace

ForwardResult gpt2_forward(const Gpt2Model& model, std::span<const int> ids, const ForwardOptions& options) {
  const Gpt2Config& c = model.config;
  const std::size_t n = ids.size(), d = c.n_embd, heads = c.n_head, dh = c.head_dim();
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
    const HeadsStep causal_heads = [&](const float* qkv, float* z) {
      if (!options.keep_attention) return attention_tiled(qkv, n, d, heads, z);
      std::vector<float> weights(heads * n * n);  // [H × n × n]
      for (std::size_t h = 0; h < heads; ++h)
        head_attention_kept(qkv, n, d, dh, h, weights.data() + h * n * n, z);
      r.attention.push_back(std::move(weights));
    };
    run_block(model, l, n, x, a, causal_heads, options.ablate);
    r.block_inputs.push_back(a);
  }
  r.logits = lm_head(model, x, n);
  return r;
}

Gpt2Decoder::Gpt2Decoder(const Gpt2Model& model, DType cache_dtype)
    : model_(model), cache_(model.config.n_layer, model.config.n_head, model.config.head_dim(), cache_dtype) {}

std::vector<float> Gpt2Decoder::step(std::span<const int> ids) {
  const Gpt2Config& c = model_.config;
  const std::size_t n = ids.size(), d = c.n_embd, first = length_;
  check_ids(c, ids, first);
  cache_.reserve(first + n);
  std::vector<float> x = embed(model_, ids, first), a(n * d);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const HeadsStep cached_heads = [&](const float* qkv, float* z) {
      // The new tokens' keys and values join the cache; their queries ([n × H × d_head],
      // q's columns as they are) attend to every cached token up to their own position.
      std::vector<float> queries(n * d);
      for (std::size_t t = 0; t < n; ++t) {
        const float* row = qkv + t * 3 * d;
        cache_.append(l, {row + d, d}, {row + 2 * d, d});
        std::copy_n(row, d, queries.data() + t * d);
      }
      flash_decode(cache_, l, c.n_head, queries, n, {z, n * d});
    };
    run_block(model_, l, n, x, a, cached_heads, {});
  }
  length_ += n;
  const std::vector<float> logits = lm_head(model_, x, n);
  return {logits.end() - static_cast<std::ptrdiff_t>(c.vocab_size), logits.end()};
}

double gpt2_forward_flops(const Gpt2Config& c, std::size_t n) {
  const double d = static_cast<double>(c.n_embd), inner = static_cast<double>(c.n_inner),
               tokens = static_cast<double>(n);
  const double linear = 2 * tokens * (d * 3 * d + d * d + 2 * d * inner);  // c_attn, c_proj, c_fc, mlp c_proj
  const double attention = 2 * 2 * d * tokens * (tokens + 1) / 2;          // q·k and a·v over the causal half
  return static_cast<double>(c.n_layer) * (linear + attention) + 2 * tokens * d * static_cast<double>(c.vocab_size);
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

AttentionInput head_attention_input(const Gpt2Model& model, const ForwardResult& result, HeadRef head) {
  const Gpt2Config& c = model.config;
  if (head.layer >= c.n_layer || head.head >= c.n_head)
    fail("head", fmt::format("head {} does not exist; the model has layers 0 to {} and heads 0 to {}", to_string(head),
                             c.n_layer - 1, c.n_head - 1));
  const std::size_t n = result.n, d = c.n_embd, dh = c.head_dim();
  const std::vector<float>& a = result.block_inputs[head.layer];
  const Gpt2Block& b = model.blocks[head.layer];
  AttentionInput input;
  input.queries_from = Matrix(n, d);
  for (std::size_t k = 0; k < n * d; ++k)
    input.queries_from.data[k] = a[k];
  input.keys_from = input.queries_from;
  input.mask.causal = true;
  // The head's columns of c_attn: Q at h·dh, K at d + h·dh, V at 2d + h·dh.
  const auto slice = [&](std::size_t first) {
    Matrix w(d, dh);
    for (std::size_t row = 0; row < d; ++row)
      for (std::size_t col = 0; col < dh; ++col)
        w(row, col) = b.attn_weight[row * 3 * d + first + col];
    return w;
  };
  const auto bias = [&](std::size_t first) {
    return std::vector<double>(b.attn_bias.begin() + static_cast<std::ptrdiff_t>(first),
                               b.attn_bias.begin() + static_cast<std::ptrdiff_t>(first + dh));
  };
  const std::size_t q0 = head.head * dh, k0 = d + head.head * dh, v0 = 2 * d + head.head * dh;
  HeadWeights w{to_string(head), slice(q0), slice(k0), slice(v0)};
  w.b_q = bias(q0), w.b_k = bias(k0), w.b_v = bias(v0);
  input.heads.push_back(std::move(w));
  return input;
}

}  // namespace attnlab
