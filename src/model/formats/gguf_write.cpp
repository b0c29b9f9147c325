// Writing a model as a GGUF file (save_gguf, attnlab/model/model.hpp): what llama.cpp's
// converter writes for the architecture, so that llama.cpp and Ollama run it, each tensor
// named as tensor_names.hpp's table says (GPT-2's q|k|v fused as attn_qkv, its MLP ungated;
// a llama's, Qwen2's and Qwen3's split), plus rope_freqs for Llama 3's scaling.
//
// Every matrix is written [out, in] (a row per output, ggml's dims {in, out}); a llama
// model's q and k rows are reordered so that each head's rotary pairs are adjacent, as
// llama.cpp rotates them. Matrices are stored as the type asked for (F32, F16 or Q8_0,
// rounded to nearest even or quantized by ggml's reference rule: per block of 32,
// d = max|x| / 127, q = round(x / d)); a matrix whose rows are not whole Q8_0 blocks is
// written F16, as llama.cpp's converter does. Norms and biases are F32.
//
// The tokenizer, when the model's folder has one, becomes tokenizer.ggml.*: GPT-2's
// vocab.json + merges.txt as "gpt2" with the pre-tokenizer "gpt-2"; a tokenizer.json as
// "gpt2" with the pre-tokenizer its Split pattern names (Llama 3's, Qwen's; SmolLM's digits),
// or, SentencePiece-style (byte fallback, "▁" for a space), as "llama" with a score per token
// (minus the rank of the first merge that makes it: SentencePiece merges by score, which
// ranks the merges as the file does).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/files.hpp"
#include "attnlab/model/bpe.hpp"
#include "attnlab/model/forward.hpp"
#include "attnlab/model/gguf.hpp"
#include "attnlab/model/model.hpp"
#include "attnlab/model/tensor_names.hpp"
#include "formats/config_json.hpp"
#include "tokenizers/bpe_recipe.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

// ---- the bytes of a GGUF file ---------------------------------------------------------------

class Bytes {
 public:
  template <class T>
  void put(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void text(std::string_view s) {
    put(std::uint64_t(s.size()));
    out_.append(s);
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// A metadata value: its GGUF type number and its bytes.
struct Value {
  std::uint32_t type;
  std::string bytes;
};
template <class T>
Value number(std::uint32_t type, T v) {
  Bytes b;
  b.put(v);
  return {type, b.str()};
}
Value u32(std::uint64_t v) { return number(4, static_cast<std::uint32_t>(v)); }
Value f32(double v) { return number(6, static_cast<float>(v)); }
Value boolean(bool v) { return number(7, std::uint8_t{v}); }
Value string(std::string_view s) {
  Bytes b;
  b.text(s);
  return {8, b.str()};
}
Value strings(const std::vector<std::string>& list) {
  Bytes b;
  b.put(std::uint32_t{8});
  b.put(std::uint64_t(list.size()));
  for (const std::string& s : list)
    b.text(s);
  return {9, b.str()};
}
template <class T>
Value array(std::uint32_t element, const std::vector<T>& list) {
  Bytes b;
  b.put(element);
  b.put(std::uint64_t(list.size()));
  for (T v : list)
    b.put(v);
  return {9, b.str()};
}

// A tensor to write: ggml's dims (a row's length first), its values row by row in f32, and
// the type to store them as.
struct Out {
  std::string name;
  std::vector<std::uint64_t> dims;
  GgmlType type;
  std::vector<float> values;
};

std::string encoded(const Out& t) {
  std::string out;
  if (t.type == GgmlType::f32) {
    out.assign(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  } else if (t.type == GgmlType::f16) {
    std::vector<std::uint16_t> halves(t.values.size());
    f32_to_f16(t.values, halves);
    out.assign(reinterpret_cast<const char*>(halves.data()), halves.size() * 2);
  } else {  // Q8_0: per block of 32, d = max|x| / 127 stored as f16, q = round(x / d)
    for (std::size_t b = 0; b < t.values.size(); b += 32) {
      float amax = 0;
      for (std::size_t i = 0; i < 32; ++i)
        amax = std::max(amax, std::abs(t.values[b + i]));
      const float d = amax / 127, inverse = d > 0 ? 1 / d : 0;
      const std::uint16_t d16 = f32_to_f16(d);
      out.append(reinterpret_cast<const char*>(&d16), 2);
      for (std::size_t i = 0; i < 32; ++i)
        out.push_back(static_cast<char>(static_cast<std::int8_t>(std::round(t.values[b + i] * inverse))));
    }
  }
  return out;
}

void write_file(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
                const std::vector<Out>& tensors) {
  constexpr std::size_t alignment = 32;
  Bytes header;
  header.str() = "GGUF";
  header.put(std::uint32_t{3});
  header.put(std::uint64_t(tensors.size()));
  header.put(std::uint64_t(metadata.size()));
  for (const auto& [key, value] : metadata) {
    header.text(key);
    header.put(value.type);
    header.str() += value.bytes;
  }
  std::uint64_t offset = 0;
  for (const Out& t : tensors) {
    header.text(t.name);
    header.put(std::uint32_t(t.dims.size()));
    for (std::uint64_t d : t.dims)
      header.put(d);
    header.put(static_cast<std::uint32_t>(t.type));
    header.put(offset);
    offset += (ggml_row_bytes(t.type, t.values.size()) + alignment - 1) / alignment * alignment;
  }
  std::string& bytes = header.str();
  bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, '\0');
  write_file_whole(path, [&](std::FILE* f) {
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    for (const Out& t : tensors) {
      std::string data = encoded(t);
      data.resize((data.size() + alignment - 1) / alignment * alignment, '\0');
      ok = ok && std::fwrite(data.data(), 1, data.size(), f) == data.size();
    }
    return ok;
  });
}

// ---- the tokenizer ------------------------------------------------------------------------

namespace token_type = bpe_detail::token_type;

struct TokenizerMetadata {
  std::vector<std::pair<std::string, Value>> entries;
  std::string what;  // for the report: "GPT-2's vocab.json + merges.txt", ...
};

// tokens by id from a vocabulary object (gaps filled with unused tokens).
std::vector<std::string> tokens_by_id(const json& vocab, std::vector<std::int32_t>& types, const std::string& file) {
  std::vector<std::string> tokens;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= kMaxVocabEntries)
      fail(file, fmt::format("token {} has no id from 0 to {}", text_excerpt(token, 40), kMaxVocabEntries - 1));
    const std::size_t i = id.get<std::size_t>();
    if (i >= tokens.size()) {
      tokens.resize(i + 1);
      types.resize(i + 1, token_type::unused);
    }
    tokens[i] = token;
    types[i] = token_type::normal;
  }
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i].empty()) tokens[i] = fmt::format("[PAD{}]", i);
  return tokens;
}

// The vocabulary padded with unused tokens to the model's embeddings, as llama.cpp's converter
// pads it (llama.cpp sizes the embedding by the token count: Qwen's 151,665 tokens for 151,936).
void pad_to(std::size_t vocab_size, std::vector<std::string>& tokens, std::vector<std::int32_t>& types) {
  for (std::size_t i = tokens.size(); i < vocab_size; ++i) {
    tokens.push_back(fmt::format("[PAD{}]", i));
    types.push_back(token_type::unused);
  }
}

// The id generation stops at, as the folder's generation_config.json or config.json says
// ("eos_token_id": an id, or a list whose first is the one llama.cpp keeps); none when
// neither names one inside the vocabulary.
std::optional<std::uint64_t> end_of_sequence_id(const std::filesystem::path& dir, std::size_t tokens) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::filesystem::path file = dir / name;
    if (!std::filesystem::exists(file)) continue;
    const json doc = read_config_document(file.string(), "a model folder's config");
    if (!doc.contains("eos_token_id")) continue;
    json id = doc["eos_token_id"];
    if (id.is_array() && !id.empty()) id = id[0];
    if (id.is_number_unsigned() && id.get<std::uint64_t>() < tokens) return id.get<std::uint64_t>();
  }
  return std::nullopt;
}

// A metadata value as a GGUF file holds it (GgufFile's JSON and its type name: "u32",
// "string", "array[string]", ...), encoded again to be copied into another file.
Value encoded_value(std::string_view type, const json& v) {
  static constexpr std::string_view names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  Bytes b;
  if (type.starts_with("array[")) {
    const std::string_view inner = type.substr(6, type.size() - 7);
    const std::string_view element = inner.starts_with("array[") ? "array" : inner;
    const auto number = std::find(std::begin(names), std::end(names), element) - std::begin(names);
    b.put(static_cast<std::uint32_t>(number));
    b.put(std::uint64_t(v.size()));
    for (const json& item : v)
      b.str() += encoded_value(inner, item).bytes;
    return {9, b.str()};
  }
  const auto number =
      static_cast<std::uint32_t>(std::find(std::begin(names), std::end(names), type) - std::begin(names));
  switch (number) {
    case 0: b.put(v.get<std::uint8_t>()); break;
    case 1: b.put(v.get<std::int8_t>()); break;
    case 2: b.put(v.get<std::uint16_t>()); break;
    case 3: b.put(v.get<std::int16_t>()); break;
    case 4: b.put(v.get<std::uint32_t>()); break;
    case 5: b.put(v.get<std::int32_t>()); break;
    case 6: b.put(v.get<float>()); break;
    case 7: b.put(std::uint8_t{v.get<bool>()}); break;
    case 8: {  // kept as its bytes when it was not UTF-8
      std::string text;
      if (v.is_string()) {
        text = v.get<std::string>();
      } else {
        for (const json& byte : v)
          text.push_back(static_cast<char>(byte.get<int>()));
      }
      b.text(text);
      break;
    }
    case 10: b.put(v.get<std::uint64_t>()); break;
    case 11: b.put(v.get<std::int64_t>()); break;
    default: b.put(v.get<double>()); break;
  }
  return {number, b.str()};
}

// A GGUF file's own tokenizer: its tokenizer.* entries, copied as they are.
std::optional<TokenizerMetadata> gguf_tokenizer_metadata(const std::string& path) {
  const GgufFile file(path);
  if (!has_gguf_tokenizer(file)) return std::nullopt;
  TokenizerMetadata out;
  for (const auto& [key, type] : file.metadata_types())
    if (key.starts_with("tokenizer.")) out.entries.push_back({key, encoded_value(type, file.metadata()[key])});
  out.what = fmt::format("the GGUF file's own (\"{}\", copied)",
                         file.metadata().value("tokenizer.ggml.model", json("?")).get<std::string>());
  return out;
}

std::optional<TokenizerMetadata> tokenizer_metadata(const std::filesystem::path& dir, std::size_t vocab_size) {
  namespace fs = std::filesystem;
  if (is_gguf_path(dir.string())) return gguf_tokenizer_metadata(dir.string());
  std::vector<std::int32_t> types;
  TokenizerMetadata out;
  auto& e = out.entries;
  if (fs::exists(dir / "tokenizer.json")) {
    const std::string file = (dir / "tokenizer.json").string();
    const std::string text = read_file_within(file, kMaxTokenizerJsonBytes, "tokenizer.json");
    const BpeTokenizer reader = BpeTokenizer::from_tokenizer_json(text);  // the file is one attnlab reads
    const json doc = json::parse(text);
    const json& model = doc["model"];
    std::vector<std::string> tokens = tokens_by_id(model["vocab"], types, file);
    std::vector<std::string> merges;
    for (const json& m : model.value("merges", json::array()))
      merges.push_back(m.is_array() ? m[0].get<std::string>() + " " + m[1].get<std::string>() : m.get<std::string>());
    for (const json& t : doc.value("added_tokens", json::array())) {
      const std::size_t id = t["id"].get<std::size_t>();
      if (id >= tokens.size()) {
        tokens.resize(id + 1);
        types.resize(id + 1, token_type::unused);
      }
      tokens[id] = t["content"].get<std::string>();
      types[id] = t.value("special", false) ? token_type::control : token_type::user_defined;
    }
    pad_to(vocab_size, tokens, types);
    std::optional<std::uint64_t> bos;
    if (reader.bos()) bos = static_cast<std::uint64_t>(*reader.bos());
    const std::optional<std::string> pre =
        bpe_detail::gguf_pre_tokenizer_name(doc.value("pre_tokenizer", json()), doc.value("normalizer", json()));
    const bool byte_level = doc.value("pre_tokenizer", json()).dump().find("\"ByteLevel\"") != std::string::npos;
    if (byte_level) {
      if (!pre) return std::nullopt;  // a pre-tokenizer llama.cpp has no name for
      e.push_back({"tokenizer.ggml.model", string("gpt2")});
      e.push_back({"tokenizer.ggml.pre", string(*pre)});
      e.push_back({"tokenizer.ggml.tokens", strings(tokens)});
      e.push_back({"tokenizer.ggml.token_type", array(5, types)});
      e.push_back({"tokenizer.ggml.merges", strings(merges)});
      out.what = fmt::format("tokenizer.json as byte-level BPE (pre-tokenizer \"{}\")", *pre);
    } else {
      std::map<std::string, std::size_t> first_rank;
      for (std::size_t r = 0; r < merges.size(); ++r) {
        std::string made = merges[r];
        made.erase(made.find(' '), 1);
        first_rank.emplace(made, r);
      }
      std::vector<float> scores(tokens.size());
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto it = first_rank.find(tokens[i]);
        scores[i] = it != first_rank.end() ? -float(it->second) : -float(merges.size() + 1 + i);
        if (types[i] == token_type::normal && tokens[i].size() == 6 && tokens[i].starts_with("<0x") &&
            tokens[i].ends_with(">"))
          types[i] = token_type::byte;
      }
      if (model.contains("unk_token") && model["unk_token"].is_string())
        if (const auto unk = reader.find_symbol(model["unk_token"].get<std::string>())) {
          types[*unk] = token_type::unknown;
          e.push_back({"tokenizer.ggml.unknown_token_id", u32(*unk)});
        }
      e.push_back({"tokenizer.ggml.model", string("llama")});
      e.push_back({"tokenizer.ggml.tokens", strings(tokens)});
      e.push_back({"tokenizer.ggml.scores", array(6, scores)});
      e.push_back({"tokenizer.ggml.token_type", array(5, types)});
      e.push_back({"tokenizer.ggml.add_space_prefix",
                   boolean(doc.value("normalizer", json()).dump().find("\"Prepend\"") != std::string::npos)});
      out.what = "tokenizer.json as SentencePiece (scores from the merges' ranks)";
    }
    if (bos) e.push_back({"tokenizer.ggml.bos_token_id", u32(*bos)});
    e.push_back({"tokenizer.ggml.add_bos_token", boolean(bos.has_value())});
    if (const std::optional<std::uint64_t> eos = end_of_sequence_id(dir, tokens.size()))
      e.push_back({"tokenizer.ggml.eos_token_id", u32(*eos)});
    return out;
  }
  if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) {
    const std::string vocab_file = (dir / "vocab.json").string();
    const std::string vocab_text = read_file_within(vocab_file, kMaxVocabFileBytes, "vocab.json");
    const std::string merges_text = read_file_within(dir / "merges.txt", kMaxVocabFileBytes, "merges.txt");
    const BpeTokenizer reader = BpeTokenizer::from_text(vocab_text, merges_text);  // the files are ones attnlab reads
    std::vector<std::string> tokens = tokens_by_id(json::parse(vocab_text), types, vocab_file);
    pad_to(vocab_size, tokens, types);
    std::vector<std::string> merges;
    for (std::size_t at = 0; at < merges_text.size();) {
      std::size_t end = merges_text.find('\n', at);
      if (end == std::string::npos) end = merges_text.size();
      std::string line = merges_text.substr(at, end - at);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty() && !(at == 0 && line.starts_with("#version"))) merges.push_back(line);
      at = end + 1;
    }
    const std::optional<TokenId> end_of_text = reader.end_of_text();
    if (end_of_text) types[*end_of_text] = token_type::control;
    e.push_back({"tokenizer.ggml.model", string("gpt2")});
    e.push_back({"tokenizer.ggml.pre", string("gpt-2")});
    e.push_back({"tokenizer.ggml.tokens", strings(tokens)});
    e.push_back({"tokenizer.ggml.token_type", array(5, types)});
    e.push_back({"tokenizer.ggml.merges", strings(merges)});
    if (end_of_text) {
      e.push_back({"tokenizer.ggml.bos_token_id", u32(*end_of_text)});
      e.push_back({"tokenizer.ggml.eos_token_id", u32(*end_of_text)});
    }
    e.push_back({"tokenizer.ggml.add_bos_token", boolean(false)});
    out.what = "GPT-2's vocab.json + merges.txt as byte-level BPE (pre-tokenizer \"gpt-2\")";
    return out;
  }
  return std::nullopt;
}

}  // namespace

GgufExport save_gguf(const std::string& path, const Model& m, GgmlType type, const std::string& tokenizer_source) {
  const ModelConfig& c = m.config;
  if (type != GgmlType::f32 && type != GgmlType::f16 && type != GgmlType::q8_0)
    fail("--type", "attnlab writes GGUF matrices as f32, f16 or q8_0");
  const bool gpt2 = c.family == Family::gpt2;
  const char* arch = gpt2                        ? "gpt2"
                     : c.family == Family::qwen2 ? "qwen2"
                     : c.family == Family::qwen3 ? "qwen3"
                     : c.family == Family::llama ? "llama"
                                                 : nullptr;
  const bool windowed = std::any_of(c.sliding_window.begin(), c.sliding_window.end(), [](std::size_t w) { return w; });
  if (!arch || c.sandwich_norms || c.norm_plus_one || windowed || c.embedding_scale != 1.0 || c.query_scale != 0 ||
      (c.rope.rotated && c.rope.rotated != c.head_dim()) ||
      (!gpt2 && (c.mlp != MlpKind::swiglu || c.out_bias || c.mlp_bias)))
    fail(path, fmt::format("attnlab writes GGUF for GPT-2, Llama, Qwen2 and Qwen3 models; this is {}", describe(c)));
  const std::size_t d = c.n_embd, hd = c.head_dim(), H = c.n_head, Hkv = c.kv_heads(), I = c.n_inner;
  if (c.qkv_bias && arch == std::string_view("llama"))
    fail(path, "a llama model with q/k/v biases has no GGUF layout attnlab writes");

  GgufExport report;
  std::vector<Out> tensors;
  // A matrix of `rows` outputs of `in` values each; Q8_0 needs whole blocks of 32 per row.
  const auto matrix = [&](std::string name, std::size_t in, std::size_t rows, std::vector<float> values) {
    GgmlType t = type;
    if (t == GgmlType::q8_0 && in % 32 != 0) {
      t = GgmlType::f16;
      ++report.kept_f16;
    }
    tensors.push_back({std::move(name), {in, rows}, t, std::move(values)});
  };
  // Columns [first, first + out) of attnlab's [in × width] matrix as [out, in] rows; with
  // `heads`, each head's rows reordered from split-half pairs to adjacent ones (llama).
  const auto rows_of = [](const std::vector<float>& w, std::size_t in, std::size_t width, std::size_t first,
                          std::size_t out, std::size_t heads) {
    std::vector<float> r(out * in);
    const std::size_t head = heads ? out / heads : 0;
    for (std::size_t o = 0; o < out; ++o) {
      // GGUF row h·hd + 2j + s is transformers' row h·hd + s·hd/2 + j.
      const std::size_t from = heads ? (o / head) * head + (o % 2) * (head / 2) + (o % head) / 2 : o;
      for (std::size_t i = 0; i < in; ++i)
        r[o * in + i] = w[i * width + first + from];
    }
    return r;
  };

  // Each tensor of the parameter table as the file's tensors that tensor_names.hpp names.
  const bool permuted = std::string_view(arch) == "llama";  // llama.cpp rotates a llama's adjacent pairs
  for (const ParameterTensor& t : parameter_tensors(c)) {
    const std::vector<float> values = tensor_of(m, t).to_f32();
    for (const StoredTensor& part : stored_tensors(t, c, WeightFormat::kGguf)) {
      if (t.shape.size() == 1) {  // norms and biases as F32
        const auto from = values.begin() + std::ptrdiff_t(part.first);
        tensors.push_back({part.name, {part.width}, GgmlType::f32, {from, from + std::ptrdiff_t(part.width)}});
      } else if (stored_as_rows(t.slot)) {
        matrix(part.name, t.shape[1], t.shape[0], values);
      } else {
        matrix(part.name, t.shape[0], part.width,
               rows_of(values, t.shape[0], t.shape[1], part.first, part.width, permuted ? part.rotary_heads : 0));
      }
    }
  }
  // The divisor of each frequency: Llama 3's scaling, or a GGUF file's own rope_freqs.
  if (!gpt2 && (c.rope.scaling == RopeScaling::llama3 || !c.rope.divisors.empty())) {
    const std::vector<double> f = rope_frequencies(c, 0);
    std::vector<float> divisors(f.size());
    for (std::size_t i = 0; i < f.size(); ++i)
      divisors[i] = static_cast<float>(std::pow(c.rope.theta, -2.0 * double(i) / double(hd)) / f[i]);
    tensors.push_back({"rope_freqs.weight", {divisors.size()}, GgmlType::f32, std::move(divisors)});
  }

  std::vector<std::pair<std::string, Value>> meta;
  const auto key = [&](const char* name) { return fmt::format("{}.{}", arch, name); };
  meta.push_back({"general.architecture", string(arch)});
  meta.push_back({"general.name", string(std::filesystem::path(path).stem().string())});
  meta.push_back({"general.file_type", u32(type == GgmlType::f32 ? 0 : type == GgmlType::f16 ? 1 : 7)});
  meta.push_back({key("block_count"), u32(c.n_layer)});
  meta.push_back({key("context_length"), u32(c.n_positions)});
  meta.push_back({key("embedding_length"), u32(d)});
  meta.push_back({key("feed_forward_length"), u32(I)});
  meta.push_back({key("attention.head_count"), u32(H)});
  if (gpt2) {
    meta.push_back({key("attention.layer_norm_epsilon"), f32(c.layer_norm_epsilon)});
  } else {
    meta.push_back({key("attention.head_count_kv"), u32(Hkv)});
    meta.push_back({key("attention.layer_norm_rms_epsilon"), f32(c.layer_norm_epsilon)});
    meta.push_back({key("rope.freq_base"), f32(c.rope.theta)});
    meta.push_back({key("attention.key_length"), u32(hd)});
    meta.push_back({key("attention.value_length"), u32(hd)});
    if (c.rope.scaling == RopeScaling::linear) {
      meta.push_back({key("rope.scaling.type"), string("linear")});
      meta.push_back({key("rope.scaling.factor"), f32(c.rope.factor)});
    }
  }
  if (!tokenizer_source.empty())
    if (std::optional<TokenizerMetadata> t = tokenizer_metadata(tokenizer_source, c.vocab_size)) {
      meta.insert(meta.end(), t->entries.begin(), t->entries.end());
      report.tokenizer = t->what;
    }
  write_file(path, meta, tensors);
  report.tensors = tensors.size();
  report.bytes = std::filesystem::file_size(path);
  return report;
}

}  // namespace attnlab
