// The loss and its gradient for every family the model layer runs, and AdamW
// (attnlab/model/training.hpp). The blocks run the one block forward the inference forward
// runs (transformer.hpp, where each step's backward and the block's sit beside their
// forwards); here are the embedding, the LM head and the cross-entropy around them.
#include "attnlab/model/training.hpp"

#include "attnlab/model/forward.hpp"

#include <cblas.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/model/blas.hpp"
#include "attnlab/model/threads.hpp"
#include "transformer/transformer.hpp"

namespace attnlab {

std::size_t parameter_count(const ModelConfig& c) { return c.parameters(); }

namespace {

using namespace transformer;

// The model's tensors as pointers into a flat vector (P is const T* or T*), with a Model's
// field names so that tensor_of (the parameter table) fills them; a tensor the family does
// not have stays null.
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

// One sequence: the loss summed over its predictions, and (scaled by `weight`, 1 / the
// batch's predictions) its gradients added into `grads`.
template <class T>
T sequence_loss_and_gradients(const ModelConfig& c, const ModelView<const T*>& w, const std::vector<int>& ids, T weight,
                              const ModelView<T*>& g, bool attention_only) {
  const std::size_t n = ids.size() - 1, d = c.n_embd, V = c.vocab_size;
  const NormShape norm = block_norm(c);
  const T embedding_scale = T(c.embedding_scale);
  // ---- forward ----
  std::vector<T> x(n * d);  // x_t = wte[ids_t] · scale (+ wpe[t] for learned positions)
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t k = 0; k < d; ++k)
      x[t * d + k] = w.wte[ids[t] * d + k] * embedding_scale + (w.wpe ? w.wpe[t * d + k] : T(0));
  std::vector<BlockActivations<T>> acts(c.n_layer);
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    BlockActivations<T>& a = acts[l];
    if (l > 0) a.y = std::move(acts[l - 1].y);  // one scratch row block for all the layers, not one each
    const Heads at = heads_of(c, l);
    const HeadsStep<T> kept_heads = [&](const T* qkv, T* z) {  // every head's softmax kept for the backward
      a.probs.resize(at.H * n * n);
      attention_forward(at, qkv, n, a.probs.data(), z);
    };
    block_forward(c, l, w.blocks[l], n, 0, x, a, kept_heads, attention_only);
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
  for (std::size_t l = c.n_layer; l-- > 0;)
    block_backward(c, l, w.blocks[l], g.blocks[l], acts[l], n, dx, attention_only);
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
      check_token_id(c, id, "batch");
    predictions += ids.size() - 1;
  }
  std::fill(gradients.begin(), gradients.end(), T(0));
  const ModelView<const T*> w = view(c, parameters.data());
  // The batch is split over this thread's budget (attnlab/model/threads.hpp), each helper's
  // sequences on a budget of one thread (their products and activations made where they
  // are asked for); a batch of one sequence, or one thread, keeps the whole budget instead.
  const std::size_t threads =
      std::clamp<std::size_t>(options.threads ? options.threads : std::size_t(budget_threads()), 1, batch.size());
  // Thread k takes sequences [k·B/threads, (k+1)·B/threads): thread 0 into `gradients`, the
  // others into buffers of their own, added to it afterwards in thread order.
  std::vector<std::vector<T>> partial(threads - 1, std::vector<T>(gradients.size(), T(0)));
  std::vector<T> totals(threads, T(0));
  std::vector<std::exception_ptr> errors(threads);
  const auto work = [&](std::size_t k) {
    std::optional<ThreadBudget> mine;  // the worker's products and activations on its own thread
    if (threads > 1) mine.emplace(1);
    const Bf16Products bf16(options.bf16);
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
