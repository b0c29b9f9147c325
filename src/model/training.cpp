// The loss and its gradient for every family the model layer runs, written by hand, and
// AdamW (attnlab/model/training.hpp). Each step's backward sits beside its forward; shapes
// are in the comments (n positions, d = n_embd, H query heads and H_kv KV heads of hd,
// W = qkv_width, Z = H·hd, F = fc_width, I the MLP's inner width, V the vocabulary).
#include "attnlab/model/training.hpp"

#include "attnlab/model/forward.hpp"

#include <cblas.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "attnlab/core/error.hpp"

namespace attnlab {

std::size_t parameter_count(const ModelConfig& c) { return c.parameters(); }

namespace {

// The model's tensors as pointers into a flat vector (P is const T* or T*), with a Model's
// field names so that tensor_of (the parameter table) fills them; a tensor the family does
// not have stays null.
template <class P>
struct BlockView {
  P ln_1_weight = nullptr, ln_1_bias = nullptr, attn_weight = nullptr, attn_bias = nullptr;
  P attn_proj_weight = nullptr, attn_proj_bias = nullptr, q_norm_weight = nullptr, k_norm_weight = nullptr;
  P post_attn_norm_weight = nullptr, ln_2_weight = nullptr, ln_2_bias = nullptr, mlp_fc_weight = nullptr;
  P mlp_fc_bias = nullptr, mlp_proj_weight = nullptr, mlp_proj_bias = nullptr, post_mlp_norm_weight = nullptr;
};
template <class P>
struct ModelView {
  P wte = nullptr, wpe = nullptr, ln_f_weight = nullptr, ln_f_bias = nullptr, lm_head = nullptr;
  std::vector<BlockView<P>> blocks;
};

template <class P>
ModelView<P> view(const ModelConfig& c, P base) {
  ModelView<P> v;
  v.blocks.resize(c.n_layer);
  for (const ParameterTensor& t : parameter_tensors(c))
    tensor_of(v, t) = base + t.offset;
  return v;
}

// C[M × N] = beta · C + op(A) · op(B), row-major; op transposes when asked.
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const float* A, const float* B, float beta,
          float* C) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0f, A, ta ? int(M) : int(K), B, tb ? int(K) : int(N), beta, C, int(N));
}
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const double* A, const double* B, double beta,
          double* C) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0, A, ta ? int(M) : int(K), B, tb ? int(K) : int(N), beta, C, int(N));
}

// y[n × m] = x[n × k] · W[k × m] + b (no bias when b is null).
template <class T>
void linear_forward(const T* x, std::size_t n, std::size_t k, const T* w, const T* b, std::size_t m, T* y) {
  for (std::size_t i = 0; i < n; ++i)
    if (b)
      std::copy_n(b, m, y + i * m);
    else
      std::fill_n(y + i * m, m, T(0));
  gemm(false, false, n, m, k, x, w, T(1), y);
}

// The backward of y = x·W + b: dW += xᵀ·dy, db += Σ_rows dy, dx = dy·Wᵀ.
template <class T>
void linear_backward(const T* x, std::size_t n, std::size_t k, const T* w, std::size_t m, const T* dy, T* dw, T* db,
                     T* dx) {
  gemm(true, false, k, m, n, x, dy, T(1), dw);
  if (db)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j)
        db[j] += dy[i * m + j];
  gemm(false, true, n, k, m, dy, w, T(0), dx);
}

// A norm over rows of d numbers, `stride` apart (a head's slice of q | k | v, or a whole row):
//   LayerNorm: y = (x − mean)·rstd·γ + β, rstd = 1/√(var + ε) (the biased variance)
//   RMSNorm:   y = x·rstd·γ,              rstd = 1/√(mean(x²) + ε)
// γ read as 1 + γ where the family stores w − 1 (Gemma); β absent for RMSNorm.
struct NormShape {
  NormKind kind;
  bool plus_one;
  double epsilon;
  std::size_t d, stride;
};

NormShape block_norm(const ModelConfig& c) {
  return {c.norm, c.norm_plus_one, c.layer_norm_epsilon, c.n_embd, c.n_embd};
}

// What a norm's backward needs of its forward: per row, the mean (0 for RMSNorm) and rstd.
template <class T>
struct NormStats {
  std::vector<T> mean, rstd;
};

template <class T>
void norm_forward(const NormShape& s, const T* x, std::size_t n, const T* gamma, const T* beta, T* y,
                  NormStats<T>& stats) {
  stats.mean.assign(n, T(0));
  stats.rstd.assign(n, T(0));
  for (std::size_t i = 0; i < n; ++i) {
    const T* row = x + i * s.stride;
    T mu = 0, var = 0;
    if (s.kind == NormKind::layer_norm) {
      for (std::size_t c = 0; c < s.d; ++c)
        mu += row[c];
      mu /= T(s.d);
    }
    for (std::size_t c = 0; c < s.d; ++c)
      var += (row[c] - mu) * (row[c] - mu);
    var /= T(s.d);
    const T r = T(1) / std::sqrt(var + T(s.epsilon));
    for (std::size_t c = 0; c < s.d; ++c)
      y[i * s.stride + c] = (row[c] - mu) * r * (s.plus_one ? T(1) + gamma[c] : gamma[c]) + (beta ? beta[c] : T(0));
    stats.mean[i] = mu, stats.rstd[i] = r;
  }
}

// Its backward, x̂ = (x − mean)·rstd and dx̂ = dy·γ: dγ += Σ dy·x̂, dβ += Σ dy,
//   LayerNorm: dx += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))
//   RMSNorm:   dx += rstd·(dx̂ − x̂·mean(dx̂·x̂))
template <class T>
void norm_backward(const NormShape& s, const T* x, std::size_t n, const T* gamma, const NormStats<T>& stats,
                   const T* dy, T* dgamma, T* dbeta, T* dx) {
  std::vector<T> xhat(s.d), dxhat(s.d);
  for (std::size_t i = 0; i < n; ++i) {
    const T* row = x + i * s.stride;
    const T* drow = dy + i * s.stride;
    T mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (std::size_t c = 0; c < s.d; ++c) {
      xhat[c] = (row[c] - stats.mean[i]) * stats.rstd[i];
      dxhat[c] = drow[c] * (s.plus_one ? T(1) + gamma[c] : gamma[c]);
      dgamma[c] += drow[c] * xhat[c];
      if (dbeta) dbeta[c] += drow[c];
      mean_dxhat += dxhat[c];
      mean_dxhat_xhat += dxhat[c] * xhat[c];
    }
    mean_dxhat = s.kind == NormKind::layer_norm ? mean_dxhat / T(s.d) : T(0);
    mean_dxhat_xhat /= T(s.d);
    for (std::size_t c = 0; c < s.d; ++c)
      dx[i * s.stride + c] += stats.rstd[i] * (dxhat[c] - mean_dxhat - xhat[c] * mean_dxhat_xhat);
  }
}

// GELU (tanh form) as x·σ(2u), u = √(2/π)·(x + 0.044715·x³), and its derivative
// σ(2u) + x·σ(2u)·(1 − σ(2u))·2√(2/π)·(1 + 3·0.044715·x²).
constexpr double kGeluK = 0.7978845608028654, kGeluC = 0.044715;
template <class T>
T gelu(T x) {
  const T u = T(kGeluK) * (x + T(kGeluC) * x * x * x);
  return x / (T(1) + std::exp(T(-2) * u));
}
template <class T>
T gelu_derivative(T x) {
  const T u = T(kGeluK) * (x + T(kGeluC) * x * x * x);
  const T s = T(1) / (T(1) + std::exp(T(-2) * u));
  return s + x * s * (T(1) - s) * T(2 * kGeluK) * (T(1) + T(3 * kGeluC) * x * x);
}
// SiLU x·σ(x) and its derivative σ(x)·(1 + x·(1 − σ(x))).
template <class T>
T silu(T x) {
  return x / (T(1) + std::exp(-x));
}
template <class T>
T silu_derivative(T x) {
  const T s = T(1) / (T(1) + std::exp(-x));
  return s * (T(1) + x * (T(1) - s));
}

// The MLP's activation over h = x·W_fc + b ([n × fc_width]) into act ([n × I]): GELU(h), or
// the gated f(gate) ⊙ up with h = gate | up (f SiLU for SwiGLU, GELU for GeGLU).
template <class T>
void activation_forward(const ModelConfig& c, const T* h, std::size_t n, T* act) {
  const std::size_t I = c.n_inner, width = c.fc_width();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < I; ++j) {
      const T gate = h[i * width + j];
      switch (c.mlp) {
        case MlpKind::gelu: act[i * I + j] = gelu(gate); break;
        case MlpKind::swiglu: act[i * I + j] = silu(gate) * h[i * width + I + j]; break;
        case MlpKind::geglu: act[i * I + j] = gelu(gate) * h[i * width + I + j]; break;
      }
    }
}

// Its backward: dgate = dact·f'(gate) (· up when gated), dup = dact·f(gate).
template <class T>
void activation_backward(const ModelConfig& c, const T* h, const T* dact, std::size_t n, T* dh) {
  const std::size_t I = c.n_inner, width = c.fc_width();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < I; ++j) {
      const T gate = h[i * width + j], da = dact[i * I + j];
      if (c.mlp == MlpKind::gelu) {
        dh[i * width + j] = da * gelu_derivative(gate);
        continue;
      }
      const T up = h[i * width + I + j];
      const bool silu_gate = c.mlp == MlpKind::swiglu;
      dh[i * width + j] = da * up * (silu_gate ? silu_derivative(gate) : gelu_derivative(gate));
      dh[i * width + I + j] = da * (silu_gate ? silu(gate) : gelu(gate));
    }
}

// Where a layer's heads sit in a q | k | v row and how they attend (as the forward's
// HeadLayout): query head h reads KV head h / (H / H_kv).
struct Heads {
  std::size_t H, H_kv, hd, width;
  double scale;
  std::size_t window;  // 0: every earlier key; else the last `window` keys, the query's own included
  std::size_t q(std::size_t h) const { return h * hd; }
  std::size_t k(std::size_t g) const { return (H + g) * hd; }
  std::size_t v(std::size_t g) const { return (H + H_kv + g) * hd; }
  std::size_t kv_of(std::size_t h) const { return h / (H / H_kv); }
  std::size_t first_key(std::size_t i) const { return window && i + 1 > window ? i + 1 - window : 0; }
};

Heads heads_of(const ModelConfig& c, std::size_t layer) {
  const std::size_t hd = c.head_dim();
  return {
      c.n_head,       c.kv_heads(), hd, c.qkv_width(), c.query_scale > 0 ? c.query_scale : 1.0 / std::sqrt(double(hd)),
      c.window(layer)};
}

// Rotary positions on q and k in place (token i at position i): pairs (x_j, x_{j + r/2}) of
// each head rotated by i·f_j (rope_frequencies, the forward's). The backward rotates the
// gradients back, by −i·f_j (a rotation's transpose is its inverse).
template <class T>
void rotate_queries_and_keys(const ModelConfig& c, std::size_t layer, const Heads& at, T* qkv, std::size_t n,
                             bool inverse) {
  if (!c.rotary) return;
  const std::vector<double> f = rope_frequencies(c, layer);
  const std::size_t half = f.size();
  for (std::size_t i = 0; i < n; ++i) {
    T* row = qkv + i * at.width;
    for (std::size_t j = 0; j < half; ++j) {
      const T cos = T(std::cos(double(i) * f[j])), sin = T((inverse ? -1 : 1) * std::sin(double(i) * f[j]));
      const auto rotate = [&](T* head) {
        const T x1 = head[j], x2 = head[j + half];
        head[j] = x1 * cos - x2 * sin;
        head[j + half] = x2 * cos + x1 * sin;
      };
      for (std::size_t h = 0; h < at.H; ++h)
        rotate(row + at.q(h));
      for (std::size_t g = 0; g < at.H_kv; ++g)
        rotate(row + at.k(g));
    }
  }
}

// Causal attention: probs[h][i][j] = softmax_j(q_i·k_j·scale) over the keys query i sees,
// z_i = Σ_j p_ij v_j, with q from head h and k, v from its KV head.
template <class T>
void attention_forward(const Heads& at, const T* qkv, std::size_t n, T* probs, T* z) {
  const std::size_t zw = at.H * at.hd;
  std::fill_n(z, n * zw, T(0));
  for (std::size_t h = 0; h < at.H; ++h)
    for (std::size_t i = 0; i < n; ++i) {
      T* p = probs + (h * n + i) * n;
      std::fill(p, p + n, T(0));
      const T* q = qkv + i * at.width + at.q(h);
      const std::size_t j0 = at.first_key(i);
      T largest = -INFINITY;
      for (std::size_t j = j0; j <= i; ++j) {
        const T* k = qkv + j * at.width + at.k(at.kv_of(h));
        T s = 0;
        for (std::size_t c = 0; c < at.hd; ++c)
          s += q[c] * k[c];
        p[j] = s * T(at.scale);
        largest = std::max(largest, p[j]);
      }
      T sum = 0;
      for (std::size_t j = j0; j <= i; ++j)
        sum += p[j] = std::exp(p[j] - largest);
      for (std::size_t j = j0; j <= i; ++j) {
        p[j] /= sum;
        const T* v = qkv + j * at.width + at.v(at.kv_of(h));
        for (std::size_t c = 0; c < at.hd; ++c)
          z[i * zw + h * at.hd + c] += p[j] * v[c];
      }
    }
}

// Its backward: dv_j += Σ_i p_ij dz_i; dp_ij = dz_i·v_j; ds_ij = p_ij (dp_ij − Σ_j' p_ij' dp_ij');
// dq_i += Σ_j ds_ij k_j · scale; dk_j += Σ_i ds_ij q_i · scale (a KV head's gradients summed
// over the query heads that share it).
template <class T>
void attention_backward(const Heads& at, const T* qkv, const T* probs, const T* dz, std::size_t n, T* dqkv) {
  const std::size_t zw = at.H * at.hd;
  std::fill_n(dqkv, n * at.width, T(0));
  std::vector<T> dp(n);
  for (std::size_t h = 0; h < at.H; ++h)
    for (std::size_t i = 0; i < n; ++i) {
      const T* p = probs + (h * n + i) * n;
      const T* dzi = dz + i * zw + h * at.hd;
      const std::size_t j0 = at.first_key(i), g = at.kv_of(h);
      T weighted = 0;  // Σ_j p_ij dp_ij
      for (std::size_t j = j0; j <= i; ++j) {
        const T* v = qkv + j * at.width + at.v(g);
        T* dv = dqkv + j * at.width + at.v(g);
        T s = 0;
        for (std::size_t c = 0; c < at.hd; ++c)
          s += dzi[c] * v[c], dv[c] += p[j] * dzi[c];
        dp[j] = s;
        weighted += p[j] * s;
      }
      const T* q = qkv + i * at.width + at.q(h);
      T* dq = dqkv + i * at.width + at.q(h);
      for (std::size_t j = j0; j <= i; ++j) {
        const T ds = p[j] * (dp[j] - weighted) * T(at.scale);
        const T* k = qkv + j * at.width + at.k(g);
        T* dk = dqkv + j * at.width + at.k(g);
        for (std::size_t c = 0; c < at.hd; ++c)
          dq[c] += ds * k[c], dk[c] += ds * q[c];
      }
    }
}

// What one block's forward keeps for its backward (one sequence of n positions; d the
// width, W = qkv_width, Z = H·head_dim, F = fc_width, I the MLP's inner width).
template <class T>
struct BlockActivations {
  std::vector<T> x_in;                       // [n × d] the residual stream entering the block
  std::vector<T> ln1;                        // [n × d] norm_1(x_in)
  NormStats<T> ln1_stats;                    //
  std::vector<T> qkv_raw;                    // [n × W] ln1 · W_qkv + b, before QK-norm (QK-norm only)
  std::vector<NormStats<T>> q_norm, k_norm;  // per query / KV head (QK-norm only)
  std::vector<T> qkv;                        // [n × W] normed and rotated: what the heads read
  std::vector<T> probs;                      // [H × n × n] each head's softmax
  std::vector<T> z;                          // [n × Z] the heads' outputs side by side
  std::vector<T> attn_out;                   // [n × d] z · W_o + b_o, before the sandwich norm (sandwich only)
  NormStats<T> post_attn_stats;              //
  std::vector<T> x_mid;                      // [n × d] after attention's residual
  std::vector<T> ln2;                        // [n × d] the MLP's input (empty when attention-only)
  NormStats<T> ln2_stats;                    //
  std::vector<T> fc, act;                    // [n × F] before and [n × I] after the activation
  std::vector<T> mlp_out;                    // [n × d] before the sandwich norm (sandwich only)
  NormStats<T> post_mlp_stats;               //
};

// x += norm(y) with sandwich norms, else x += y; `kept` receives y when it is normed.
template <class T>
void add_to_residual(const ModelConfig& c, const T* gamma, std::vector<T>& y, std::vector<T>& kept, NormStats<T>& stats,
                     std::vector<T>& x, std::size_t n) {
  if (c.sandwich_norms) {
    kept = y;
    norm_forward(block_norm(c), kept.data(), n, gamma, static_cast<const T*>(nullptr), y.data(), stats);
  }
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] += y[k];
}

// The gradient reaching y from the residual's gradient dx (through the sandwich norm when there is one).
template <class T>
const std::vector<T>& from_residual(const ModelConfig& c, const T* gamma, const std::vector<T>& kept,
                                    const NormStats<T>& stats, const std::vector<T>& dx, T* dgamma,
                                    std::vector<T>& scratch, std::size_t n) {
  if (!c.sandwich_norms) return dx;
  scratch.assign(dx.size(), T(0));
  norm_backward(block_norm(c), kept.data(), n, gamma, stats, dx.data(), dgamma, static_cast<T*>(nullptr),
                scratch.data());
  return scratch;
}

// One sequence: the loss summed over its predictions, and (scaled by `weight`, 1 / the
// batch's predictions) its gradients added into `grads`.
template <class T>
T sequence_loss_and_gradients(const ModelConfig& c, const ModelView<const T*>& w, const std::vector<int>& ids, T weight,
                              const ModelView<T*>& g, bool attention_only) {
  const std::size_t n = ids.size() - 1, d = c.n_embd, V = c.vocab_size, W = c.qkv_width(), Z = c.attention_width(),
                    F = c.fc_width(), I = c.n_inner, hd = c.head_dim();
  const NormShape norm = block_norm(c);
  const T embedding_scale = T(c.embedding_scale);
  // ---- forward ----
  std::vector<T> x(n * d);  // x_t = wte[ids_t] · scale (+ wpe[t] for learned positions)
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t k = 0; k < d; ++k)
      x[t * d + k] = w.wte[ids[t] * d + k] * embedding_scale + (w.wpe ? w.wpe[t * d + k] : T(0));
  std::vector<BlockActivations<T>> acts(c.n_layer);
  std::vector<T> y(n * d);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const BlockView<const T*>& p = w.blocks[l];
    BlockActivations<T>& a = acts[l];
    const Heads at = heads_of(c, l);
    a.x_in = x;
    a.ln1.resize(n * d);
    norm_forward(norm, x.data(), n, p.ln_1_weight, p.ln_1_bias, a.ln1.data(), a.ln1_stats);
    a.qkv.resize(n * W);
    linear_forward(a.ln1.data(), n, d, p.attn_weight, p.attn_bias, W, a.qkv.data());
    if (c.qk_norm) {  // each q and k head RMS-normed by its weight [hd]
      a.qkv_raw = a.qkv;
      const NormShape head{NormKind::rms_norm, c.norm_plus_one, c.layer_norm_epsilon, hd, W};
      a.q_norm.resize(at.H), a.k_norm.resize(at.H_kv);
      for (std::size_t h = 0; h < at.H; ++h)
        norm_forward(head, a.qkv_raw.data() + at.q(h), n, p.q_norm_weight, static_cast<const T*>(nullptr),
                     a.qkv.data() + at.q(h), a.q_norm[h]);
      for (std::size_t kv = 0; kv < at.H_kv; ++kv)
        norm_forward(head, a.qkv_raw.data() + at.k(kv), n, p.k_norm_weight, static_cast<const T*>(nullptr),
                     a.qkv.data() + at.k(kv), a.k_norm[kv]);
    }
    rotate_queries_and_keys(c, l, at, a.qkv.data(), n, false);
    a.probs.resize(at.H * n * n), a.z.resize(n * Z);
    attention_forward(at, a.qkv.data(), n, a.probs.data(), a.z.data());
    linear_forward(a.z.data(), n, Z, p.attn_proj_weight, p.attn_proj_bias, d, y.data());
    add_to_residual(c, p.post_attn_norm_weight, y, a.attn_out, a.post_attn_stats, x, n);
    a.x_mid = x;
    if (attention_only) continue;
    a.ln2.resize(n * d);
    norm_forward(norm, x.data(), n, p.ln_2_weight, p.ln_2_bias, a.ln2.data(), a.ln2_stats);
    a.fc.resize(n * F), a.act.resize(n * I);
    linear_forward(a.ln2.data(), n, d, p.mlp_fc_weight, p.mlp_fc_bias, F, a.fc.data());
    activation_forward(c, a.fc.data(), n, a.act.data());
    linear_forward(a.act.data(), n, I, p.mlp_proj_weight, p.mlp_proj_bias, d, y.data());
    add_to_residual(c, p.post_mlp_norm_weight, y, a.mlp_out, a.post_mlp_stats, x, n);
  }
  std::vector<T> lnf(n * d), logits(n * V);
  NormStats<T> lnf_stats;
  norm_forward(norm, x.data(), n, w.ln_f_weight, w.ln_f_bias, lnf.data(), lnf_stats);
  const T* unembedding = c.tied ? w.wte : w.lm_head;
  T* d_unembedding = c.tied ? g.wte : g.lm_head;
  gemm(false, true, n, V, d, lnf.data(), unembedding, T(0), logits.data());  // logits = norm_f(x) · Uᵀ
  // Cross-entropy, and dlogits = (softmax − onehot(target)) · weight.
  T loss = 0;
  std::vector<T>& dlogits = logits;  // reused in place
  for (std::size_t t = 0; t < n; ++t) {
    T* row = logits.data() + t * V;
    const T largest = *std::max_element(row, row + V);
    T sum = 0;
    for (std::size_t v = 0; v < V; ++v)
      sum += row[v] = std::exp(row[v] - largest);
    const std::size_t target = static_cast<std::size_t>(ids[t + 1]);
    loss -= std::log(row[target] / sum);
    for (std::size_t v = 0; v < V; ++v)
      row[v] = row[v] / sum * weight;
    dlogits[t * V + target] -= weight;
  }
  // ---- backward ----
  gemm(true, false, V, d, n, dlogits.data(), lnf.data(), T(1), d_unembedding);  // dU += dlogitsᵀ · norm_f(x)
  std::vector<T> dlnf(n * d), dx(n * d, T(0));
  gemm(false, false, n, d, V, dlogits.data(), unembedding, T(0), dlnf.data());  // dnorm_f = dlogits · U
  norm_backward(norm, x.data(), n, w.ln_f_weight, lnf_stats, dlnf.data(), g.ln_f_weight, g.ln_f_bias, dx.data());
  std::vector<T> dqkv(n * W), dz(n * Z), dln(n * d), dfc(n * F), dact(n * I), scratch;
  for (std::size_t l = c.n_layer; l-- > 0;) {
    const BlockView<const T*>& p = w.blocks[l];
    const BlockView<T*>& q = g.blocks[l];
    const BlockActivations<T>& a = acts[l];
    const Heads at = heads_of(c, l);
    // dx is the gradient at the block's output; the residuals pass it through unchanged.
    if (!attention_only) {  // x_out = x_mid + [norm](act(norm_2(x_mid)·W_fc + b_fc)·W_mlp + b_mlp)
      const std::vector<T>& dy =
          from_residual(c, p.post_mlp_norm_weight, a.mlp_out, a.post_mlp_stats, dx, q.post_mlp_norm_weight, scratch, n);
      linear_backward(a.act.data(), n, I, p.mlp_proj_weight, d, dy.data(), q.mlp_proj_weight, q.mlp_proj_bias,
                      dact.data());
      activation_backward(c, a.fc.data(), dact.data(), n, dfc.data());
      linear_backward(a.ln2.data(), n, d, p.mlp_fc_weight, F, dfc.data(), q.mlp_fc_weight, q.mlp_fc_bias, dln.data());
      norm_backward(norm, a.x_mid.data(), n, p.ln_2_weight, a.ln2_stats, dln.data(), q.ln_2_weight, q.ln_2_bias,
                    dx.data());
    }
    // x_mid = x_in + [norm](Attention(norm_1(x_in))·W_o + b_o)
    const std::vector<T>& dy = from_residual(c, p.post_attn_norm_weight, a.attn_out, a.post_attn_stats, dx,
                                             q.post_attn_norm_weight, scratch, n);
    linear_backward(a.z.data(), n, Z, p.attn_proj_weight, d, dy.data(), q.attn_proj_weight, q.attn_proj_bias,
                    dz.data());
    attention_backward(at, a.qkv.data(), a.probs.data(), dz.data(), n, dqkv.data());
    rotate_queries_and_keys(c, l, at, dqkv.data(), n, true);
    if (c.qk_norm) {  // through each head's RMSNorm: the gradient at the projection's output
      const NormShape head{NormKind::rms_norm, c.norm_plus_one, c.layer_norm_epsilon, hd, W};
      std::vector<T> dnormed = dqkv;
      for (std::size_t h = 0; h < at.H; ++h) {
        for (std::size_t i = 0; i < n; ++i)
          std::fill_n(dqkv.data() + i * W + at.q(h), hd, T(0));
        norm_backward(head, a.qkv_raw.data() + at.q(h), n, p.q_norm_weight, a.q_norm[h], dnormed.data() + at.q(h),
                      q.q_norm_weight, static_cast<T*>(nullptr), dqkv.data() + at.q(h));
      }
      for (std::size_t kv = 0; kv < at.H_kv; ++kv) {
        for (std::size_t i = 0; i < n; ++i)
          std::fill_n(dqkv.data() + i * W + at.k(kv), hd, T(0));
        norm_backward(head, a.qkv_raw.data() + at.k(kv), n, p.k_norm_weight, a.k_norm[kv], dnormed.data() + at.k(kv),
                      q.k_norm_weight, static_cast<T*>(nullptr), dqkv.data() + at.k(kv));
      }
    }
    linear_backward(a.ln1.data(), n, d, p.attn_weight, W, dqkv.data(), q.attn_weight, q.attn_bias, dln.data());
    norm_backward(norm, a.x_in.data(), n, p.ln_1_weight, a.ln1_stats, dln.data(), q.ln_1_weight, q.ln_1_bias,
                  dx.data());
  }
  for (std::size_t t = 0; t < n; ++t)  // x_t = wte[ids_t] · scale (+ wpe[t])
    for (std::size_t k = 0; k < d; ++k) {
      g.wte[ids[t] * d + k] += dx[t * d + k] * embedding_scale;
      if (g.wpe) g.wpe[t * d + k] += dx[t * d + k];
    }
  return loss;
}

}  // namespace

template <class T>
std::vector<T> flatten(const Model& m) {
  std::vector<T> out;
  out.reserve(parameter_count(m.config));
  for (const ParameterTensor& t : parameter_tensors(m.config)) {
    const std::vector<float> v = tensor_of(m, t).to_f32();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}
template std::vector<float> flatten<float>(const Model&);
template std::vector<double> flatten<double>(const Model&);

Model unflatten(const ModelConfig& c, std::span<const float> parameters) {
  Model m;
  m.config = c;
  m.blocks.resize(c.n_layer);
  for (const ParameterTensor& t : parameter_tensors(c))
    tensor_of(m, t) = std::vector<float>(parameters.begin() + static_cast<std::ptrdiff_t>(t.offset),
                                         parameters.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
  return m;
}

namespace {

// The widest linear layer of a block: the MLP's, unless there are no MLPs.
std::size_t block_width(const ModelConfig& c, const TrainingOptions& options) {
  return options.attention_only ? c.qkv_width() : std::max(c.qkv_width(), c.fc_width());
}

}  // namespace

template <class T>
T loss_and_gradients(const ModelConfig& c, std::span<const T> parameters, const Batch& batch, std::span<T> gradients,
                     const TrainingOptions& options) {
  if (parameters.size() != parameter_count(c) || gradients.size() != parameters.size())
    fail("parameters", "the parameter and gradient vectors do not match the config");
  std::size_t predictions = 0;
  for (const std::vector<int>& ids : batch) {
    if (ids.size() < 2 || ids.size() - 1 > c.n_positions)
      fail("batch",
           fmt::format("a sequence of {} tokens; give 2 to {} (n_positions + 1)", ids.size(), c.n_positions + 1));
    for (int id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= c.vocab_size)
        fail("batch", fmt::format("token id {} is outside the vocabulary (0 to {})", id, c.vocab_size - 1));
    predictions += ids.size() - 1;
  }
  std::fill(gradients.begin(), gradients.end(), T(0));
  const ModelView<const T*> w = view(c, parameters.data());
  // By default the batch is split over the cores only when every matrix product of a
  // sequence is small enough that OpenBLAS runs it on one thread (fewer than 2^18
  // multiply-adds: its GEMM threading threshold); larger products OpenBLAS spreads over the
  // cores itself, and calling it from several threads at once would queue them on its lock.
  std::size_t longest = 0;
  for (const std::vector<int>& ids : batch)
    longest = std::max(longest, ids.size() - 1);
  const std::size_t largest_product = longest * c.n_embd * std::max(block_width(c, options), c.vocab_size);
  const std::size_t cores =
      largest_product < (std::size_t{1} << 18) ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  const std::size_t threads = std::clamp<std::size_t>(options.threads ? options.threads : cores, 1, batch.size());
  // Thread k takes sequences [k·B/threads, (k+1)·B/threads): thread 0 into `gradients`, the
  // others into buffers of their own, added to it afterwards in thread order.
  std::vector<std::vector<T>> partial(threads - 1, std::vector<T>(gradients.size(), T(0)));
  std::vector<T> totals(threads, T(0));
  std::vector<std::exception_ptr> errors(threads);
  const auto work = [&](std::size_t k) {
    try {
      const ModelView<T*> g = view(c, k == 0 ? gradients.data() : partial[k - 1].data());
      for (std::size_t b = k * batch.size() / threads; b < (k + 1) * batch.size() / threads; ++b)
        totals[k] += sequence_loss_and_gradients(c, w, batch[b], T(1) / T(predictions), g, options.attention_only);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t k = 1; k < threads; ++k)
    helpers.emplace_back(work, k);
  work(0);
  for (std::thread& t : helpers)
    t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  T total = totals[0];
  for (std::size_t k = 1; k < threads; ++k) {
    total += totals[k];
    for (std::size_t i = 0; i < gradients.size(); ++i)
      gradients[i] += partial[k - 1][i];
  }
  return total / T(predictions);
}
template float loss_and_gradients<float>(const ModelConfig&, std::span<const float>, const Batch&, std::span<float>,
                                         const TrainingOptions&);
template double loss_and_gradients<double>(const ModelConfig&, std::span<const double>, const Batch&, std::span<double>,
                                           const TrainingOptions&);

double training_flops(const ModelConfig& c, std::size_t n, bool attention_only) {
  double forward = forward_flops(c, n);
  if (attention_only)  // the MLP's two products, d × F and I × d, per token and layer
    forward -= static_cast<double>(c.n_layer) * 2 * static_cast<double>(n) *
               static_cast<double>(c.n_embd * c.fc_width() + c.n_inner * c.n_embd);
  return 3 * forward;
}

void AdamW::step(std::span<float> p, std::span<const float> g, double rate, std::span<const std::uint8_t> learns) {
  if (m.size() != p.size()) m.assign(p.size(), 0.0f), v.assign(p.size(), 0.0f), t = 0;
  ++t;
  const double correction1 = 1 - std::pow(beta1, double(t)), correction2 = 1 - std::pow(beta2, double(t));
  for (std::size_t k = 0; k < p.size(); ++k) {
    if (!learns.empty() && !learns[k]) continue;
    m[k] = float(beta1 * m[k] + (1 - beta1) * g[k]);
    v[k] = float(beta2 * v[k] + (1 - beta2) * double(g[k]) * g[k]);
    const double m_hat = m[k] / correction1, v_hat = v[k] / correction2;
    p[k] = float(p[k] - rate * (m_hat / (std::sqrt(v_hat) + epsilon) + weight_decay * p[k]));
  }
}

double clip_gradients(std::span<float> g, double max_norm) {
  double squares = 0;
  for (float x : g)
    squares += double(x) * x;
  const double norm = std::sqrt(squares);
  if (norm > max_norm && norm > 0)
    for (float& x : g)
      x = float(x * (max_norm / norm));
  return norm;
}

}  // namespace attnlab
