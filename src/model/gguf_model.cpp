// A model from a GGUF file (attnlab/model/model.hpp's load_model on FILE.gguf): the
// architectures `llama` (Llama 2 and 3, SmolLM2, TinyLlama, Mistral as llama.cpp writes
// them), `qwen2`, `qwen3`, `gemma3` and `gpt2`, mapped onto the one transformer. The metadata becomes the config
// Hugging Face's config.json would give, checked by the same reader; the tensors are viewed
// where they lie, quantized as they are:
//
//   token_embd.weight            [ne0 = d, ne1 = V]       the embedding, rows of d
//   blk.N.attn_norm.weight       [d]
//   blk.N.attn_{q,k,v}.weight    [d, H·hd | H_kv·hd]      nn.Linear's [out, in], rows of d (+ .bias: Qwen2)
//   blk.N.attn_{q,k}_norm.weight [hd]                     Qwen3
//   blk.N.attn_output.weight     [H·hd, d]
//   blk.N.ffn_norm.weight        [d]
//   blk.N.ffn_{gate,up}.weight   [d, I];  blk.N.ffn_down.weight [I, d]
//   output_norm.weight [d];  output.weight [d, V] (absent: tied);  rope_freqs.weight [rot/2] (Llama 3)
//
// llama.cpp's converter reorders the rows of a `llama` model's q and k so that each head's
// rotary pairs are adjacent (x_2i, x_2i+1); attnlab pairs split halves (x_i, x_{i+hd/2}) as
// transformers does, so those rows are put back (a copy of q's and k's rows, in their own
// type). Qwen's files keep split halves. A head scores the same from either file.
#include <fmt/format.h>

#include <deque>
#include <memory>

#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/gguf.hpp"
#include "attnlab/model/model.hpp"
#include "config_json.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// What attnlab reads of each architecture: the family it is, and whether llama.cpp's
// converter put each head's rotary pairs side by side in q's and k's rows (see the top).
struct Architecture {
  std::string_view name;
  Family family;
  bool adjacent_rotary_pairs;
};
constexpr Architecture kArchitectures[] = {
    {"gpt2", Family::gpt2, false},   {"llama", Family::llama, true},    {"qwen2", Family::qwen2, false},
    {"qwen3", Family::qwen3, false}, {"gemma3", Family::gemma3, false},
};

// The file, and the rows of q and k put back in transformers' order, kept while a model views them.
struct MappedGguf {
  explicit MappedGguf(const std::string& path) : file(path) {}
  GgufFile file;
  std::deque<std::vector<std::byte>> reordered;
};

// `{arch}.NAME` of the metadata, refused by name when the file lacks it.
const json& need(const GgufFile& f, std::string_view arch, std::string_view name) {
  const std::string key = fmt::format("{}.{}", arch, name);
  if (!f.metadata().contains(key))
    fail(f.path(), fmt::format("metadata \"{}\" is missing (a {} file has it)", key, arch));
  return f.metadata()[key];
}

// The vocabulary: token_embd's rows.
std::uint64_t vocabulary_of(const GgufFile& f) {
  const GgufTensor* embedding = f.find("token_embd.weight");
  if (!embedding || embedding->dims.size() != 2)
    fail(f.path(), "tensor \"token_embd.weight\" [d, vocabulary] is missing");
  return embedding->dims[1];
}

// The config.json key a metadata value was read into, and the metadata's name: an error the
// config reader raises about "num_hidden_layers" names "llama.block_count" too.
constexpr std::pair<std::string_view, std::string_view> kConfigKeys[] = {
    {"n_layer", "block_count"},
    {"num_hidden_layers", "block_count"},
    {"n_head", "attention.head_count"},
    {"num_attention_heads", "attention.head_count"},
    {"num_key_value_heads", "attention.head_count_kv"},
    {"n_embd", "embedding_length"},
    {"hidden_size", "embedding_length"},
    {"n_inner", "feed_forward_length"},
    {"intermediate_size", "feed_forward_length"},
    {"n_positions", "context_length"},
    {"max_position_embeddings", "context_length"},
    {"layer_norm_epsilon", "attention.layer_norm_epsilon"},
    {"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
    {"rope_theta", "rope.freq_base"},
    {"head_dim", "attention.key_length"},
    {"sliding_window", "attention.sliding_window"},
    {"sliding_window_pattern", "attention.sliding_window_pattern"},
};
InputError with_metadata_key(const InputError& e, std::string_view arch) {
  for (const auto& [config_key, name] : kConfigKeys)
    if (e.message().find(fmt::format("\"{}\"", config_key)) != std::string::npos)
      return InputError(e.field(), fmt::format("{} (read from the metadata's \"{}.{}\")", e.message(), arch, name));
  return e;
}

// GPT-2's config.json from the metadata.
json gpt2_config_of(const GgufFile& f) {
  const auto get = [&](const char* name) -> const json& { return need(f, "gpt2", name); };
  return {{"model_type", "gpt2"},
          {"n_layer", get("block_count")},
          {"n_head", get("attention.head_count")},
          {"n_embd", get("embedding_length")},
          {"n_inner", get("feed_forward_length")},
          {"n_positions", get("context_length")},
          {"layer_norm_epsilon", get("attention.layer_norm_epsilon")},
          {"vocab_size", vocabulary_of(f)}};
}

// config.json's keys from the metadata (`{arch}.block_count` is num_hidden_layers, ...).
json hf_config_of(const GgufFile& f, const Architecture& architecture) {
  const std::string arch(architecture.name);
  const json& m = f.metadata();
  const auto key = [&](const char* name) { return arch + "." + name; };
  const auto get = [&](const char* name) -> const json& { return need(f, arch, name); };
  json c = {{"model_type", family_name(architecture.family)},
            {"num_hidden_layers", get("block_count")},
            {"hidden_size", get("embedding_length")},
            {"intermediate_size", get("feed_forward_length")},
            {"num_attention_heads", get("attention.head_count")},
            {"max_position_embeddings", get("context_length")},
            {"rms_norm_eps", get("attention.layer_norm_rms_epsilon")},
            {"hidden_act", "silu"}};
  c["num_key_value_heads"] =
      m.contains(key("attention.head_count_kv")) ? m[key("attention.head_count_kv")] : c["num_attention_heads"];
  if (m.contains(key("rope.freq_base"))) c["rope_theta"] = m[key("rope.freq_base")];
  if (m.contains(key("attention.key_length"))) c["head_dim"] = m[key("attention.key_length")];
  if (architecture.family == Family::gemma3) {
    // GELU-gated; a window on every layer but each pattern-th (llama.cpp's rule: 6, or the
    // file's sliding_window_pattern); scores × head_dim^-½ (the 62-layer 27B: (d / H)^-½),
    // which is query_pre_attn_scalar in the models' config.json.
    c.erase("hidden_act");
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["sliding_window"] = get("attention.sliding_window");
    if (const json& pattern = m.value(key("attention.sliding_window_pattern"), json()); !pattern.is_null()) {
      if (pattern.is_array()) {
        json types = json::array();
        for (const json& sliding : pattern)
          types.push_back(sliding == true ? "sliding_attention" : "full_attention");
        c["layer_types"] = std::move(types);
      } else {
        c["sliding_window_pattern"] = pattern;
      }
    }
    const json& layers = c["num_hidden_layers"];
    if (layers == 62 && c["hidden_size"].is_number_unsigned() && c["num_attention_heads"].is_number_unsigned() &&
        c["num_attention_heads"].get<std::size_t>() > 0)
      c["query_pre_attn_scalar"] = c["hidden_size"].get<std::size_t>() / c["num_attention_heads"].get<std::size_t>();
  } else if (m.contains(key("attention.sliding_window"))) {
    if (architecture.family != Family::llama)
      fail(f.path(), fmt::format("\"{}\" is set; sliding windows are read for llama and gemma3 files only",
                                 key("attention.sliding_window")));
    c["model_type"] = "mistral";
    c["sliding_window"] = m[key("attention.sliding_window")];
  }
  if (m.contains(key("rope.scaling.type"))) {
    const json& type = m[key("rope.scaling.type")];
    if (type == "linear")
      c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", m.value(key("rope.scaling.factor"), json(1.0))}};
    else if (type != "none")
      fail(f.path(), fmt::format("\"{}\" {} is not a RoPE scaling attnlab computes (none, linear; Llama 3's comes "
                                 "as rope_freqs)",
                                 key("rope.scaling.type"), type.dump().substr(0, 40)));
  }
  c["vocab_size"] = vocabulary_of(f);
  c["tie_word_embeddings"] = f.find("output.weight") == nullptr;
  if (m.contains("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = m["tokenizer.ggml.bos_token_id"];
  return c;
}

}  // namespace

Model load_gguf(const std::string& path, std::optional<BpeTokenizer>* tokenizer) {
  const auto mapped = std::make_shared<MappedGguf>(path);
  const GgufFile& f = mapped->file;
  const json& arch_value = f.metadata().value("general.architecture", json());
  const Architecture* arch = nullptr;
  for (const Architecture& a : kArchitectures)
    if (arch_value == a.name) arch = &a;
  if (!arch)
    fail(path, fmt::format("\"general.architecture\" {} is not one attnlab reads from GGUF yet (it reads gpt2, "
                           "llama, qwen2, qwen3 and gemma3)",
                           text_excerpt(arch_value.dump(), 40)));
  const bool gpt2 = arch->family == Family::gpt2;
  Model m;
  try {
    m.config = gpt2 ? gpt2_config(gpt2_config_of(f), path) : hf_family_config(hf_config_of(f, *arch), path);
  } catch (const InputError& e) {
    throw with_metadata_key(e, arch->name);
  }
  ModelConfig& c = m.config;
  const std::size_t d = c.n_embd, hd = c.head_dim(), H = c.n_head, Hkv = c.kv_heads(), I = c.n_inner;
  // Tensor `name` with `dims` as ggml writes them (a row's length first).
  const auto find = [&](const std::string& name, std::vector<std::uint64_t> dims) -> const GgufTensor& {
    const GgufTensor* t = f.find(name);
    if (!t) fail(path, fmt::format("tensor \"{}\" is missing (the metadata's config needs it)", name));
    check_shape(path, name, t->dims, dims);
    return *t;
  };
  const auto vector = [&](const std::string& name, std::size_t n) {
    const GgufTensor& t = find(name, {n});
    std::vector<float> values(n);
    dequantize(t.type, f.bytes(t).data(), n, values.data());
    return values;
  };
  // The nn.Linear weights `names` ([out_i, in] rows) side by side as attnlab's [in × out];
  // `heads` > 0: the rows of that many heads of hd put back from adjacent to split-half pairs.
  const auto piece = [&](const std::string& name, std::size_t out, std::size_t in, std::size_t heads) {
    const GgufTensor& t = find(name, {in, out});
    const std::byte* data = f.bytes(t).data();
    if (heads && arch->adjacent_rotary_pairs) {
      // GGUF row h·hd + 2j + s holds transformers' row h·hd + s·hd/2 + j (s = 0, 1; j < hd/2).
      const std::size_t row = ggml_row_bytes(t.type, in);
      std::vector<std::byte>& rows = mapped->reordered.emplace_back(out * row);
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t s = 0; s < 2; ++s)
          for (std::size_t j = 0; j < hd / 2; ++j)
            std::copy_n(data + (h * hd + 2 * j + s) * row, row, rows.data() + (h * hd + s * hd / 2 + j) * row);
      data = rows.data();
    }
    return Tensor::Piece{out, t.type, true, data};
  };
  const auto matrix = [&](const std::string& name, std::size_t rows, std::size_t cols) {
    const GgufTensor& t = find(name, {cols, rows});
    return Tensor::view(rows, cols, {{cols, t.type, false, f.bytes(t).data()}}, mapped);
  };
  if (gpt2) {
    m.wte = matrix("token_embd.weight", c.vocab_size, d);
    m.wpe = matrix("position_embd.weight", c.n_positions, d);
    const auto linear = [&](const std::string& name, std::size_t in, std::size_t out) {
      return Tensor::view(in, out, {piece(name, out, in, 0)}, mapped);
    };
    for (std::size_t l = 0; l < c.n_layer; ++l) {
      const std::string p = fmt::format("blk.{}.", l);
      Block b;
      b.ln_1_weight = vector(p + "attn_norm.weight", d);
      b.ln_1_bias = vector(p + "attn_norm.bias", d);
      b.attn_weight = linear(p + "attn_qkv.weight", d, 3 * d);
      b.attn_bias = vector(p + "attn_qkv.bias", 3 * d);
      b.attn_proj_weight = linear(p + "attn_output.weight", d, d);
      b.attn_proj_bias = vector(p + "attn_output.bias", d);
      b.ln_2_weight = vector(p + "ffn_norm.weight", d);
      b.ln_2_bias = vector(p + "ffn_norm.bias", d);
      b.mlp_fc_weight = linear(p + "ffn_up.weight", d, I);
      b.mlp_fc_bias = vector(p + "ffn_up.bias", I);
      b.mlp_proj_weight = linear(p + "ffn_down.weight", I, d);
      b.mlp_proj_bias = vector(p + "ffn_down.bias", d);
      m.blocks.push_back(std::move(b));
    }
    m.ln_f_weight = vector("output_norm.weight", d);
    m.ln_f_bias = vector("output_norm.bias", d);
    // llama.cpp's converter writes GPT-2's head, the embedding, again as output.weight.
    if (const GgufTensor* head = f.find("output.weight")) {
      const GgufTensor& embedding = find("token_embd.weight", {d, c.vocab_size});
      const std::span<const std::byte> a = f.bytes(*head), b = f.bytes(embedding);
      if (head->type != embedding.type || !std::equal(a.begin(), a.end(), b.begin(), b.end()))
        fail(path, "tensor \"output.weight\" is not the embedding; attnlab reads GPT-2 with its LM head tied");
    }
  } else {
    if (f.find("rope_freqs.weight")) {  // Llama 3's scaling, as a divisor of each frequency
      const std::vector<float> divisors = vector("rope_freqs.weight", (c.rope.rotated ? c.rope.rotated : hd) / 2);
      c.rope.divisors.assign(divisors.begin(), divisors.end());
    }
    m.wte = matrix("token_embd.weight", c.vocab_size, d);
    for (std::size_t l = 0; l < c.n_layer; ++l) {
      const std::string p = fmt::format("blk.{}.", l);
      Block b;
      b.ln_1_weight = vector(p + "attn_norm.weight", d);
      b.attn_weight =
          Tensor::view(d, c.qkv_width(),
                       {piece(p + "attn_q.weight", H * hd, d, H), piece(p + "attn_k.weight", Hkv * hd, d, Hkv),
                        piece(p + "attn_v.weight", Hkv * hd, d, 0)},
                       mapped);
      if (c.qkv_bias) {
        std::vector<float> bias = vector(p + "attn_q.bias", H * hd);
        for (const char* name : {"attn_k.bias", "attn_v.bias"}) {
          const std::vector<float> part = vector(p + name, Hkv * hd);
          bias.insert(bias.end(), part.begin(), part.end());
        }
        b.attn_bias = std::move(bias);
      }
      b.attn_proj_weight = Tensor::view(H * hd, d, {piece(p + "attn_output.weight", d, H * hd, 0)}, mapped);
      if (c.qk_norm) {
        b.q_norm_weight = vector(p + "attn_q_norm.weight", hd);
        b.k_norm_weight = vector(p + "attn_k_norm.weight", hd);
      }
      b.ln_2_weight = vector(p + "ffn_norm.weight", d);
      if (c.sandwich_norms) {  // Gemma 3: the attention's and the MLP's outputs normed again
        b.post_attn_norm_weight = vector(p + "post_attention_norm.weight", d);
        b.post_mlp_norm_weight = vector(p + "post_ffw_norm.weight", d);
      }
      b.mlp_fc_weight =
          Tensor::view(d, 2 * I, {piece(p + "ffn_gate.weight", I, d, 0), piece(p + "ffn_up.weight", I, d, 0)}, mapped);
      b.mlp_proj_weight = Tensor::view(I, d, {piece(p + "ffn_down.weight", d, I, 0)}, mapped);
      m.blocks.push_back(std::move(b));
    }
    m.ln_f_weight = vector("output_norm.weight", d);
    if (!c.tied) m.lm_head = matrix("output.weight", c.vocab_size, d);
    // llama.cpp's converter stores Gemma's norm weights as 1 + w, the factor they apply:
    // read as they are, and applied as they are.
    c.norm_plus_one = false;
  }
  const GgmlType stored = m.blocks.empty() ? m.wte.type() : m.blocks[0].mlp_fc_weight.type();
  m.stored_dtype = stored == GgmlType::f16 ? DType::f16 : stored == GgmlType::bf16 ? DType::bf16 : DType::f32;
  m.stored_type = stored;
  if (tokenizer && has_gguf_tokenizer(f)) *tokenizer = BpeTokenizer::from_gguf(f);
  return m;
}

CheckpointSummary gguf_summary(const std::string& path) {
  const GgufFile f(path);
  CheckpointSummary out;
  out.format = fmt::format("GGUF v{}", f.version());
  const json& arch = f.metadata().value("general.architecture", json());
  out.architecture = arch.is_string() ? arch.get<std::string>() : "";
  out.files = 1;
  out.bytes = f.file_bytes();
  for (const GgufTensor& t : f.tensors())
    out.tensors.push_back({t.name, t.type, {t.dims.rbegin(), t.dims.rend()}, t.bytes});
  return out;
}

}  // namespace attnlab
