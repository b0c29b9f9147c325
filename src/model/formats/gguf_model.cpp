// A model from a GGUF file (attnlab/model/model.hpp's load_model on FILE.gguf): the
// architectures `llama` (Llama 2 and 3, SmolLM2, TinyLlama, Mistral as llama.cpp writes
// them), `qwen2`, `qwen3`, `gemma3` and `gpt2`, mapped onto the one transformer. The metadata becomes the config
// Hugging Face's config.json would give, checked by the same reader; the tensors, named as
// tensor_names.hpp's table says, are viewed where they lie, quantized as they are. ggml
// writes a tensor's dims row length first: token_embd.weight [ne0 = d, ne1 = V] holds a row
// of d per token, and a linear layer's weight is nn.Linear's [out, in], a row of `in` per
// output (blk.N.attn_q.weight [d, H·hd]).
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
#include "attnlab/model/tensor_names.hpp"
#include "formats/config_json.hpp"

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
  const std::size_t d = c.n_embd, hd = c.head_dim();
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
  // The nn.Linear weight `name` ([out, in] rows) as a piece of attnlab's [in × out]; `heads`
  // > 0: the rows of that many heads of hd put back from adjacent to split-half pairs.
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
      f.release_pages(t);  // held once, in transformers' order: the file's copy leaves memory
    }
    return Tensor::Piece{out, t.type, true, data};
  };
  const auto matrix = [&](const std::string& name, std::size_t rows, std::size_t cols) {
    const GgufTensor& t = find(name, {cols, rows});
    return Tensor::view(rows, cols, {{cols, t.type, false, f.bytes(t).data()}}, mapped);
  };
  if (!gpt2 && f.find("rope_freqs.weight")) {  // Llama 3's scaling, as a divisor of each frequency
    const std::vector<float> divisors = vector("rope_freqs.weight", (c.rope.rotated ? c.rope.rotated : hd) / 2);
    c.rope.divisors.assign(divisors.begin(), divisors.end());
  }
  // Each tensor of the parameter table from the file's tensors that tensor_names.hpp names.
  m.blocks.resize(c.n_layer);
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const std::vector<StoredTensor> parts = stored_tensors(t, c, WeightFormat::kGguf);
    if (t.shape.size() == 1) {  // a norm's weight, a bias (q | k | v's side by side)
      std::vector<float> values;
      for (const StoredTensor& part : parts) {
        const std::vector<float> v = vector(part.name, part.width);
        values.insert(values.end(), v.begin(), v.end());
      }
      tensor_of(m, t) = std::move(values);
    } else if (stored_as_rows(t.slot)) {
      tensor_of(m, t) = matrix(parts.at(0).name, t.shape[0], t.shape[1]);
    } else {
      std::vector<Tensor::Piece> pieces;
      for (const StoredTensor& part : parts)
        pieces.push_back(piece(part.name, part.width, t.shape[0], part.rotary_heads));
      tensor_of(m, t) = Tensor::view(t.shape[0], t.shape[1], std::move(pieces), mapped);
    }
  }
  // llama.cpp's converter writes GPT-2's head, the embedding, again as output.weight.
  if (const GgufTensor* head = f.find("output.weight"); head && gpt2) {
    const GgufTensor& embedding = find("token_embd.weight", {d, c.vocab_size});
    const std::span<const std::byte> a = f.bytes(*head), b = f.bytes(embedding);
    if (head->type != embedding.type || !std::equal(a.begin(), a.end(), b.begin(), b.end()))
      fail(path, "tensor \"output.weight\" is not the embedding; attnlab reads GPT-2 with its LM head tied");
  }
  // llama.cpp's converter stores Gemma's norm weights as 1 + w, the factor they apply: read as
  // they are, and applied as they are.
  c.norm_plus_one = false;
  const GgmlType stored = m.blocks.empty() ? m.wte.type() : m.blocks[0].mlp_fc_weight.type();
  m.stored_dtype = stored == GgmlType::f16 ? DType::f16 : stored == GgmlType::bf16 ? DType::bf16 : DType::f32;
  m.stored_type = stored;
  if (tokenizer && has_gguf_tokenizer(f)) *tokenizer = BpeTokenizer::from_gguf(f);
  mapped->file.drop_metadata();  // the model keeps the mapping, not the tables read above
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
