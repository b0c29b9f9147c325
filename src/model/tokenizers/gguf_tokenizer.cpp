// The tokenizer a GGUF file carries in its metadata (BpeTokenizer::from_gguf, bpe.hpp).
//
// llama.cpp's converter writes a model's tokenizer as metadata under tokenizer.ggml.*:
//
//   model           "gpt2": byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM), with `merges`;
//                   "llama": SentencePiece (Llama 2, TinyLlama, Mistral 7B, Gemma), with `scores`
//   pre             for "gpt2", the name of the pre-tokenizer (how text is cut before merging)
//   tokens          every token's symbol, by id ("Ġworld", "▁world", "<0x0A>", "<|im_start|>")
//   token_type      by id: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
//   merges          "a b", by rank;  scores  f32 by id (SentencePiece: higher merges first)
//   bos_token_id, eos_token_id, unknown_token_id;  add_bos_token;  add_space_prefix
//
// It is the tokenizer.json the model shipped with, written another way. attnlab writes that
// tokenizer.json back from the metadata (a JSON document, never a file) and reads it with the
// one tokenizer.json reader, so one set of checks and one tokenizer run for both:
//
//   - control and user-defined tokens are tokenizer.json's added tokens (special, and not);
//   - "gpt2": a BPE model with the merges and a ByteLevel decoder; the pre-tokenizer is the
//     one the name stands for in the model's tokenizer.json (kPreTokenizers below);
//   - "llama": SentencePiece's merging by score is BPE whose merges are every split a + b of a
//     token into two tokens, ranked by the token's score (highest first; ties by the token's
//     id, then a's, then b's), which is how Hugging Face converted these models' tokenizers to
//     tokenizer.json; "▁" stands for a space (put before the text when add_space_prefix), a
//     character the vocabulary lacks becomes its <0xNN> byte tokens;
//   - add_bos_token: the post-processor puts the BOS token first (bos()).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/bpe.hpp"
#include "attnlab/model/gguf.hpp"
#include "tokenizers/bpe_recipe.hpp"

namespace attnlab {

using namespace bpe_detail;
using nlohmann::json;

namespace {

// The pre-tokenizer each name of tokenizer.ggml.pre stands for, as the tokenizer.json of the
// models converted under that name says it.
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json split_then_bytes(const char* pattern) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

struct PreTokenizer {
  std::string_view name;      // tokenizer.ggml.pre
  std::string_view models;    // for the message that lists them
  json pre_tokenizer;         // tokenizer.json's "pre_tokenizer"
  json normalizer = nullptr;  // tokenizer.json's "normalizer"
  bool ignore_merges = false;
};

const std::vector<PreTokenizer>& pre_tokenizers() {
  static const std::vector<PreTokenizer> all = {
      {"gpt-2", "GPT-2", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"llama-bpe", "Llama 3", split_then_bytes(kLlama3Pattern), nullptr, true},
      {"qwen2", "Qwen2, Qwen2.5, Qwen3", split_then_bytes(kQwen2Pattern), {{"type", "NFC"}}},
      {"smollm",
       "SmolLM, SmolLM2",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Digits"}, {"individual_digits", true}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}}},
  };
  return all;
}

// The metadata under tokenizer.ggml.*, each value checked as it is taken.
class Metadata {
 public:
  explicit Metadata(const GgufFile& file) : file_(file), m_(file.metadata()) {}

  [[noreturn]] void refuse(std::string_view key, std::string_view message) const {
    fail(file_.path(), fmt::format("metadata \"tokenizer.ggml.{}\" {}", key, message));
  }
  const json* find(std::string_view key) const {
    const auto it = m_.find(fmt::format("tokenizer.ggml.{}", key));
    return it == m_.end() ? nullptr : &*it;
  }
  const json& array(std::string_view key, std::size_t size) const {
    const json* value = find(key);
    if (!value) refuse(key, "is missing (this kind of tokenizer needs it)");
    if (!value->is_array() || (size && value->size() != size))
      refuse(key, size ? fmt::format("must be an array of {} values, one per token", size) : "must be an array");
    return *value;
  }
  std::string string(std::string_view key, std::string_view fallback) const {
    const json* value = find(key);
    if (!value) return std::string(fallback);
    if (!value->is_string()) refuse(key, "must be a string");
    return value->get<std::string>();
  }
  bool flag(std::string_view key, bool fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    if (!value->is_boolean()) refuse(key, "must be true or false");
    return value->get<bool>();
  }
  // A token id below `tokens`, or nothing when absent.
  std::optional<TokenId> id(std::string_view key, std::size_t tokens) const {
    const json* value = find(key);
    if (!value) return std::nullopt;
    if (!value->is_number_unsigned() || value->get<std::uint64_t>() >= tokens)
      refuse(key, fmt::format("must be a token id from 0 to {}", tokens - 1));
    return static_cast<TokenId>(value->get<std::uint64_t>());
  }

 private:
  const GgufFile& file_;
  const json& m_;
};

// The merges SentencePiece's scores stand for: every split of a token into two tokens, the
// splits of higher-scored tokens first (see the top).
json merges_from_scores(const std::vector<std::string>& tokens, const std::vector<float>& scores) {
  std::unordered_map<std::string_view, TokenId> id_of;
  id_of.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i)
    id_of.emplace(tokens[i], static_cast<TokenId>(i));
  struct Merge {
    float score;
    TokenId token, left, right;
    std::size_t cut;
  };
  std::vector<Merge> merges;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string_view t = tokens[i];
    // Cut between characters, never inside one.
    for (std::size_t cut = read_utf8(t, 0).length; cut > 0 && cut < t.size(); cut += read_utf8(t, cut).length) {
      const auto left = id_of.find(t.substr(0, cut)), right = id_of.find(t.substr(cut));
      if (left != id_of.end() && right != id_of.end()) {
        if (merges.size() >= kMaxMerges)
          fail("tokenizer.ggml.scores", fmt::format("the tokens make more than {} merges, the limit", kMaxMerges));
        merges.push_back({scores[i], static_cast<TokenId>(i), left->second, right->second, cut});
      }
      if (read_utf8(t, cut).length == 0) break;  // not UTF-8: the reader refuses the token
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(b.score, a.token, a.left, a.right) < std::tie(a.score, b.token, b.left, b.right);
  });
  json out = json::array();
  for (const Merge& m : merges) {
    const std::string_view t = tokens[m.token];
    out.push_back(json::array({t.substr(0, m.cut), t.substr(m.cut)}));
  }
  return out;
}

// The tokenizer.json the metadata stands for.
json tokenizer_document(const GgufFile& file) {
  const Metadata meta(file);
  const std::string model = meta.string("model", "");
  if (model != "gpt2" && model != "llama")
    meta.refuse("model", fmt::format("is {}; attnlab reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece) "
                                     "tokenizers",
                                     text_excerpt(json(model).dump(), 40)));
  const json& token_list = meta.array("tokens", 0);
  if (token_list.empty() || token_list.size() > kMaxVocabEntries)
    meta.refuse("tokens",
                fmt::format("holds {} tokens; a vocabulary holds 1 to {}", token_list.size(), kMaxVocabEntries));
  const std::size_t n = token_list.size();
  std::vector<std::string> tokens(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!token_list[i].is_string())
      meta.refuse("tokens", fmt::format("[{}] is not a UTF-8 string", i));  // GgufFile keeps other bytes as a list
    tokens[i] = token_list[i].get<std::string>();
    if (tokens[i].empty()) meta.refuse("tokens", fmt::format("[{}] is the empty string", i));
    // Priced: SentencePiece's merges try every cut of every token (a token's length squared).
    if (tokens[i].size() > kMaxAddedTokenBytes)
      meta.refuse("tokens",
                  fmt::format("[{}] is {} bytes; a token is at most {}", i, tokens[i].size(), kMaxAddedTokenBytes));
  }
  std::vector<int> types(n, token_type::normal);
  if (meta.find("token_type")) {
    const json& list = meta.array("token_type", n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!list[i].is_number_integer() || list[i].get<std::int64_t>() < token_type::normal ||
          list[i].get<std::int64_t>() > token_type::byte)
        meta.refuse("token_type", fmt::format("[{}] is not a token type (1 to 6)", i));
      types[i] = list[i].get<int>();
    }
  }
  const std::optional<TokenId> bos = meta.id("bos_token_id", n), unk = meta.id("unknown_token_id", n);
  (void)meta.id("eos_token_id", n);  // checked; generation stops where the caller says

  json doc = {{"normalizer", nullptr}, {"pre_tokenizer", nullptr}, {"post_processor", nullptr}};
  json vocab = json::object(), added = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    vocab[tokens[i]] = i;  // a token written twice is refused by the reader (ids must be unique)
    if (types[i] == token_type::control || types[i] == token_type::user_defined ||
        (types[i] == token_type::unknown && model == "llama"))
      added.push_back({{"id", i},
                       {"content", tokens[i]},
                       {"special", types[i] != token_type::user_defined},
                       {"normalized", false},
                       {"lstrip", false},
                       {"rstrip", false}});
  }
  if (vocab.size() != n) meta.refuse("tokens", "holds the same token twice; each token is one id");
  doc["added_tokens"] = std::move(added);

  if (model == "gpt2") {
    const std::string name = meta.string("pre", "gpt-2");
    const auto& all = pre_tokenizers();
    const auto pre = std::find_if(all.begin(), all.end(), [&](const PreTokenizer& p) { return p.name == name; });
    if (pre == all.end()) {
      std::string known;
      for (const PreTokenizer& p : all)
        known += fmt::format("{}\"{}\" ({})", known.empty() ? "" : ", ", p.name, p.models);
      meta.refuse("pre", fmt::format("is {}, a pre-tokenizer attnlab does not know; it knows {}",
                                     text_excerpt(json(name).dump(), 40), known));
    }
    const json& merge_list = meta.array("merges", 0);
    if (merge_list.size() > kMaxMerges)
      meta.refuse("merges", fmt::format("holds {} merges; the limit is {}", merge_list.size(), kMaxMerges));
    for (std::size_t i = 0; i < merge_list.size(); ++i)
      if (!merge_list[i].is_string()) meta.refuse("merges", fmt::format("[{}] is not a UTF-8 string", i));
    doc["model"] = {
        {"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", merge_list}, {"ignore_merges", pre->ignore_merges}};
    doc["normalizer"] = pre->normalizer;
    doc["pre_tokenizer"] = pre->pre_tokenizer;
    doc["decoder"] = {{"type", "ByteLevel"}};
  } else {
    const json& score_list = meta.array("scores", n);
    std::vector<float> scores(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!score_list[i].is_number() || !std::isfinite(score_list[i].get<float>()))
        meta.refuse("scores", fmt::format("[{}] is not a finite number", i));
      scores[i] = score_list[i].get<float>();
    }
    json model_json = {{"type", "BPE"},
                       {"vocab", std::move(vocab)},
                       {"merges", merges_from_scores(tokens, scores)},
                       {"byte_fallback", true},
                       {"fuse_unk", true}};
    if (unk) model_json["unk_token"] = tokens[*unk];
    doc["model"] = std::move(model_json);
    const bool space_prefix = meta.flag("add_space_prefix", true);
    const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}};
    doc["normalizer"] =
        space_prefix ? json{{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "▁"}}, replace}}}
                     : replace;
    json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}};
    if (space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}});
    doc["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
  }
  if (bos && meta.flag("add_bos_token", model == "llama"))
    doc["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", tokens[*bos]}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens",
         {{tokens[*bos],
           {{"id", tokens[*bos]}, {"ids", {static_cast<std::uint64_t>(*bos)}}, {"tokens", {tokens[*bos]}}}}}}};
  return doc;
}

}  // namespace

std::optional<std::string> bpe_detail::gguf_pre_tokenizer_name(const json& pre_tokenizer, const json& normalizer) {
  // The steps that cut the text, compared by what they do (a file writes more keys, such as
  // trim_offsets, that do not change the pieces).
  const auto steps = [](const json& x) {
    return x.is_object() && x.value("type", "") == "Sequence" ? x.value("pretokenizers", json::array())
                                                              : json::array({x});
  };
  const auto cuts = [&](const json& x) {
    json out = json::array();
    for (const json& step : steps(x)) {
      if (!step.is_object()) return json();
      const std::string type = step.value("type", "");
      if (type == "Split" && step.contains("pattern"))
        out.push_back(
            {type, step["pattern"].value("Regex", ""), step.value("behavior", ""), step.value("invert", false)});
      else if (type == "Digits")
        out.push_back({type, step.value("individual_digits", false)});
      else if (type == "ByteLevel")
        out.push_back({type, step.value("add_prefix_space", true), step.value("use_regex", true)});
      else
        return json();
    }
    return out;
  };
  const json want = cuts(pre_tokenizer);
  for (const PreTokenizer& p : pre_tokenizers())
    if (!want.is_null() && cuts(p.pre_tokenizer) == want && (p.normalizer == normalizer || p.normalizer.is_null()))
      return std::string(p.name);
  return std::nullopt;
}

// "none" is what llama.cpp's converter writes for a model without a vocabulary.
bool has_gguf_tokenizer(const GgufFile& file) {
  return file.metadata().contains("tokenizer.ggml.model") && file.metadata()["tokenizer.ggml.model"] != "none";
}

BpeTokenizer BpeTokenizer::from_gguf(const GgufFile& file) {
  BpeRecipe recipe = read_tokenizer_document(tokenizer_document(file), file.path());
  recipe.source = "GGUF metadata";
  recipe.vocab_name = "the GGUF file's tokenizer.ggml.tokens";
  return from_recipe(std::move(recipe));
}

}  // namespace attnlab
