// A head's score taken apart (attnlab/analysis/qk.hpp).
#include "attnlab/analysis/qk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnlab/core/attention.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/matrix.hpp"  // dot
#include "attnlab/model/stream.hpp"

namespace attnlab {

namespace {

// A part's name as the decomposition lists it; the earlier layers' output biases are "bias".
std::string side_name(const StreamPart& part) {
  switch (part.kind) {
    case PartKind::embedding: return "embedding";
    case PartKind::position: return "positions";
    case PartKind::head: return to_string(HeadRef{part.layer, part.head});
    case PartKind::attention_bias: return "bias";
    default: return fmt::format("mlp {}", part.layer);
  }
}

// One side of the score (the query's or the key's): each part of the stream at `position`
// below layer `layer`, normed, projected, QK-normed and rotated alone, and the same unrotated.
struct Side {
  std::vector<std::string> names;
  std::vector<std::vector<double>> rotated, unrotated;  // [parts][d_k]
};

Side side_at(const Model& model, std::span<const int> ids, const ForwardResult& run, std::size_t layer,
             std::size_t position, const AttentionInput& input, bool query) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd, dk = c.head_dim();
  const HeadWeights& w = input.heads.front();
  const Matrix& projection = query ? w.w_q : w.w_k;
  const std::vector<double>& projection_bias = query ? w.b_q : w.b_k;
  const std::vector<double>& qk_gamma = query ? w.q_norm : w.k_norm;

  // The stream's parts below the layer, the output biases summed into one "bias" part (last).
  Side side;
  std::vector<std::vector<double>> x;  // [parts][d]
  std::vector<double> bias(d, 0.0);
  for (const StreamPart& part : stream_parts(model, ids, run, position)) {
    if (part.layer != kNotInABlock && part.layer >= layer) continue;
    if (part.kind == PartKind::attention_bias) {
      for (std::size_t k = 0; k < d; ++k)
        bias[k] += part.vector[k];
      continue;
    }
    side.names.push_back(side_name(part));
    x.emplace_back(part.vector.begin(), part.vector.end());
  }
  side.names.push_back("bias");
  x.push_back(bias);

  // The input norm with its scale frozen at the whole stream's.
  std::vector<double> total(d, 0.0);
  for (const std::vector<double>& part : x)
    for (std::size_t k = 0; k < d; ++k)
      total[k] += part[k];
  const Block& block = model.blocks[layer];
  const std::vector<float> gamma = block.ln_1_weight.to_f32();
  const bool layer_norm = c.norm == NormKind::layer_norm;
  double mean = 0, square = 0;
  for (double v : total)
    mean += v / double(d);
  for (double v : total)
    square += (layer_norm ? (v - mean) * (v - mean) : v * v) / double(d);
  const double rstd = 1.0 / std::sqrt(square + c.layer_norm_epsilon);
  const double one = c.norm_plus_one ? 1.0 : 0.0;
  for (std::vector<double>& part : x) {
    double part_mean = 0;
    if (layer_norm)
      for (double v : part)
        part_mean += v / double(d);
    for (std::size_t k = 0; k < d; ++k)
      part[k] = (part[k] - part_mean) * rstd * (one + gamma[k]);
  }
  if (layer_norm) {
    const std::vector<float> beta = block.ln_1_bias.to_f32();
    for (std::size_t k = 0; k < d; ++k)
      x.back()[k] += beta[k];
  }

  // Projected: q_a = N(x_a) · W_Q, the bias part + b_Q.
  std::vector<std::vector<double>> projected(x.size(), std::vector<double>(dk, 0.0));
  for (std::size_t a = 0; a < x.size(); ++a)
    for (std::size_t k = 0; k < d; ++k)
      if (x[a][k] != 0)
        for (std::size_t t = 0; t < dk; ++t)
          projected[a][t] += x[a][k] * projection(k, t);
  for (std::size_t t = 0; t < projection_bias.size(); ++t)
    projected.back()[t] += projection_bias[t];

  // QK-norm with its scale frozen at the whole q (or k).
  if (!qk_gamma.empty()) {
    double q_square = 0;
    for (std::size_t t = 0; t < dk; ++t) {
      double sum = 0;
      for (const std::vector<double>& part : projected)
        sum += part[t];
      q_square += sum * sum / double(dk);
    }
    const double q_rstd = 1.0 / std::sqrt(q_square + w.norm_epsilon);
    for (std::vector<double>& part : projected)
      for (std::size_t t = 0; t < dk; ++t)
        part[t] *= q_rstd * qk_gamma[t];
  }
  side.unrotated = projected;
  if (input.rope)
    for (std::vector<double>& part : projected)
      rotate_rope_row(part, position, *input.rope);
  side.rotated = std::move(projected);
  return side;
}

// Every (query side, key side) pair's part of the score, scaled, the largest first, and the
// marginals of each side.
void add_pairs(const Side& q, const Side& k, double scale, QkDecomposition& out) {
  for (const std::string& name : q.names)
    out.query_sides.push_back({name, 0.0});
  for (const std::string& name : k.names)
    out.key_sides.push_back({name, 0.0});
  for (std::size_t a = 0; a < q.names.size(); ++a)
    for (std::size_t b = 0; b < k.names.size(); ++b) {
      const double x = dot(q.rotated[a], k.rotated[b]) * scale;
      out.pairs.push_back({q.names[a], k.names[b], x, dot(q.unrotated[a], k.unrotated[b]) * scale});
      out.query_sides[a].score += x;
      out.key_sides[b].score += x;
    }
  std::stable_sort(out.pairs.begin(), out.pairs.end(),
                   [](const QkPair& x, const QkPair& y) { return std::abs(x.score) > std::abs(y.score); });
}

// The model's own q_i (or k_j) from the normed input it kept: projected, QK-normed, rotated.
std::vector<double> own_vector(const ForwardResult& run, std::size_t layer, std::size_t position,
                               const AttentionInput& input, bool query) {
  const HeadWeights& w = input.heads.front();
  const Matrix& projection = query ? w.w_q : w.w_k;
  const std::vector<double>& bias = query ? w.b_q : w.b_k;
  const std::vector<double>& gamma = query ? w.q_norm : w.k_norm;
  const std::size_t d = projection.rows, dk = projection.cols;
  const float* x = run.block_inputs[layer].data() + position * d;
  std::vector<double> out(dk, 0.0);
  for (std::size_t t = 0; t < dk; ++t) {
    for (std::size_t k = 0; k < d; ++k)
      out[t] += double(x[k]) * projection(k, t);
    if (!bias.empty()) out[t] += bias[t];
  }
  if (!gamma.empty()) {
    double square = 0;
    for (double v : out)
      square += v * v / double(dk);
    const double rstd = 1.0 / std::sqrt(square + w.norm_epsilon);
    for (std::size_t t = 0; t < dk; ++t)
      out[t] *= rstd * gamma[t];
  }
  if (input.rope) rotate_rope_row(out, position, *input.rope);
  return out;
}

}  // namespace

QkDecomposition qk_decomposition(const Model& model, std::span<const int> ids, const ForwardResult& run, HeadRef head,
                                 std::size_t query, std::size_t key) {
  const ModelConfig& c = model.config;
  check_head(c, head, "head");
  const std::size_t n = run.n;
  if (query >= n) fail("query", fmt::format("{} is past the last token (positions 0 to {})", query, n - 1));
  if (key > query)
    fail("key", fmt::format("{} is after the query {}: a causal head's query sees keys 0 to {}", key, query, query));
  if (const std::size_t window = c.window(head.layer); window && query - key >= window)
    fail("key", fmt::format("{} is outside head {}'s sliding window of {} keys (keys {} to {} for query {})", key,
                            to_string(head), window, query + 1 - window, query, query));

  const AttentionInput input = head_attention_input(model, run, head);
  const double scale = input.score_scale != 0 ? input.score_scale : 1.0 / std::sqrt(double(c.head_dim()));
  const Side q = side_at(model, ids, run, head.layer, query, input, true);
  const Side k = side_at(model, ids, run, head.layer, key, input, false);

  QkDecomposition out;
  out.head = head;
  out.query = query;
  out.key = key;
  out.rotary = input.rope.has_value();
  out.score =
      dot(own_vector(run, head.layer, query, input, true), own_vector(run, head.layer, key, input, false)) * scale;
  out.weight = run.attention[head.layer][(head.head * n + query) * n + key];
  add_pairs(q, k, scale, out);
  return out;
}

QkDecomposition scenario_qk(const Scenario& s, std::size_t head, std::size_t query, std::size_t key) {
  if (head >= s.heads.size())
    fail("head", fmt::format("{} does not exist; {} has heads 0 to {}", head, s.name, s.heads.size() - 1));
  if (query >= s.n()) fail("query", fmt::format("{} is past the last token (positions 0 to {})", query, s.n() - 1));
  if (key >= s.m()) fail("key", fmt::format("{} is past the last key (positions 0 to {})", key, s.m() - 1));
  const AttentionInput input = attention_input(s);
  const HeadWeights& w = input.heads[head];
  const std::size_t dk = w.w_q.cols;
  // One side: the token part and the position part of row `position`, each projected, the
  // bias part, QK-norm frozen at the whole vector, each rotated alone (a rotary scenario).
  const auto side = [&](const Matrix& embeddings, std::size_t position, bool is_query) {
    const Matrix& projection = is_query ? w.w_q : w.w_k;
    const std::vector<double>& bias = is_query ? w.b_q : w.b_k;
    const std::vector<double>& gamma = is_query ? w.q_norm : w.k_norm;
    const Matrix all = apply_positions(embeddings, s.positions),
                 positions = apply_positions(Matrix(embeddings.rows, embeddings.cols), s.positions);
    Side out;
    const auto add = [&](std::string name, const auto& row_value) {
      std::vector<double> v(dk, 0.0);
      for (std::size_t k = 0; k < projection.rows; ++k)
        for (std::size_t t = 0; t < dk; ++t)
          v[t] += row_value(k) * projection(k, t);
      out.names.push_back(std::move(name));
      out.unrotated.push_back(std::move(v));
    };
    add("embedding", [&](std::size_t k) { return all(position, k) - positions(position, k); });
    add("positions", [&](std::size_t k) { return positions(position, k); });
    out.names.push_back("bias");
    out.unrotated.push_back(bias.empty() ? std::vector<double>(dk, 0.0) : bias);
    if (!gamma.empty()) {
      std::vector<double> whole(dk, 0.0);
      for (const std::vector<double>& v : out.unrotated)
        for (std::size_t t = 0; t < dk; ++t)
          whole[t] += v[t];
      const double rstd = 1.0 / std::sqrt(dot(whole, whole) / double(dk) + w.norm_epsilon);
      for (std::vector<double>& v : out.unrotated)
        for (std::size_t t = 0; t < dk; ++t)
          v[t] *= rstd * gamma[t];
    }
    out.rotated = out.unrotated;
    if (input.rope)
      for (std::vector<double>& v : out.rotated)
        rotate_rope_row(v, position, *input.rope);
    return out;
  };
  const Side q = side(s.embeddings, query, true), k = side(s.source ? s.source->embeddings : s.embeddings, key, false);
  const HeadTrace trace = attend_head(input, w);
  const double scale = input.score_scale != 0 ? input.score_scale : 1.0 / std::sqrt(double(dk));
  QkDecomposition out;
  out.head = {0, head};
  out.query = query;
  out.key = key;
  out.rotary = input.rope.has_value();
  out.score = trace.scaled(query, key);
  out.weight = trace.weights(query, key);
  add_pairs(q, k, scale, out);
  return out;
}

}  // namespace attnlab
