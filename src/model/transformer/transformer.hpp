// The transformer's block, written once (attnlab/model/model.hpp's families): each step's
// forward with its backward beside it, templated on the number type (f32 for the runtime and
// training, f64 for the finite-difference checks), and the one block forward that inference
// (forward.cpp: model_forward and the KV-cache Decoder) and training (training.cpp) both run.
// Training keeps every BlockActivations for its backward; inference reuses one as scratch.
// Shapes in the comments: n positions, d = n_embd, H query heads and H_kv KV heads of hd,
// W = qkv_width, Z = H·hd, F = fc_width, I the MLP's inner width, V the vocabulary.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "attnlab/kernels/activation.hpp"
#include "attnlab/kernels/team.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/tensor.hpp"

namespace attnlab::transformer {

// C[M × N] = beta · C + op(A) · op(B): attnlab/model/blas.hpp's gemm (OpenBLAS, the work
// shared over this thread's OpenMP threads), for f32 and f64.
using attnlab::gemm;
// The same on whole matrices: A is [M × K] ([K × M] when ta), B [K × N] ([N × K] when tb).
template <class T>
void gemm(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const T* A, const T* B, T beta, T* C) {
  gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, beta, C, N);
}

// Element-wise work over at least this many numbers is shared over the threads.
inline constexpr std::size_t kParallelFrom = std::size_t{1} << 15;

// row(i) for each of n rows of `values` numbers in all, shared over this thread's threads
// (kernels/team.hpp; one when called from training's workers) when there are kParallelFrom
// of them, else on this thread without entering OpenMP at all: even a region that runs on
// one thread ends with a futex call, and a generated token passes a few dozen of these.
template <class Row>
void for_rows(std::size_t n, std::size_t values, const Row& row) {
  share_items(n, values >= kParallelFrom ? 0 : 1, row);
}

// y[n × m] = the bias b in every row.
template <class T>
void fill_with_bias(const T* b, std::size_t n, std::size_t m, T* y) {
  for_rows(n, n * m, [&](std::size_t i) { std::copy_n(b, m, y + i * m); });
}

// y[n × m] = x[n × k] · W[k × m] + b (no bias when b is null). Without a bias the product
// is written into y (beta 0), not added to a y filled with zeros first: that fill and the
// product's read of it moved 2·n·m numbers for nothing (Llama-style models have no biases).
template <class T>
void linear_forward(const T* x, std::size_t n, std::size_t k, const T* w, const T* b, std::size_t m, T* y) {
  if (b) fill_with_bias(b, n, m, y);
  gemm(false, false, n, m, k, x, w, b ? T(1) : T(0), y);
}

// The same with W a Tensor (owned, or viewed in its checkpoint in any dtype): the inference forward's.
inline void linear_forward(const float* x, std::size_t n, std::size_t k, const Tensor& w, const float* b, std::size_t m,
                           float* y) {
  if (b) fill_with_bias(b, n, m, y);
  multiply(x, n, k, w, m, y, b ? 1.0f : 0.0f);
}

// The backward of y = x·W + b: dW += xᵀ·dy, db += Σ_rows dy, dx = dy·Wᵀ (no dW or db where
// they are null: a gradient with respect to the input only).
template <class T>
void linear_backward(const T* x, std::size_t n, std::size_t k, const T* w, std::size_t m, const T* dy, T* dw, T* db,
                     T* dx) {
  if (dw) gemm(true, false, k, m, n, x, dy, T(1), dw);
  if (db)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < m; ++j)
        db[j] += dy[i * m + j];
  gemm(false, true, n, k, m, dy, w, T(0), dx);
}

// The same with W a Tensor (a model's weights where they lie, any dtype), for the gradient
// with respect to the input alone: dx = dy·Wᵀ, W widened to f32 for the product.
inline void linear_backward(const float*, std::size_t n, std::size_t k, const Tensor& w, std::size_t m, const float* dy,
                            float* dw, float* db, float* dx) {
  if (dw || db) throw std::logic_error("linear_backward: a Tensor's weights get no gradient");
  const std::vector<float> dense = w.to_f32();  // [k × m]
  gemm(false, true, n, k, m, dy, dense.data(), 0.0f, dx);
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

inline NormShape block_norm(const ModelConfig& c) {
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
  // Each row's sums in vector lanes.
  for_rows(n, n * s.d, [&](std::size_t i) {
    const T* row = x + i * s.stride;
    T mu = 0, var = 0;
    if (s.kind == NormKind::layer_norm) {
#pragma omp simd reduction(+ : mu)
      for (std::size_t c = 0; c < s.d; ++c)
        mu += row[c];
      mu /= T(s.d);
    }
#pragma omp simd reduction(+ : var)
    for (std::size_t c = 0; c < s.d; ++c)
      var += (row[c] - mu) * (row[c] - mu);
    var /= T(s.d);
    const T r = T(1) / std::sqrt(var + T(s.epsilon));
    for (std::size_t c = 0; c < s.d; ++c)
      y[i * s.stride + c] = (row[c] - mu) * r * (s.plus_one ? T(1) + gamma[c] : gamma[c]) + (beta ? beta[c] : T(0));
    stats.mean[i] = mu, stats.rstd[i] = r;
  });
}

// Its backward, x̂ = (x − mean)·rstd and dx̂ = dy·γ: dγ += Σ dy·x̂, dβ += Σ dy (where not null),
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
      if (dgamma) dgamma[c] += drow[c] * xhat[c];
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
  if constexpr (std::is_same_v<T, float>) {  // the vector kernel (attnlab/kernels/activation.hpp)
    const ActivationKind f = c.mlp == MlpKind::swiglu ? ActivationKind::silu : ActivationKind::gelu;
    activation_rows(f, h, c.mlp == MlpKind::gelu ? nullptr : h + I, width, n, I, act, I);
    return;
  }
  share_items(n, 0, [&](std::size_t i) {  // serial when called from the training's own threads
    for (std::size_t j = 0; j < I; ++j) {
      const T gate = h[i * width + j];
      switch (c.mlp) {
        case MlpKind::gelu: act[i * I + j] = gelu(gate); break;
        case MlpKind::swiglu: act[i * I + j] = silu(gate) * h[i * width + I + j]; break;
        case MlpKind::geglu: act[i * I + j] = gelu(gate) * h[i * width + I + j]; break;
      }
    }
  });
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
  std::size_t hidden = static_cast<std::size_t>(-1);  // a key no query sees (erasure; none by default), but
                                                      // a query left with no other key
  std::size_t q(std::size_t h) const { return h * hd; }
  std::size_t k(std::size_t g) const { return (H + g) * hd; }
  std::size_t v(std::size_t g) const { return (H + H_kv + g) * hd; }
  std::size_t kv_of(std::size_t h) const { return h / (H / H_kv); }
  std::size_t first_key(std::size_t i) const { return window && i + 1 > window ? i + 1 - window : 0; }
  bool sees(std::size_t i, std::size_t j) const { return j != hidden || (i == j && first_key(i) == i); }
};

inline Heads heads_of(const ModelConfig& c, std::size_t layer) {
  const std::size_t hd = c.head_dim();
  return {
      c.n_head,       c.kv_heads(), hd, c.qkv_width(), c.query_scale > 0 ? c.query_scale : 1.0 / std::sqrt(double(hd)),
      c.window(layer)};
}

// Rotary positions on q and k in place, token i at position first + i: pairs (x_j, x_{j + r/2})
// of each head rotated by (first + i)·f_j (rope_frequencies). The backward rotates the
// gradients back, by −(first + i)·f_j (a rotation's transpose is its inverse).
template <class T>
void rotate_queries_and_keys(const ModelConfig& c, std::size_t layer, const Heads& at, T* qkv, std::size_t n,
                             std::size_t first, bool inverse) {
  if (!c.rotary) return;
  const std::vector<double> f = rope_frequencies(c, layer);
  const std::size_t half = f.size();
  for_rows(n, n * at.width, [&](std::size_t i) {  // (a prompt's rows: a sine and a cosine a pair each)
    T* row = qkv + i * at.width;
    const double position = double(first + i);
    for (std::size_t j = 0; j < half; ++j) {
      const T cos = T(std::cos(position * f[j])), sin = T((inverse ? -1 : 1) * std::sin(position * f[j]));
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
  });
}

// One query's weights over the keys it sees, from its scores (q · k · scale, −∞ for a key out
// of its view) in double, in place: softmax(scores), 0 where a score was −∞. The decoders'
// rows kept for the lab (one query at a time, beside the fast kernel that does not keep them).
inline void softmax_in_place(std::span<double> scores) {
  double largest = -INFINITY, total = 0;
  for (const double s : scores)
    largest = std::max(largest, s);
  for (double& s : scores)
    total += (s = std::exp(s - largest));
  for (double& s : scores)
    s /= total;
}

// Causal attention: probs[h][i][j] = softmax_j(q_i·k_j·scale) over the keys query i sees,
// z_i = Σ_j p_ij v_j, with q from head h and k, v from its KV head. A hidden key's weight is 0
// (and so is its gradient in the backward). Per head, as matrix products over all n × n
// pairs (the weights a query does not see are 0, so they add nothing):
//   S = Q_h · K_gᵀ [n × n], P = the masked softmax of S·scale by rows, Z_h = P · V_g [n × hd].
template <class T>
void attention_forward(const Heads& at, const T* qkv, std::size_t n, T* probs, T* z) {
  const std::size_t zw = at.H * at.hd;
  for (std::size_t h = 0; h < at.H; ++h) {
    const std::size_t g = at.kv_of(h);
    T* P = probs + h * n * n;                                                                      // [n × n]
    gemm(false, true, n, n, at.hd, qkv + at.q(h), at.width, qkv + at.k(g), at.width, T(0), P, n);  // S
    for (std::size_t i = 0; i < n; ++i) {
      T* p = P + i * n;
      const std::size_t j0 = at.first_key(i);
      T largest = -INFINITY;
      for (std::size_t j = j0; j <= i; ++j)
        if (at.sees(i, j)) largest = std::max(largest, p[j] *= T(at.scale));
      T sum = 0;
      for (std::size_t j = j0; j <= i; ++j)
        sum += p[j] = at.sees(i, j) ? std::exp(p[j] - largest) : T(0);
      std::fill(p, p + j0, T(0));
      for (std::size_t j = j0; j <= i; ++j)
        p[j] /= sum;
      std::fill(p + i + 1, p + n, T(0));
    }
    gemm(false, false, n, at.hd, n, P, n, qkv + at.v(g), at.width, T(0), z + at.q(h), zw);  // Z_h = P · V_g
  }
}

// Its backward: dP = dZ_h · V_gᵀ, dV_g += Pᵀ · dZ_h; dS_ij = p_ij (dP_ij − Σ_j' p_ij' dP_ij')·scale;
// dQ_h = dS · K_g, dK_g += dSᵀ · Q_h (a KV head's gradients summed over the query heads that
// share it).
template <class T>
void attention_backward(const Heads& at, const T* qkv, const T* probs, const T* dz, std::size_t n, T* dqkv) {
  const std::size_t zw = at.H * at.hd, W = at.width;
  std::fill_n(dqkv, n * W, T(0));
  std::vector<T> dS(n * n);  // [n × n] dP, then dS in place
  for (std::size_t h = 0; h < at.H; ++h) {
    const std::size_t g = at.kv_of(h);
    const T* P = probs + h * n * n;
    gemm(false, true, n, n, at.hd, dz + at.q(h), zw, qkv + at.v(g), W, T(0), dS.data(), n);  // dP
    gemm(true, false, n, at.hd, n, P, n, dz + at.q(h), zw, T(1), dqkv + at.v(g), W);         // dV_g
    for (std::size_t i = 0; i < n; ++i) {
      const T* p = P + i * n;
      T* ds = dS.data() + i * n;
      T weighted = 0;  // Σ_j p_ij dP_ij
      for (std::size_t j = 0; j <= i; ++j)
        weighted += p[j] * ds[j];
      for (std::size_t j = 0; j <= i; ++j)
        ds[j] = p[j] * (ds[j] - weighted) * T(at.scale);
      std::fill(ds + i + 1, ds + n, T(0));
    }
    gemm(false, false, n, at.hd, n, dS.data(), n, qkv + at.k(g), W, T(1), dqkv + at.q(h), W);  // dQ_h
    gemm(true, false, n, at.hd, n, dS.data(), n, qkv + at.q(h), W, T(1), dqkv + at.k(g), W);   // dK_g
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
  std::vector<T> y;                          // [n × d] scratch: the attention's, then the MLP's, output
  // x_in and x_mid are copied only when asked: training's backward and the stream's parts
  // read them; a forward that keeps nothing skips two copies of the stream a block.
  bool keep_residuals = true;
};

// v resized to `size` values; a buffer it must allocate anew, from kHugePagesFrom up, asked for on
// huge pages before its pages are touched (advise_huge_pages: the blocks' temporaries are
// allocated once a forward and rewritten by every layer's products).
template <class T>
void fit(std::vector<T>& v, std::size_t size) {
  if (v.capacity() < size) {
    v.reserve(size);
    advise_huge_pages(v.data(), size * sizeof(T));
  }
  v.resize(size);
}

// x += norm(y) with sandwich norms, else x += y; `kept` receives y when it is normed.
template <class T>
void add_to_residual(const ModelConfig& c, const T* gamma, std::vector<T>& y, std::vector<T>& kept, NormStats<T>& stats,
                     std::vector<T>& x, std::size_t n) {
  if (c.sandwich_norms) {
    kept = y;
    norm_forward(block_norm(c), kept.data(), n, gamma, static_cast<const T*>(nullptr), y.data(), stats);
  }
  const std::size_t d = x.size() / n;
  for_rows(n, x.size(), [&](std::size_t i) {
    for (std::size_t k = i * d; k < (i + 1) * d; ++k)
      x[k] += y[k];
  });
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

// A weight as the steps read it: a pointer into training's flat parameters, or a Tensor's
// owned values (a norm's weight, a bias); null when the family has none.
template <class T>
const T* values(const T* p) {
  return p;
}
inline const float* values(const Tensor& t) { return t.empty() ? nullptr : t.data(); }

// A block's tensors as pointers (P is const T* or T*), with a Block's field names: training's
// view of its flat parameters and of their gradients; all null, a backward that computes the
// input's gradient alone.
template <class P>
struct BlockView {
  P ln_1_weight = nullptr, ln_1_bias = nullptr, attn_weight = nullptr, attn_bias = nullptr;
  P attn_proj_weight = nullptr, attn_proj_bias = nullptr, q_norm_weight = nullptr, k_norm_weight = nullptr;
  P post_attn_norm_weight = nullptr, ln_2_weight = nullptr, ln_2_bias = nullptr, mlp_fc_weight = nullptr;
  P mlp_fc_bias = nullptr, mlp_proj_weight = nullptr, mlp_proj_bias = nullptr, post_mlp_norm_weight = nullptr;
};

// What a block's heads compute from the positioned q | k | v ([n × W]) into z ([n × Z]): the
// kept reference (attention_forward, every weight written out), the tiled kernel, or the new
// tokens against the KV cache when decoding.
template <class T>
using HeadsStep = std::function<void(const T* qkv, T* z)>;

// One block on the residual stream x ([n × d], updated in place), its tokens at positions
// first..: x += [norm](Attention(norm_1(x)) · W_o + b_o), then x += [norm](MLP(norm_2(x))), the
// bracketed norms for sandwich-norm families. B is a Block (Tensors) or training's view of its
// parameters (pointers): the same field names. `a` receives every intermediate.
template <class T, class B>
void block_forward(const ModelConfig& c, std::size_t layer, const B& p, std::size_t n, std::size_t first,
                   std::vector<T>& x, BlockActivations<T>& a, const HeadsStep<T>& heads, bool attention_only = false) {
  const std::size_t d = c.n_embd, W = c.qkv_width(), Z = c.attention_width(), F = c.fc_width(), I = c.n_inner,
                    hd = c.head_dim();
  const NormShape norm = block_norm(c);
  const Heads at = heads_of(c, layer);
  std::vector<T>& y = a.y;
  fit(y, n * d);
  if (a.keep_residuals) a.x_in = x;
  fit(a.ln1, n * d);
  norm_forward(norm, x.data(), n, values(p.ln_1_weight), values(p.ln_1_bias), a.ln1.data(), a.ln1_stats);
  fit(a.qkv, n * W);
  linear_forward(a.ln1.data(), n, d, p.attn_weight, values(p.attn_bias), W, a.qkv.data());
  if (c.qk_norm) {  // each q and k head RMS-normed by its weight [hd]
    a.qkv_raw = a.qkv;
    const NormShape head{NormKind::rms_norm, c.norm_plus_one, c.layer_norm_epsilon, hd, W};
    a.q_norm.resize(at.H), a.k_norm.resize(at.H_kv);
    for (std::size_t h = 0; h < at.H; ++h)
      norm_forward(head, a.qkv_raw.data() + at.q(h), n, values(p.q_norm_weight), static_cast<const T*>(nullptr),
                   a.qkv.data() + at.q(h), a.q_norm[h]);
    for (std::size_t kv = 0; kv < at.H_kv; ++kv)
      norm_forward(head, a.qkv_raw.data() + at.k(kv), n, values(p.k_norm_weight), static_cast<const T*>(nullptr),
                   a.qkv.data() + at.k(kv), a.k_norm[kv]);
  }
  rotate_queries_and_keys(c, layer, at, a.qkv.data(), n, first, false);
  fit(a.z, n * Z);
  heads(a.qkv.data(), a.z.data());
  linear_forward(a.z.data(), n, Z, p.attn_proj_weight, values(p.attn_proj_bias), d, y.data());
  add_to_residual(c, values(p.post_attn_norm_weight), y, a.attn_out, a.post_attn_stats, x, n);
  if (a.keep_residuals) a.x_mid = x;
  if (attention_only) return;
  fit(a.ln2, n * d);
  norm_forward(norm, x.data(), n, values(p.ln_2_weight), values(p.ln_2_bias), a.ln2.data(), a.ln2_stats);
  fit(a.fc, n * F), fit(a.act, n * I);
  linear_forward(a.ln2.data(), n, d, p.mlp_fc_weight, values(p.mlp_fc_bias), F, a.fc.data());
  activation_forward(c, a.fc.data(), n, a.act.data());
  linear_forward(a.act.data(), n, I, p.mlp_proj_weight, values(p.mlp_proj_bias), d, y.data());
  add_to_residual(c, values(p.post_mlp_norm_weight), y, a.mlp_out, a.post_mlp_stats, x, n);
}

// The block's backward, beside its forward: from dx, the gradient at the block's output
// ([n × d], replaced by the gradient at its input), every weight's gradient added into q (P
// and G are training's views of the parameters p and of their gradients q).
template <class T, class P, class G>
void block_backward(const ModelConfig& c, std::size_t layer, const P& p, const G& q, const BlockActivations<T>& a,
                    std::size_t n, std::vector<T>& dx, bool attention_only = false) {
  const std::size_t l = layer, d = c.n_embd, W = c.qkv_width(), Z = c.attention_width(), F = c.fc_width(),
                    I = c.n_inner, hd = c.head_dim();
  const NormShape norm = block_norm(c);
  const Heads at = heads_of(c, l);
  std::vector<T> dqkv(n * W), dz(n * Z), dln(n * d), dfc(n * F), dact(n * I), scratch;
  // dx is the gradient at the block's output; the residuals pass it through unchanged.
  if (!attention_only) {  // x_out = x_mid + [norm](act(norm_2(x_mid)·W_fc + b_fc)·W_mlp + b_mlp)
    const std::vector<T>& dy = from_residual(c, values(p.post_mlp_norm_weight), a.mlp_out, a.post_mlp_stats, dx,
                                             q.post_mlp_norm_weight, scratch, n);
    linear_backward(a.act.data(), n, I, p.mlp_proj_weight, d, dy.data(), q.mlp_proj_weight, q.mlp_proj_bias,
                    dact.data());
    activation_backward(c, a.fc.data(), dact.data(), n, dfc.data());
    linear_backward(a.ln2.data(), n, d, p.mlp_fc_weight, F, dfc.data(), q.mlp_fc_weight, q.mlp_fc_bias, dln.data());
    norm_backward(norm, a.x_mid.data(), n, values(p.ln_2_weight), a.ln2_stats, dln.data(), q.ln_2_weight, q.ln_2_bias,
                  dx.data());
  }
  // x_mid = x_in + [norm](Attention(norm_1(x_in))·W_o + b_o)
  const std::vector<T>& dy = from_residual(c, values(p.post_attn_norm_weight), a.attn_out, a.post_attn_stats, dx,
                                           q.post_attn_norm_weight, scratch, n);
  linear_backward(a.z.data(), n, Z, p.attn_proj_weight, d, dy.data(), q.attn_proj_weight, q.attn_proj_bias, dz.data());
  attention_backward(at, a.qkv.data(), a.probs.data(), dz.data(), n, dqkv.data());
  rotate_queries_and_keys(c, l, at, dqkv.data(), n, 0, true);
  if (c.qk_norm) {  // through each head's RMSNorm: the gradient at the projection's output
    const NormShape head{NormKind::rms_norm, c.norm_plus_one, c.layer_norm_epsilon, hd, W};
    std::vector<T> dnormed = dqkv;
    for (std::size_t h = 0; h < at.H; ++h) {
      for (std::size_t i = 0; i < n; ++i)
        std::fill_n(dqkv.data() + i * W + at.q(h), hd, T(0));
      norm_backward(head, a.qkv_raw.data() + at.q(h), n, values(p.q_norm_weight), a.q_norm[h], dnormed.data() + at.q(h),
                    q.q_norm_weight, static_cast<T*>(nullptr), dqkv.data() + at.q(h));
    }
    for (std::size_t kv = 0; kv < at.H_kv; ++kv) {
      for (std::size_t i = 0; i < n; ++i)
        std::fill_n(dqkv.data() + i * W + at.k(kv), hd, T(0));
      norm_backward(head, a.qkv_raw.data() + at.k(kv), n, values(p.k_norm_weight), a.k_norm[kv],
                    dnormed.data() + at.k(kv), q.k_norm_weight, static_cast<T*>(nullptr), dqkv.data() + at.k(kv));
    }
  }
  linear_backward(a.ln1.data(), n, d, p.attn_weight, W, dqkv.data(), q.attn_weight, q.attn_bias, dln.data());
  norm_backward(norm, a.x_in.data(), n, values(p.ln_1_weight), a.ln1_stats, dln.data(), q.ln_1_weight, q.ln_1_bias,
                dx.data());
}

// InputError naming "ids" unless ids is not empty, fits the model's positions from
// first_position and every id is in its vocabulary.
void check_ids(const ModelConfig& c, std::span<const int> ids, std::size_t first_position);
// The residual stream's start, [n × d]: the token's embedding (× √d_model for Gemma) plus,
// for learned positions, the position's (tokens at positions first_position..).
std::vector<float> embed(const Model& model, std::span<const int> ids, std::size_t first_position);

}  // namespace attnlab::transformer
