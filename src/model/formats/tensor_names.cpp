// The one table of tensor names (attnlab/model/tensor_names.hpp).
#include "attnlab/model/tensor_names.hpp"

#include <fmt/format.h>

#include "attnlab/core/error.hpp"

namespace attnlab {

const std::vector<TensorNames>& tensor_names() {
  using S = TensorSlot;
  // clang-format off
  static const std::vector<TensorNames> table = {
    // slot                     attnlab (GPT-2)                Hugging Face (Llama-style)                         ... four norms                                       GGUF                                GGUF, GPT-2
    {S::wte,                    "wte.weight",                  "model.embed_tokens.weight",                       "",                                                  "token_embd.weight",                ""},
    {S::wpe,                    "wpe.weight",                  "",                                                "",                                                  "position_embd.weight",             ""},
    {S::ln_1_weight,            "h.#.ln_1.weight",             "model.layers.#.input_layernorm.weight",           "",                                                  "blk.#.attn_norm.weight",           ""},
    {S::ln_1_bias,              "h.#.ln_1.bias",               "",                                                "",                                                  "blk.#.attn_norm.bias",             ""},
    {S::attn_weight,            "h.#.attn.c_attn.weight",      "model.layers.#.self_attn.{q,k,v}_proj.weight",    "",                                                  "blk.#.attn_{q,k,v}.weight",        "blk.#.attn_qkv.weight"},
    {S::attn_bias,              "h.#.attn.c_attn.bias",        "model.layers.#.self_attn.{q,k,v}_proj.bias",      "",                                                  "blk.#.attn_{q,k,v}.bias",          "blk.#.attn_qkv.bias"},
    {S::q_norm_weight,          "h.#.attn.q_norm.weight",      "model.layers.#.self_attn.q_norm.weight",          "",                                                  "blk.#.attn_q_norm.weight",         ""},
    {S::k_norm_weight,          "h.#.attn.k_norm.weight",      "model.layers.#.self_attn.k_norm.weight",          "",                                                  "blk.#.attn_k_norm.weight",         ""},
    {S::attn_proj_weight,       "h.#.attn.c_proj.weight",      "model.layers.#.self_attn.o_proj.weight",          "",                                                  "blk.#.attn_output.weight",         ""},
    {S::attn_proj_bias,         "h.#.attn.c_proj.bias",        "model.layers.#.self_attn.o_proj.bias",            "",                                                  "blk.#.attn_output.bias",           ""},
    {S::post_attn_norm_weight,  "h.#.post_attn_norm.weight",   "model.layers.#.post_attention_layernorm.weight",  "",                                                  "blk.#.post_attention_norm.weight", ""},
    {S::ln_2_weight,            "h.#.ln_2.weight",             "model.layers.#.post_attention_layernorm.weight",  "model.layers.#.pre_feedforward_layernorm.weight",   "blk.#.ffn_norm.weight",            ""},
    {S::ln_2_bias,              "h.#.ln_2.bias",               "",                                                "",                                                  "blk.#.ffn_norm.bias",              ""},
    {S::mlp_fc_weight,          "h.#.mlp.c_fc.weight",         "model.layers.#.mlp.{gate,up}_proj.weight",        "",                                                  "blk.#.ffn_{gate,up}.weight",       "blk.#.ffn_up.weight"},
    {S::mlp_fc_bias,            "h.#.mlp.c_fc.bias",           "model.layers.#.mlp.{gate,up}_proj.bias",          "",                                                  "blk.#.ffn_{gate,up}.bias",         "blk.#.ffn_up.bias"},
    {S::mlp_proj_weight,        "h.#.mlp.c_proj.weight",       "model.layers.#.mlp.down_proj.weight",             "",                                                  "blk.#.ffn_down.weight",            ""},
    {S::mlp_proj_bias,          "h.#.mlp.c_proj.bias",         "model.layers.#.mlp.down_proj.bias",               "",                                                  "blk.#.ffn_down.bias",              ""},
    {S::post_mlp_norm_weight,   "h.#.post_mlp_norm.weight",    "model.layers.#.post_feedforward_layernorm.weight", "",                                                 "blk.#.post_ffw_norm.weight",       ""},
    {S::ln_f_weight,            "ln_f.weight",                 "model.norm.weight",                               "",                                                  "output_norm.weight",               ""},
    {S::ln_f_bias,              "ln_f.bias",                   "",                                                "",                                                  "output_norm.bias",                 ""},
    {S::lm_head,                "lm_head.weight",              "lm_head.weight",                                  "",                                                  "output.weight",                    ""},
  };
  // clang-format on
  return table;
}

const TensorNames& tensor_names(TensorSlot slot) {
  for (const TensorNames& row : tensor_names())
    if (row.slot == slot) return row;
  throw std::logic_error("a TensorSlot without a row in tensor_names()");
}

bool stored_as_rows(TensorSlot slot) {
  return slot == TensorSlot::wte || slot == TensorSlot::wpe || slot == TensorSlot::lm_head;
}

namespace {

// `pattern` with `#` as `layer` and its braces expanded: "a.{q,k}.w" -> "a.q.w", "a.k.w".
std::vector<std::string> expand(std::string_view pattern, std::size_t layer) {
  std::string named;
  for (char ch : pattern)
    named += ch == '#' ? std::to_string(layer) : std::string(1, ch);
  const std::size_t open = named.find('{'), close = named.find('}');
  if (open == std::string::npos) return {named};
  std::vector<std::string> out;
  const std::string head = named.substr(0, open), tail = named.substr(close + 1);
  for (std::size_t from = open + 1;;) {
    const std::size_t comma = std::min(named.find(',', from), close);
    out.push_back(head + named.substr(from, comma - from) + tail);
    if (comma == close) return out;
    from = comma + 1;
  }
}

}  // namespace

std::vector<StoredTensor> stored_tensors(const ParameterTensor& t, const ModelConfig& c, WeightFormat format) {
  const TensorNames& row = tensor_names(t.slot);
  const bool gpt2 = c.family == Family::gpt2;
  std::string_view pattern;
  if (format == WeightFormat::kHuggingFace)
    pattern = gpt2 ? row.attnlab : c.sandwich_norms && !row.hf_sandwich.empty() ? row.hf_sandwich : row.hf;
  else
    pattern = gpt2 && !row.gguf_gpt2.empty() ? row.gguf_gpt2 : row.gguf;
  if (pattern.empty())
    fail(std::string(row.attnlab), fmt::format("a {} model's tensor has no name in {} files", family_name(c.family),
                                               format == WeightFormat::kGguf ? "GGUF" : "Hugging Face's"));
  const std::vector<std::string> names = expand(pattern, t.layer);
  // The parts' widths: q | k | v (H·hd, H_kv·hd, H_kv·hd), or gate | up halves.
  const std::size_t whole = t.shape.back(), hd = c.head_dim();
  std::vector<std::size_t> widths(names.size(), whole / names.size());
  if (names.size() == 3) widths = {c.n_head * hd, c.kv_heads() * hd, c.kv_heads() * hd};
  std::vector<StoredTensor> out;
  std::size_t first = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool rotary = t.slot == TensorSlot::attn_weight && names.size() == 3 && i < 2;
    out.push_back({names[i], widths[i], first, rotary ? widths[i] / hd : 0});
    first += widths[i];
  }
  return out;
}

}  // namespace attnlab
