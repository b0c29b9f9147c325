// Reading a Hugging Face tokenizer.json (attnlab/model/bpe.hpp) into a BPE recipe
// (bpe_recipe.hpp): the model's vocabulary and merges, the added tokens, and the
// normalizer, pre-tokenizer, post-processor and decoder as steps this tokenizer runs.
//
// The file is priced before it is parsed (its size, then its nesting), and each list before
// it is walked (entries, merges, added tokens, steps, a pattern's length). Every field is
// checked as it is read and every refusal names its JSON path, so that the user learns
// which part of the file is wrong or asks for something attnlab does not do:
//   tokenizer.json: pre_tokenizer.pretokenizers[0].behavior: is "MergedWithNextish"; ...
// What a field may say is what Hugging Face's `tokenizers` (the Rust library that writes
// and reads these files) does with it; bpe.hpp lists what is supported.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "attnlab/core/error.hpp"
#include "attnlab/model/bpe.hpp"
#include "tokenizers/bpe_recipe.hpp"

namespace attnlab {

using namespace bpe_detail;

namespace {

using json = nlohmann::json;

constexpr std::string_view kFile = "tokenizer.json";

// What a JSON value is, for "must be X, but is Y".
std::string kind_of(const json* value) {
  if (!value) return "missing";
  switch (value->type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return fmt::format("the string {}", excerpt(value->get_ref<const std::string&>()));
    case json::value_t::boolean: return value->get<bool>() ? "true" : "false";
    case json::value_t::number_unsigned:
    case json::value_t::number_integer:
    case json::value_t::number_float: return fmt::format("the number {}", value->dump());
    default: return "binary data";
  }
}

// A field of tokenizer.json: its value (null when absent) and its JSON path
// ("pre_tokenizer.pretokenizers[0].pattern"), so that each check names what it checks.
class Field {
 public:
  // `file`: what errors are about ("tokenizer.json", or a GGUF file whose metadata the
  // document was made from); it outlives the Field.
  Field(const json* value, std::string path, std::string_view file = kFile)
      : value_(value), path_(std::move(path)), file_(file) {}

  const std::string& path() const { return path_; }
  // Present and not null (Hugging Face writes an unused step as null).
  bool present() const { return value_ && !value_->is_null(); }
  bool is_string() const { return value_ && value_->is_string(); }
  bool is_array() const { return value_ && value_->is_array(); }
  bool has(std::string_view key) const { return value_ && value_->is_object() && value_->contains(key); }
  const json* value() const { return value_; }

  // The member `key` of an object (absent when there is none, or this is not an object).
  Field operator[](std::string_view key) const {
    const json* child = nullptr;
    if (value_ && value_->is_object())
      if (const auto it = value_->find(key); it != value_->end()) child = &*it;
    return Field(child, path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key), file_);
  }
  // Element `index` of an array (the caller has checked the array's size).
  Field operator[](std::size_t index) const {
    return Field(&(*value_)[index], fmt::format("{}[{}]", path_, index), file_);
  }
  // A field beside this one, named `path` (for an entry found by key rather than walked to).
  Field sibling(const json* value, std::string path) const { return Field(value, std::move(path), file_); }

  [[noreturn]] void refuse(std::string_view message) const {
    fail(file_, path_.empty() ? std::string(message) : fmt::format("{}: {}", path_, message));
  }
  [[noreturn]] void must_be(std::string_view what) const {
    refuse(fmt::format("must be {}, but is {}", what, kind_of(value_)));
  }

  const json& object() const {
    if (!value_ || !value_->is_object()) must_be("an object");
    return *value_;
  }
  // An array of at most `limit` elements (`what` names them in the message).
  const json& array(std::size_t limit, std::string_view what) const {
    if (!value_ || !value_->is_array()) must_be("an array");
    if (value_->size() > limit) refuse(fmt::format("has {} {}; the limit is {}", value_->size(), what, limit));
    return *value_;
  }
  const std::string& string() const {
    if (!is_string()) must_be("a string");
    return value_->get_ref<const std::string&>();
  }
  // true or false; `fallback` when absent or null.
  bool flag(bool fallback) const {
    if (!present()) return fallback;
    if (!value_->is_boolean()) must_be("true or false");
    return value_->get<bool>();
  }
  // A whole number from 0 to `limit`.
  std::size_t count(std::size_t limit) const {
    if (!value_ || !value_->is_number_unsigned() || value_->get<std::uint64_t>() > limit)
      must_be(fmt::format("a whole number from 0 to {}", limit));
    return static_cast<std::size_t>(value_->get<std::uint64_t>());
  }
  // An object's "type" member (every step and model in the file has one).
  const std::string& type() const {
    object();
    return (*this)["type"].string();
  }

 private:
  const json* value_;
  std::string path_;
  std::string_view file_;
};

// Refuses a file nested more than kMaxTokenizerJsonDepth deep, by a scan of its brackets
// (outside strings) before the parser builds anything: a document of a million "[" would
// otherwise cost a million nested values.
void check_nesting(std::string_view text) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, whatever it is
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxTokenizerJsonDepth)
        fail(kFile, fmt::format("nests deeper than {} levels (at {}); a tokenizer.json nests a few levels deep",
                                kMaxTokenizerJsonDepth, line_and_column(text, i)));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// ---- model ------------------------------------------------------------------------------

// The vocabulary's keys, both ways, for the checks of the merges and added tokens. The
// views point into the recipe's strings, which stay where they are while it is read.
struct VocabIndex {
  std::unordered_map<std::string_view, TokenId> id_of_key;
  std::vector<const std::string*> key_of_id;  // by id; null for an id no key has
  bool has(std::string_view key) const { return id_of_key.contains(key); }
};

VocabIndex read_vocab(const Field& field, BpeRecipe& recipe) {
  const json& vocab = field.object();
  if (vocab.empty()) field.refuse("has no entries: expected an object of token -> id, like {\"hello\": 31373}");
  if (vocab.size() > kMaxVocabEntries)
    field.refuse(fmt::format("has {} entries; the limit is {}", vocab.size(), kMaxVocabEntries));
  // An entry's path ("model.vocab[hello]") is written out only for its error: a vocabulary
  // has hundreds of thousands of entries.
  const auto entry = [&](const json* value, std::string_view key) {
    return field.sibling(value, fmt::format("{}[{}]", field.path(), excerpt(key)));
  };
  recipe.vocab.reserve(vocab.size());  // never reallocated: VocabIndex points into it
  TokenId largest = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string& key = it.key();
    const json& value = it.value();
    if (key.empty()) entry(&value, key).refuse("a token must not be the empty string");
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() >= kMaxVocabEntries)
      entry(&value, key).must_be(fmt::format("a token id, a whole number from 0 to {}", kMaxVocabEntries - 1));
    const auto id = static_cast<TokenId>(value.get<std::uint64_t>());
    largest = std::max(largest, id);
    recipe.vocab.emplace_back(key, id);
  }
  VocabIndex index;
  index.key_of_id.assign(std::size_t(largest) + 1, nullptr);
  index.id_of_key.reserve(recipe.vocab.size());
  for (const auto& [key, id] : recipe.vocab) {
    if (index.key_of_id[id])
      entry(nullptr, key)
          .refuse(fmt::format("id {} is already the id of {}; ids must be unique", id, excerpt(*index.key_of_id[id])));
    index.key_of_id[id] = &key;
    index.id_of_key.emplace(key, id);
  }
  return index;
}

void read_merges(const Field& field, const VocabIndex& vocab, BpeRecipe& recipe) {
  const json& merges = field.array(kMaxMerges, "merges");
  recipe.merge_ids.reserve(merges.size());
  std::unordered_set<std::uint64_t> seen;  // each pair as its two ids
  seen.reserve(merges.size());
  std::string joined;  // left + right, reused
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    const auto at = [&] { return field[i]; };  // its path, written out only for an error
    std::string_view left, right;
    if (merge.is_string()) {
      // "a b": the older form, which cannot hold a symbol with a space in it.
      const std::string_view line = merge.get_ref<const std::string&>();
      const std::size_t space = line.find(' ');
      if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
        at().refuse(
            fmt::format("is {}; a merge written as a string is two symbols separated by one space, like "
                        "\"Ġ t\" (write a symbol that holds a space in the pair form [\"a\", \"b\"])",
                        excerpt(line)));
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get_ref<const std::string&>();
      right = merge[1].get_ref<const std::string&>();
    } else if (merge.is_array() && merge.size() > 2) {
      at().array(2, "parts");  // refuses: "has 3 parts; the limit is 2"
    } else {
      at().must_be("a merge, \"a b\" or [\"a\", \"b\"]");
    }
    if (left.empty() || right.empty()) at().refuse("a merge joins two non-empty symbols");
    joined.assign(left).append(right);
    std::array<TokenId, 3> ids{};  // left, right, result
    for (int part = 0; part < 3; ++part) {
      const std::string_view symbol = part == 0 ? left : part == 1 ? right : std::string_view(joined);
      const auto it = vocab.id_of_key.find(symbol);
      if (it == vocab.id_of_key.end())
        at().refuse(
            fmt::format("{} is not in model.vocab; every merge's two symbols and its result are tokens "
                        "(as Hugging Face's tokenizers require)",
                        excerpt(symbol)));
      ids[part] = it->second;
    }
    if (!seen.insert((std::uint64_t(ids[0]) << 32) | std::uint32_t(ids[1])).second)
      at().refuse(fmt::format("the merge {} {} appears twice; each pair has one rank", excerpt(left), excerpt(right)));
    recipe.merge_ids.push_back(ids);
  }
}

VocabIndex read_model(const Field& model, BpeRecipe& recipe) {
  model.object();
  if (const Field type = model["type"]; type.present()) {
    if (type.string() != "BPE")
      type.refuse(
          fmt::format("is {}; attnlab reads BPE tokenizers only (byte-level like GPT-2, Llama 3 and Qwen, or "
                      "SentencePiece-style like Llama 2 and Gemma), not WordPiece or Unigram models",
                      excerpt(type.string())));
  } else if (!model["merges"].present()) {
    model.refuse("has no \"type\" and no \"merges\": attnlab reads BPE models only");
  }
  if (const Field dropout = model["dropout"]; dropout.present())
    if (!dropout.value()->is_number() || dropout.value()->get<double>() != 0.0)
      dropout.refuse(
          fmt::format("is {}; BPE dropout picks different tokens at random each time, and attnlab "
                      "encodes the same way every time (null or 0)",
                      kind_of(dropout.value())));
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const Field f = model[affix]; f.present() && !f.string().empty())
      f.refuse(fmt::format("is {}; attnlab's BPE does not mark word pieces (null or \"\")", excerpt(f.string())));
  recipe.ignore_merges = model["ignore_merges"].flag(false);
  recipe.byte_fallback = model["byte_fallback"].flag(false);
  recipe.fuse_unk = model["fuse_unk"].flag(false);

  VocabIndex vocab = read_vocab(model["vocab"], recipe);
  if (const Field unk = model["unk_token"]; unk.present()) {
    if (!vocab.has(unk.string())) unk.refuse(fmt::format("{} is not in model.vocab", excerpt(unk.string())));
    recipe.unk_token = unk.string();
  }
  if (model["merges"].present()) read_merges(model["merges"], vocab, recipe);
  return vocab;
}

// ---- added tokens -------------------------------------------------------------------------

void read_added_tokens(const Field& field, const VocabIndex& vocab, BpeRecipe& recipe) {
  if (!field.present()) return;
  const json& list = field.array(kMaxAddedTokens, "added tokens");
  std::unordered_map<std::string_view, std::size_t> index_of_content;
  std::unordered_map<TokenId, std::size_t> index_of_id;
  recipe.added_tokens.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Field entry = field[i];
    entry.object();
    AddedToken token;
    token.id = static_cast<TokenId>(entry["id"].count(kMaxVocabEntries - 1));
    token.content = entry["content"].string();
    if (token.content.empty()) entry["content"].refuse("an added token must not be the empty string");
    if (token.content.size() > kMaxAddedTokenBytes)
      entry["content"].refuse(
          fmt::format("is {} bytes; an added token may have at most {}", token.content.size(), kMaxAddedTokenBytes));
    token.special = entry["special"].flag(false);
    token.normalized = entry["normalized"].flag(!token.special);  // Hugging Face's default
    token.lstrip = entry["lstrip"].flag(false);
    token.rstrip = entry["rstrip"].flag(false);
    if (entry["single_word"].flag(false))
      entry["single_word"].refuse("is true; attnlab does not match an added token only as a whole word (false)");

    if (const auto it = vocab.id_of_key.find(token.content); it != vocab.id_of_key.end() && it->second != token.id)
      entry.refuse(
          fmt::format("{} has id {} here but {} in model.vocab", excerpt(token.content), token.id, it->second));
    if (std::size_t(token.id) < vocab.key_of_id.size() && vocab.key_of_id[token.id] &&
        *vocab.key_of_id[token.id] != token.content)
      entry.refuse(fmt::format("id {} is {} here but {} in model.vocab", token.id, excerpt(token.content),
                               excerpt(*vocab.key_of_id[token.id])));
    if (const auto [at, added] = index_of_id.try_emplace(token.id, i); !added)
      entry.refuse(fmt::format("id {} is also added_tokens[{}]'s; ids must be unique", token.id, at->second));
    recipe.added_tokens.push_back(std::move(token));
    const std::string& content = recipe.added_tokens.back().content;  // reserved: stays put
    if (const auto [at, added] = index_of_content.try_emplace(content, i); !added)
      entry.refuse(fmt::format("{} is also added_tokens[{}]'s content", excerpt(content), at->second));
  }
}

// ---- normalizer ---------------------------------------------------------------------------

void read_normalizer(const Field& field, std::vector<NormalizeStep>& steps) {
  if (!field.present()) return;
  const std::string& type = field.type();
  using Kind = NormalizeStep::Kind;
  if (type == "Sequence") {
    const Field list = field["normalizers"];
    for (std::size_t i = 0; i < list.array(kMaxSteps, "normalizers").size(); ++i)
      read_normalizer(list[i], steps);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    steps.push_back({type == "NFC" ? Kind::nfc : type == "NFD" ? Kind::nfd : type == "NFKC" ? Kind::nfkc : Kind::nfkd});
  } else if (type == "Prepend") {
    steps.push_back({Kind::prepend, field["prepend"].string()});
  } else if (type == "Replace") {
    const Field pattern = field["pattern"];
    pattern.object();
    if (!pattern.has("String"))
      pattern.refuse("attnlab replaces a fixed string only ({\"String\": \" \"}), not a regular expression");
    if (pattern["String"].string().empty()) pattern["String"].refuse("the string to replace must not be empty");
    steps.push_back({Kind::replace, pattern["String"].string(), field["content"].string()});
  } else {
    field["type"].refuse(
        fmt::format("is {}; attnlab's normalizers are NFC, NFD, NFKC, NFKD, Prepend, Replace (of a "
                    "string) and Sequence",
                    excerpt(type)));
  }
}

// ---- pre_tokenizer ------------------------------------------------------------------------

SplitBehavior read_behavior(const Field& field) {
  const std::string& name = field.string();
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  field.refuse(
      fmt::format("is {}; a split's behavior is Isolated, Removed, MergedWithPrevious, MergedWithNext or "
                  "Contiguous",
                  excerpt(name)));
}

// Metaspace's prepend_scheme, or the older add_prefix_space (true: always).
PreTokenizeStep::Prepend read_prepend(const Field& field) {
  if (const Field scheme = field["prepend_scheme"]; scheme.present()) {
    const std::string& name = scheme.string();
    if (name == "always") return PreTokenizeStep::Prepend::always;
    if (name == "first") return PreTokenizeStep::Prepend::first;
    if (name == "never") return PreTokenizeStep::Prepend::never;
    scheme.refuse(fmt::format("is {}; it is \"always\", \"first\" or \"never\"", excerpt(name)));
  }
  return field["add_prefix_space"].flag(true) ? PreTokenizeStep::Prepend::always : PreTokenizeStep::Prepend::never;
}

// Metaspace's replacement character ("▁" when absent).
std::string read_replacement(const Field& field) {
  const Field replacement = field["replacement"];
  if (!replacement.present()) return "\u2581";
  const std::string& text = replacement.string();
  if (text.empty() || read_utf8(text, 0).length != text.size())
    replacement.refuse(fmt::format("is {}; the replacement is one character, like \"▁\"", excerpt(text)));
  return text;
}

// One pre-tokenizer (or a Sequence of them) as steps. `byte_level` says whether a ByteLevel
// step has been read: it turns the text into byte symbols, so it must come last.
void read_pre_tokenizer(const Field& field, std::vector<PreTokenizeStep>& steps, bool& byte_level) {
  if (!field.present()) return;
  const std::string& type = field.type();
  if (byte_level)
    field.refuse(
        fmt::format("a {} after ByteLevel: ByteLevel turns the text into byte symbols, so it must be the "
                    "last pre-tokenizer",
                    type));
  if (type == "Sequence") {
    const Field list = field["pretokenizers"];
    for (std::size_t i = 0; i < list.array(kMaxSteps, "pre-tokenizers").size(); ++i)
      read_pre_tokenizer(list[i], steps, byte_level);
  } else if (type == "Split") {
    PreTokenizeStep step;
    const Field pattern = field["pattern"];
    pattern.object();
    if (pattern.has("Regex"))
      step.regex = SplitRegex::compile(pattern["Regex"].string(), pattern["Regex"].path());
    else if (pattern.has("String"))
      step.literal = pattern["String"].string();
    else
      pattern.refuse("must be {\"Regex\": ...} or {\"String\": ...}");
    step.behavior = read_behavior(field["behavior"]);
    step.invert = field["invert"].flag(false);
    steps.push_back(std::move(step));
  } else if (type == "Digits") {
    // Hugging Face's Digits splits at each Unicode digit (Rust's char::is_numeric: \p{N}):
    // one piece per digit, or a piece per run of them.
    PreTokenizeStep step;
    step.regex = SplitRegex::compile(R"(\p{N})", field.path() + " (Digits)");
    step.behavior = field["individual_digits"].flag(false) ? SplitBehavior::isolated : SplitBehavior::contiguous;
    steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    PreTokenizeStep step;
    step.kind = PreTokenizeStep::Kind::metaspace;
    step.replacement = read_replacement(field);
    step.prepend = read_prepend(field);
    step.split = field["split"].flag(true);
    steps.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    // ByteLevel: a space in front (add_prefix_space), GPT-2's pattern (use_regex), then the
    // bytes through GPT-2's table (the symbols the model starts from).
    if (field["add_prefix_space"].flag(true)) steps.push_back({PreTokenizeStep::Kind::prefix_space});
    if (field["use_regex"].flag(true)) {
      PreTokenizeStep split;
      split.regex = SplitRegex::gpt2();
      steps.push_back(std::move(split));
    }
    byte_level = true;
  } else {
    field["type"].refuse(
        fmt::format("is {}; attnlab's pre-tokenizers are Split, Digits, Metaspace, ByteLevel and "
                    "Sequence",
                    excerpt(type)));
  }
}

// ---- post_processor -----------------------------------------------------------------------

// Where the template puts a token before the text (Llama 2's "<s>"), bos is its id. The
// tokens it puts after the text, and the "pair" template, are not used: encode() adds no
// token.
void read_post_processor(const Field& field, const VocabIndex& vocab, const BpeRecipe& recipe,
                         std::optional<TokenId>& bos) {
  if (!field.present()) return;
  const std::string& type = field.type();
  if (type == "Sequence") {
    const Field list = field["processors"];
    for (std::size_t i = 0; i < list.array(kMaxSteps, "processors").size(); ++i)
      read_post_processor(list[i], vocab, recipe, bos);
  } else if (type == "ByteLevel") {
    // Only moves offsets, which attnlab does not report.
  } else if (type == "TemplateProcessing") {
    const Field single = field["single"];
    std::vector<std::string> before;  // the special tokens before the text
    bool text_seen = false;
    for (std::size_t i = 0; i < single.array(kMaxSteps, "items").size(); ++i) {
      const Field item = single[i];
      item.object();
      if (item.has("Sequence")) {
        text_seen = true;
      } else if (item.has("SpecialToken")) {
        if (!text_seen) before.push_back(item["SpecialToken"]["id"].string());
      } else {
        item.must_be("{\"SpecialToken\": ...} or {\"Sequence\": ...}");
      }
    }
    if (before.size() > 1)
      single.refuse(fmt::format("puts {} tokens before the text; attnlab gives one, as bos()", before.size()));
    if (before.size() == 1) {
      const Field ids = field["special_tokens"][before[0]]["ids"];
      if (ids.array(1, "ids").size() != 1) ids.must_be("one token id");
      const TokenId id = static_cast<TokenId>(ids[0].count(kMaxVocabEntries - 1));
      const bool known = (std::size_t(id) < vocab.key_of_id.size() && vocab.key_of_id[id]) ||
                         std::any_of(recipe.added_tokens.begin(), recipe.added_tokens.end(),
                                     [&](const AddedToken& t) { return t.id == id; });
      if (!known) ids[0].refuse(fmt::format("token id {} is not in model.vocab or added_tokens", id));
      bos = id;
    }
  } else {
    field["type"].refuse(
        fmt::format("is {}; attnlab reads the post-processors TemplateProcessing, ByteLevel and "
                    "Sequence",
                    excerpt(type)));
  }
}

// ---- decoder --------------------------------------------------------------------------------

// The decoder as rules for each token's bytes. `fused` says whether a Fuse has been read:
// Hugging Face's Strip works on each token, and after Fuse there is one, the whole text,
// which is what DecodeRules strips.
void read_decoder(const Field& field, DecodeRules& rules, bool& fused) {
  if (!field.present()) return;
  const std::string& type = field.type();
  constexpr std::size_t kMaxStrip = 16;
  if (type == "Sequence") {
    const Field list = field["decoders"];
    for (std::size_t i = 0; i < list.array(kMaxSteps, "decoders").size(); ++i)
      read_decoder(list[i], rules, fused);
  } else if (type == "ByteLevel") {
    rules.byte_level = true;
  } else if (type == "ByteFallback") {
    rules.byte_fallback = true;
  } else if (type == "Fuse") {
    fused = true;
  } else if (type == "Replace") {
    const Field pattern = field["pattern"];
    pattern.object();
    if (!pattern.has("String"))
      pattern.refuse("attnlab replaces a fixed string only ({\"String\": \"▁\"}), not a regular expression");
    if (pattern["String"].string().empty()) pattern["String"].refuse("the string to replace must not be empty");
    rules.replace.emplace_back(pattern["String"].string(), field["content"].string());
  } else if (type == "Strip") {
    if (!fused) field.refuse("a Strip before Fuse strips every token; attnlab strips the joined text (put Fuse first)");
    rules.strip = field["content"].string();
    if (rules.strip.empty()) field["content"].refuse("must not be empty");
    rules.strip_start = field["start"].count(kMaxStrip);
    rules.strip_stop = field["stop"].count(kMaxStrip);
  } else if (type == "Metaspace") {
    // "▁" shown as a space, and the one the pre-tokenizer put in front taken off again.
    rules.replace.emplace_back(read_replacement(field), " ");
    if (read_prepend(field) != PreTokenizeStep::Prepend::never) {
      rules.strip = " ";
      rules.strip_start = 1;
    }
  } else {
    field["type"].refuse(
        fmt::format("is {}; attnlab's decoders are ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                    "Metaspace and Sequence",
                    excerpt(type)));
  }
}

// ---- the file ------------------------------------------------------------------------------

BpeRecipe read_tokenizer_json(std::string_view text) {
  if (text.size() > kMaxTokenizerJsonBytes)
    fail(kFile, fmt::format("is {} bytes; the limit is {} bytes ({} MiB)", text.size(), kMaxTokenizerJsonBytes,
                            kMaxTokenizerJsonBytes >> 20));
  check_nesting(text);
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& e) {
    // Not e.what(): it quotes the bytes read, which need not be UTF-8.
    fail(kFile,
         fmt::format("is not valid JSON: the error is at {}", line_and_column(text, e.byte > 0 ? e.byte - 1 : 0)));
  } catch (const json::exception&) {
    // The one other error of the parser: a number beyond a double's range (2E400).
    fail(kFile,
         "holds a number too large to read (beyond a double's range); a tokenizer.json's numbers are ids and "
         "counts");
  }
  return read_tokenizer_document(document, kFile);
}

}  // namespace

namespace bpe_detail {

BpeRecipe read_tokenizer_document(const json& document, std::string_view source) {
  const Field root(&document, "", source);
  if (!document.is_object()) root.must_be("a JSON object (a Hugging Face tokenizer.json)");

  BpeRecipe recipe;
  recipe.dialect = BpeRecipe::Dialect::hugging_face;
  recipe.source = source;
  recipe.vocab_name = fmt::format("{}'s model.vocab", source);
  const VocabIndex vocab = read_model(root["model"], recipe);
  read_added_tokens(root["added_tokens"], vocab, recipe);
  read_normalizer(root["normalizer"], recipe.normalizer);
  bool byte_level = false;
  read_pre_tokenizer(root["pre_tokenizer"], recipe.pre_tokenizer, byte_level);
  recipe.byte_level = byte_level;
  read_post_processor(root["post_processor"], vocab, recipe, recipe.bos);
  bool fused = false;
  read_decoder(root["decoder"], recipe.decoding, fused);
  return recipe;
}

}  // namespace bpe_detail

BpeTokenizer BpeTokenizer::from_tokenizer_json(std::string_view tokenizer_json) {
  return from_recipe(read_tokenizer_json(tokenizer_json));
}

BpeTokenizer BpeTokenizer::load_tokenizer_json(const std::filesystem::path& tokenizer_json) {
  return from_tokenizer_json(read_file_within(tokenizer_json, kMaxTokenizerJsonBytes, kFile));
}

}  // namespace attnlab
