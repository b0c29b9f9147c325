// GPT-2's loss and its gradient, written by hand, and AdamW (attnlab/model/training.hpp).
// Each step's backward sits beside its forward; shapes are in the comments (n positions,
// d = n_embd, H heads of dh, I = the MLP's width, V the vocabulary).
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

std::vector<ParameterTensor> parameter_tensors(const ModelConfig& c) {
  const std::size_t d = c.n_embd, inner = c.n_inner;
  std::vector<ParameterTensor> out;
  std::size_t offset = 0;
  const auto add = [&](std::string name, std::vector<std::size_t> shape) {
    std::size_t size = 1;
    for (std::size_t s : shape)
      size *= s;
    out.push_back({std::move(name), std::move(shape), offset, size});
    offset += size;
  };
  add("wte.weight", {c.vocab_size, d});
  add("wpe.weight", {c.n_positions, d});
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    add(h + "ln_1.weight", {d});
    add(h + "ln_1.bias", {d});
    add(h + "attn.c_attn.weight", {d, 3 * d});
    add(h + "attn.c_attn.bias", {3 * d});
    add(h + "attn.c_proj.weight", {d, d});
    add(h + "attn.c_proj.bias", {d});
    add(h + "ln_2.weight", {d});
    add(h + "ln_2.bias", {d});
    add(h + "mlp.c_fc.weight", {d, inner});
    add(h + "mlp.c_fc.bias", {inner});
    add(h + "mlp.c_proj.weight", {inner, d});
    add(h + "mlp.c_proj.bias", {d});
  }
  add("ln_f.weight", {d});
  add("ln_f.bias", {d});
  return out;
}

std::size_t parameter_count(const ModelConfig& c) {
  const auto tensors = parameter_tensors(c);
  return tensors.back().offset + tensors.back().size;
}

namespace {

// The model's tensors as pointers into a flat vector (P is const T* or T*), in the order of
// parameter_tensors.
template <class P>
struct LayerView {
  P ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, mlp_w, mlp_b;
};
template <class P>
struct ModelView {
  P wte, wpe;
  std::vector<LayerView<P>> layers;
  P lnf_w, lnf_b;
};

template <class P>
ModelView<P> view(const ModelConfig& c, P base) {
  const std::vector<ParameterTensor> t = parameter_tensors(c);
  std::size_t k = 0;
  const auto next = [&] { return base + t[k++].offset; };
  ModelView<P> v;
  v.wte = next();
  v.wpe = next();
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    LayerView<P> layer;
    for (P* field : {&layer.ln1_w, &layer.ln1_b, &layer.attn_w, &layer.attn_b, &layer.proj_w, &layer.proj_b,
                     &layer.ln2_w, &layer.ln2_b, &layer.fc_w, &layer.fc_b, &layer.mlp_w, &layer.mlp_b})
      *field = next();
    v.layers.push_back(layer);
  }
  v.lnf_w = next();
  v.lnf_b = next();
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

// y[n × m] = x[n × k] · W[k × m] + b.
template <class T>
void linear_forward(const T* x, std::size_t n, std::size_t k, const T* w, const T* b, std::size_t m, T* y) {
  for (std::size_t i = 0; i < n; ++i)
    std::copy_n(b, m, y + i * m);
  gemm(false, false, n, m, k, x, w, T(1), y);
}

// The backward of y = x·W + b: dW += xᵀ·dy, db += Σ_rows dy, dx = dy·Wᵀ.
template <class T>
void linear_backward(const T* x, std::size_t n, std::size_t k, const T* w, std::size_t m, const T* dy, T* dw, T* db,
                     T* dx) {
  gemm(true, false, k, m, n, x, dy, T(1), dw);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j)
      db[j] += dy[i * m + j];
  gemm(false, true, n, k, m, dy, w, T(0), dx);
}

// y = (x − mean)·rstd·γ + β per row, rstd = 1/√(var + ε) (the biased variance).
template <class T>
void layer_norm_forward(const T* x, std::size_t n, std::size_t d, const T* gamma, const T* beta, double epsilon, T* y,
                        T* mean, T* rstd) {
  for (std::size_t i = 0; i < n; ++i) {
    const T* row = x + i * d;
    T mu = 0, var = 0;
    for (std::size_t c = 0; c < d; ++c)
      mu += row[c];
    mu /= T(d);
    for (std::size_t c = 0; c < d; ++c)
      var += (row[c] - mu) * (row[c] - mu);
    var /= T(d);
    const T r = T(1) / std::sqrt(var + T(epsilon));
    for (std::size_t c = 0; c < d; ++c)
      y[i * d + c] = (row[c] - mu) * r * gamma[c] + beta[c];
    mean[i] = mu, rstd[i] = r;
  }
}

// Its backward: dγ += Σ dy·x̂, dβ += Σ dy, dx += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)), dx̂ = dy·γ.
template <class T>
void layer_norm_backward(const T* x, std::size_t n, std::size_t d, const T* gamma, const T* mean, const T* rstd,
                         const T* dy, T* dgamma, T* dbeta, T* dx) {
  std::vector<T> xhat(d), dxhat(d);
  for (std::size_t i = 0; i < n; ++i) {
    T mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (std::size_t c = 0; c < d; ++c) {
      xhat[c] = (x[i * d + c] - mean[i]) * rstd[i];
      dxhat[c] = dy[i * d + c] * gamma[c];
      dgamma[c] += dy[i * d + c] * xhat[c];
      dbeta[c] += dy[i * d + c];
      mean_dxhat += dxhat[c];
      mean_dxhat_xhat += dxhat[c] * xhat[c];
    }
    mean_dxhat /= T(d);
    mean_dxhat_xhat /= T(d);
    for (std::size_t c = 0; c < d; ++c)
      dx[i * d + c] += rstd[i] * (dxhat[c] - mean_dxhat - xhat[c] * mean_dxhat_xhat);
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

// What one block's forward keeps for its backward (one sequence of n positions).
template <class T>
struct BlockActivations {
  std::vector<T> x_in;                     // [n × d] the residual stream entering the block
  std::vector<T> ln1, ln1_mean, ln1_rstd;  // [n × d], [n], [n]
  std::vector<T> qkv;                      // [n × 3d] Q | K | V
  std::vector<T> probs;                    // [H × n × n] each head's causal softmax
  std::vector<T> z;                        // [n × d] the heads' outputs, side by side
  std::vector<T> x_mid;                    // [n × d] after attention's residual
  std::vector<T> ln2, ln2_mean, ln2_rstd;  // MLP input (empty when attention-only)
  std::vector<T> fc, gelu;                 // [n × I] before and after the GELU
};

// Causal multi-head attention: probs[h][i][j] = softmax_j≤i(q_i·k_j/√dh), z_i = Σ_j p_ij v_j.
template <class T>
void attention_forward(const T* qkv, std::size_t n, std::size_t d, std::size_t heads, T* probs, T* z) {
  const std::size_t dh = d / heads;
  const T scale = T(1) / std::sqrt(T(dh));
  std::fill_n(z, n * d, T(0));
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < n; ++i) {
      T* p = probs + (h * n + i) * n;
      const T* q = qkv + i * 3 * d + h * dh;
      T largest = -INFINITY;
      for (std::size_t j = 0; j <= i; ++j) {
        const T* k = qkv + j * 3 * d + d + h * dh;
        T s = 0;
        for (std::size_t c = 0; c < dh; ++c)
          s += q[c] * k[c];
        p[j] = s * scale;
        largest = std::max(largest, p[j]);
      }
      T sum = 0;
      for (std::size_t j = 0; j <= i; ++j)
        sum += p[j] = std::exp(p[j] - largest);
      for (std::size_t j = 0; j <= i; ++j)
        p[j] /= sum;
      std::fill(p + i + 1, p + n, T(0));
      for (std::size_t j = 0; j <= i; ++j) {
        const T* v = qkv + j * 3 * d + 2 * d + h * dh;
        for (std::size_t c = 0; c < dh; ++c)
          z[i * d + h * dh + c] += p[j] * v[c];
      }
    }
}

// Its backward: dv_j += Σ_i p_ij dz_i; dp_ij = dz_i·v_j; ds_ij = p_ij (dp_ij − Σ_j' p_ij' dp_ij');
// dq_i += Σ_j ds_ij k_j / √dh; dk_j += Σ_i ds_ij q_i / √dh.
template <class T>
void attention_backward(const T* qkv, const T* probs, const T* dz, std::size_t n, std::size_t d, std::size_t heads,
                        T* dqkv) {
  const std::size_t dh = d / heads;
  const T scale = T(1) / std::sqrt(T(dh));
  std::fill_n(dqkv, n * 3 * d, T(0));
  std::vector<T> dp(n);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < n; ++i) {
      const T* p = probs + (h * n + i) * n;
      const T* dzi = dz + i * d + h * dh;
      T weighted = 0;  // Σ_j p_ij dp_ij
      for (std::size_t j = 0; j <= i; ++j) {
        const T* v = qkv + j * 3 * d + 2 * d + h * dh;
        T* dv = dqkv + j * 3 * d + 2 * d + h * dh;
        T s = 0;
        for (std::size_t c = 0; c < dh; ++c)
          s += dzi[c] * v[c], dv[c] += p[j] * dzi[c];
        dp[j] = s;
        weighted += p[j] * s;
      }
      const T* q = qkv + i * 3 * d + h * dh;
      T* dq = dqkv + i * 3 * d + h * dh;
      for (std::size_t j = 0; j <= i; ++j) {
        const T ds = p[j] * (dp[j] - weighted) * scale;
        const T* k = qkv + j * 3 * d + d + h * dh;
        T* dk = dqkv + j * 3 * d + d + h * dh;
        for (std::size_t c = 0; c < dh; ++c)
          dq[c] += ds * k[c], dk[c] += ds * q[c];
      }
    }
}

// One sequence: the loss summed over its predictions, and (scaled by `weight`, 1 / the
// batch's predictions) its gradients added into `grads`.
template <class T>
T sequence_loss_and_gradients(const ModelConfig& c, const ModelView<const T*>& w, const std::vector<int>& ids, T weight,
                              const ModelView<T*>& g, bool attention_only) {
  const std::size_t n = ids.size() - 1, d = c.n_embd, heads = c.n_head, inner = c.n_inner, V = c.vocab_size;
  // ---- forward ----
  std::vector<T> x(n * d);  // x_t = wte[ids_t] + wpe[t]
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t k = 0; k < d; ++k)
      x[t * d + k] = w.wte[ids[t] * d + k] + w.wpe[t * d + k];
  std::vector<BlockActivations<T>> acts(c.n_layer);
  std::vector<T> tmp(n * d);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const LayerView<const T*>& p = w.layers[l];
    BlockActivations<T>& a = acts[l];
    a.x_in = x;
    a.ln1.resize(n * d), a.ln1_mean.resize(n), a.ln1_rstd.resize(n);
    layer_norm_forward(x.data(), n, d, p.ln1_w, p.ln1_b, c.layer_norm_epsilon, a.ln1.data(), a.ln1_mean.data(),
                       a.ln1_rstd.data());
    a.qkv.resize(n * 3 * d);
    linear_forward(a.ln1.data(), n, d, p.attn_w, p.attn_b, 3 * d, a.qkv.data());
    a.probs.resize(heads * n * n), a.z.resize(n * d);
    attention_forward(a.qkv.data(), n, d, heads, a.probs.data(), a.z.data());
    linear_forward(a.z.data(), n, d, p.proj_w, p.proj_b, d, tmp.data());
    for (std::size_t k = 0; k < n * d; ++k)
      x[k] += tmp[k];
    a.x_mid = x;
    if (attention_only) continue;
    a.ln2.resize(n * d), a.ln2_mean.resize(n), a.ln2_rstd.resize(n);
    layer_norm_forward(x.data(), n, d, p.ln2_w, p.ln2_b, c.layer_norm_epsilon, a.ln2.data(), a.ln2_mean.data(),
                       a.ln2_rstd.data());
    a.fc.resize(n * inner), a.gelu.resize(n * inner);
    linear_forward(a.ln2.data(), n, d, p.fc_w, p.fc_b, inner, a.fc.data());
    for (std::size_t k = 0; k < n * inner; ++k)
      a.gelu[k] = gelu(a.fc[k]);
    linear_forward(a.gelu.data(), n, inner, p.mlp_w, p.mlp_b, d, tmp.data());
    for (std::size_t k = 0; k < n * d; ++k)
      x[k] += tmp[k];
  }
  std::vector<T> lnf(n * d), lnf_mean(n), lnf_rstd(n), logits(n * V);
  layer_norm_forward(x.data(), n, d, w.lnf_w, w.lnf_b, c.layer_norm_epsilon, lnf.data(), lnf_mean.data(),
                     lnf_rstd.data());
  gemm(false, true, n, V, d, lnf.data(), w.wte, T(0), logits.data());  // logits = LN_f(x) · wteᵀ
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
  gemm(true, false, V, d, n, dlogits.data(), lnf.data(), T(1), g.wte);  // dwte += dlogitsᵀ · LN_f(x)
  std::vector<T> dlnf(n * d), dx(n * d, T(0));
  gemm(false, false, n, d, V, dlogits.data(), w.wte, T(0), dlnf.data());  // dLN_f = dlogits · wte
  layer_norm_backward(x.data(), n, d, w.lnf_w, lnf_mean.data(), lnf_rstd.data(), dlnf.data(), g.lnf_w, g.lnf_b,
                      dx.data());
  std::vector<T> dqkv(n * 3 * d), dz(n * d), dln(n * d), dgelu(n * inner);
  for (std::size_t l = c.n_layer; l-- > 0;) {
    const LayerView<const T*>& p = w.layers[l];
    const LayerView<T*>& q = g.layers[l];
    const BlockActivations<T>& a = acts[l];
    // dx is the gradient at the block's output; the residuals pass it through unchanged.
    if (!attention_only) {  // x_out = x_mid + GELU(LN_2(x_mid)·W_fc + b_fc)·W_mlp + b_mlp
      linear_backward(a.gelu.data(), n, inner, p.mlp_w, d, dx.data(), q.mlp_w, q.mlp_b, dgelu.data());
      for (std::size_t k = 0; k < n * inner; ++k)
        dgelu[k] *= gelu_derivative(a.fc[k]);
      linear_backward(a.ln2.data(), n, d, p.fc_w, inner, dgelu.data(), q.fc_w, q.fc_b, dln.data());
      layer_norm_backward(a.x_mid.data(), n, d, p.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), dln.data(), q.ln2_w,
                          q.ln2_b, dx.data());
    }
    // x_mid = x_in + Attention(LN_1(x_in))·W_proj + b_proj
    linear_backward(a.z.data(), n, d, p.proj_w, d, dx.data(), q.proj_w, q.proj_b, dz.data());
    attention_backward(a.qkv.data(), a.probs.data(), dz.data(), n, d, heads, dqkv.data());
    linear_backward(a.ln1.data(), n, d, p.attn_w, 3 * d, dqkv.data(), q.attn_w, q.attn_b, dln.data());
    layer_norm_backward(a.x_in.data(), n, d, p.ln1_w, a.ln1_mean.data(), a.ln1_rstd.data(), dln.data(), q.ln1_w,
                        q.ln1_b, dx.data());
  }
  for (std::size_t t = 0; t < n; ++t)  // x_t = wte[ids_t] + wpe[t]
    for (std::size_t k = 0; k < d; ++k)
      g.wte[ids[t] * d + k] += dx[t * d + k], g.wpe[t * d + k] += dx[t * d + k];
  return loss;
}

}  // namespace

template <class T>
std::vector<T> flatten(const Model& m) {
  std::vector<T> out;
  out.reserve(parameter_count(m.config));
  const auto put = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
  put(m.wte);
  put(m.wpe);
  for (const Block& b : m.blocks)
    for (const std::vector<float>* v :
         {&b.ln_1_weight, &b.ln_1_bias, &b.attn_weight, &b.attn_bias, &b.attn_proj_weight, &b.attn_proj_bias,
          &b.ln_2_weight, &b.ln_2_bias, &b.mlp_fc_weight, &b.mlp_fc_bias, &b.mlp_proj_weight, &b.mlp_proj_bias})
      put(*v);
  put(m.ln_f_weight);
  put(m.ln_f_bias);
  return out;
}
template std::vector<float> flatten<float>(const Model&);
template std::vector<double> flatten<double>(const Model&);

Model unflatten(const ModelConfig& c, std::span<const float> parameters) {
  Model m;
  m.config = c;
  const std::vector<ParameterTensor> tensors = parameter_tensors(c);
  std::size_t k = 0;
  const auto take = [&] {
    const ParameterTensor& t = tensors[k++];
    return std::vector<float>(parameters.begin() + static_cast<std::ptrdiff_t>(t.offset),
                              parameters.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
  };
  m.wte = take();
  m.wpe = take();
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    Block b;
    for (std::vector<float>* v :
         {&b.ln_1_weight, &b.ln_1_bias, &b.attn_weight, &b.attn_bias, &b.attn_proj_weight, &b.attn_proj_bias,
          &b.ln_2_weight, &b.ln_2_bias, &b.mlp_fc_weight, &b.mlp_fc_bias, &b.mlp_proj_weight, &b.mlp_proj_bias})
      *v = take();
    m.blocks.push_back(std::move(b));
  }
  m.ln_f_weight = take();
  m.ln_f_bias = take();
  return m;
}

namespace {

// The widest linear layer of a block: the MLP's, unless there are no MLPs.
std::size_t block_width(const ModelConfig& c, const TrainingOptions& options) {
  return options.attention_only ? c.n_embd : c.n_inner;
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
  const std::size_t largest_product =
      longest * c.n_embd * std::max({3 * c.n_embd, block_width(c, options), c.vocab_size});
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

double gpt2_training_flops(const ModelConfig& c, std::size_t n, bool attention_only) {
  double forward = forward_flops(c, n);
  if (attention_only)
    forward -=
        static_cast<double>(c.n_layer) * 2 * static_cast<double>(n) * 2 * static_cast<double>(c.n_embd * c.n_inner);
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
