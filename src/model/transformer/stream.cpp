// The residual stream taken apart (attnlab/model/stream.hpp).
#include "attnlab/model/stream.hpp"

#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "transformer/transformer.hpp"

namespace attnlab {

using namespace transformer;

const char* part_kind_name(PartKind kind) {
  switch (kind) {
    case PartKind::embedding: return "embedding";
    case PartKind::position: return "position";
    case PartKind::head: return "head";
    case PartKind::attention_bias: return "attention_bias";
    default: return "mlp";
  }
}

namespace {

void check_kept(const Model& model, const ForwardResult& result, std::size_t position) {
  if (result.stream.size() != model.config.n_layer || result.attention.size() != model.config.n_layer)
    fail("stream", "the forward did not keep the residual stream; run it with keep_stream");
  if (position >= result.n)
    fail("position",
         fmt::format("{} is past the last token ({} tokens, positions 0 to {})", position, result.n, result.n - 1));
}

// What the sandwich norm multiplies the attention's output by at `position`: γ_post · rstd; empty without one.
std::vector<float> sandwich_scale(const Model& model, const LayerStream& s, std::size_t layer, std::size_t position) {
  const ModelConfig& c = model.config;
  if (!c.sandwich_norms) return {};
  std::vector<float> scale = model.blocks[layer].post_attn_norm_weight.to_f32();
  for (float& g : scale)
    g = (c.norm_plus_one ? 1 + g : g) * s.attention_rstd[position];
  return scale;
}

// Σ_c in[c] · W_O[first + c] (rows of d), into out [d], then scaled where the sandwich norm scales.
void through_w_o(const Model& model, std::size_t layer, const float* in, std::size_t first, std::size_t count,
                 const std::vector<float>& scale, float* out) {
  const std::size_t d = model.config.n_embd;
  std::vector<float> row(d);
  std::fill_n(out, d, 0.0f);
  for (std::size_t c = 0; c < count; ++c) {
    model.blocks[layer].attn_proj_weight.row(first + c, d, row.data());
    for (std::size_t k = 0; k < d; ++k)
      out[k] += in[c] * row[k];
  }
  if (!scale.empty())
    for (std::size_t k = 0; k < d; ++k)
      out[k] *= scale[k];
}

}  // namespace

std::vector<StreamPart> stream_parts(const Model& model, std::span<const int> ids, const ForwardResult& result,
                                     std::size_t position) {
  const ModelConfig& c = model.config;
  check_kept(model, result, position);
  const std::size_t d = c.n_embd, hd = c.head_dim(), Z = c.attention_width(), p = position;
  std::vector<StreamPart> parts;
  StreamPart& embedding =
      parts.emplace_back(StreamPart{PartKind::embedding, kNotInABlock, kNotInABlock, std::vector<float>(d)});
  model.wte.row(static_cast<std::size_t>(ids[p]), d, embedding.vector.data());
  for (float& x : embedding.vector)
    x *= static_cast<float>(c.embedding_scale);
  if (!c.rotary) {
    StreamPart& learned =
        parts.emplace_back(StreamPart{PartKind::position, kNotInABlock, kNotInABlock, std::vector<float>(d)});
    model.wpe.row(p, d, learned.vector.data());
  }
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const LayerStream& s = result.stream[l];
    const std::vector<float> scale = sandwich_scale(model, s, l, p);
    for (std::size_t h = 0; h < c.n_head; ++h) {
      StreamPart& head = parts.emplace_back(StreamPart{PartKind::head, l, h, std::vector<float>(d)});
      through_w_o(model, l, s.z.data() + p * Z + h * hd, h * hd, hd, scale, head.vector.data());
    }
    if (!model.blocks[l].attn_proj_bias.empty()) {
      StreamPart& bias = parts.emplace_back(
          StreamPart{PartKind::attention_bias, l, kNotInABlock, model.blocks[l].attn_proj_bias.to_f32()});
      if (!scale.empty())
        for (std::size_t k = 0; k < d; ++k)
          bias.vector[k] *= scale[k];
    }
    parts.push_back(StreamPart{PartKind::mlp,
                               l,
                               kNotInABlock,
                               {s.mlp.begin() + std::ptrdiff_t(p * d), s.mlp.begin() + std::ptrdiff_t((p + 1) * d)}});
  }
  return parts;
}

std::vector<float> head_output(const Model& model, const ForwardResult& result, HeadRef head) {
  const ModelConfig& c = model.config;
  check_kept(model, result, 0);
  check_head(c, head, "head");
  const std::size_t n = result.n, d = c.n_embd, hd = c.head_dim(), Z = c.attention_width();
  const LayerStream& s = result.stream[head.layer];
  std::vector<float> out(n * d);
  for (std::size_t p = 0; p < n; ++p)
    through_w_o(model, head.layer, s.z.data() + p * Z + head.head * hd, head.head * hd, hd,
                sandwich_scale(model, s, head.layer, p), out.data() + p * d);
  return out;
}

std::vector<float> head_source_parts(const Model& model, const ForwardResult& result, HeadRef head,
                                     std::size_t position) {
  const ModelConfig& c = model.config;
  check_kept(model, result, position);
  check_head(c, head, "head");
  const std::size_t n = result.n, d = c.n_embd, hd = c.head_dim(), p = position;
  const Heads at = heads_of(c, head.layer);
  const LayerStream& s = result.stream[head.layer];
  const float* weights = result.attention[head.layer].data() + (head.head * n + p) * n;  // a_h[p, ·]
  const std::vector<float> scale = sandwich_scale(model, s, head.layer, p);
  // The head's rows of W_O, widened once [hd × d], and a_h[p, j] · v_h[j] for every source [(p + 1) × hd]:
  // their product is every source's part at once.
  std::vector<float> w_o(hd * d), weighted((p + 1) * hd, 0.0f), out(n * d, 0.0f);
  for (std::size_t k = 0; k < hd; ++k)
    model.blocks[head.layer].attn_proj_weight.row(head.head * hd + k, d, w_o.data() + k * d);
  for (std::size_t j = 0; j <= p; ++j) {
    const float* v = s.qkv.data() + j * at.width + at.v(at.kv_of(head.head));
    for (std::size_t k = 0; k < hd; ++k)
      weighted[j * hd + k] = weights[j] * v[k];
  }
  gemm(false, false, p + 1, d, hd, weighted.data(), w_o.data(), 0.0f, out.data());
  if (!scale.empty())
    for (std::size_t j = 0; j <= p; ++j)
      for (std::size_t k = 0; k < d; ++k)
        out[j * d + k] *= scale[k];
  return out;
}

LogitDirection logit_direction(const Model& model, std::span<const float> x, int target, int contrast) {
  const ModelConfig& c = model.config;
  const std::size_t d = c.n_embd;
  check_token_id(c, target, "target");
  if (contrast >= 0) check_token_id(c, contrast, "contrast");
  // u = u_t − u_c, the unembedding's rows.
  const Tensor& U = c.tied ? model.wte : model.lm_head;
  std::vector<float> row(d);
  std::vector<double> u(d);
  U.row(static_cast<std::size_t>(target), d, row.data());
  for (std::size_t k = 0; k < d; ++k)
    u[k] = row[k];
  if (contrast >= 0) {
    U.row(static_cast<std::size_t>(contrast), d, row.data());
    for (std::size_t k = 0; k < d; ++k)
      u[k] -= row[k];
  }
  // The final norm's statistics at x, as the forward computes them.
  NormStats<float> stats;
  std::vector<float> normed(d);
  norm_forward(block_norm(c), x.data(), 1, values(model.ln_f_weight), values(model.ln_f_bias), normed.data(), stats);
  const std::vector<float> gamma = model.ln_f_weight.to_f32();
  LogitDirection out;
  out.r.resize(d);
  double mean = 0;
  for (std::size_t k = 0; k < d; ++k)
    mean += (out.r[k] = (c.norm_plus_one ? 1.0 + gamma[k] : double(gamma[k])) * u[k]);
  mean /= double(d);
  for (double& r : out.r)
    r = double(stats.rstd[0]) * (c.norm == NormKind::layer_norm ? r - mean : r);
  if (!model.ln_f_bias.empty()) {
    const std::vector<float> beta = model.ln_f_bias.to_f32();
    for (std::size_t k = 0; k < d; ++k)
      out.bias += beta[k] * u[k];
  }
  return out;
}

}  // namespace attnlab
