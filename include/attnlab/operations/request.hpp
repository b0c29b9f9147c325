// An operation's request, described once. Each request type (capacity.hpp, generate.hpp,
// model.hpp) lists its fields in one `for_each`, each with its name, help, unit,
// range or choices and the faces that offer it; the default is the member's own initial
// value. From that one list come the command's flags, the HTTP body's reader and its
// errors, Python's keyword arguments, the defaults the page shows and docs/operations.md
// (the way gemma.cpp's InferenceArgs::ForEach lists each option once).
//
//   struct CostRequest {
//     std::vector<std::uint64_t> tokens;
//     CostShape shape;                       // d_model = 4096, ... (the library's defaults)
//     template <class Visit> void for_each(Visit&& field) {
//       field(tokens, {.name = "tokens", .help = "Context lengths n", .unit = "tokens", .required = true});
//       field(shape.d_model, {.name = "d_model", .help = "Embedding width d_model = H · d_k"});
//       ...
//
// Every face turns what it was given into one JSON object (the command line's text is
// read by each field's kind first) and calls read_request(), so one reader checks every
// value and names the field as JSON spells it; each face renames the field its own way
// in the error (--d-model, d_model) and reports it in its idiom (exit 2, 400, ValueError).
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "attnlab/core/dtype.hpp"
#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"
#include "attnlab/model/forward.hpp"

namespace attnlab {

// The faces that offer a field (a bit each). A field that writes a file on this machine
// (--plot) is the command line's alone.
enum Face : unsigned { kCommandLine = 1u, kHttpApi = 2u, kPython = 4u, kEveryFace = 7u };

// A token sequence as a user gives one: text for the model's tokenizer, or token ids.
// In JSON and Python a field named `text` is a string and its ids are a second key `ids`
// (for any other name N: N and N_ids); the command line has --text and --ids.
struct TokenInput {
  std::optional<std::string> text;
  std::optional<std::vector<int>> ids;
  bool given() const { return text || ids; }
};
// The key that carries a token field's ids: "text" -> "ids", "clean" -> "clean_ids".
std::string ids_key(std::string_view token_field);

// One token of the model's vocabulary: its id, or text that the tokenizer makes one token of
// (JSON: a number or a string; the command line: digits are an id).
struct TokenRef {
  std::optional<std::string> text;
  std::optional<std::uint64_t> id;
  bool given() const { return text || id; }
};

// Heads of a model written "L.H" (JSON: a list of such strings; the command line: the flag
// repeated, or heads separated by commas).
using HeadList = std::vector<HeadRef>;

// Several token sequences, each a list of ids (JSON and Python: a list of lists).
using IdSequences = std::vector<std::vector<int>>;

// A size in bytes that may be written with a unit ("24GiB", "1.5GB") or as a number.
struct ByteSize {
  std::optional<std::uint64_t> bytes;
};

// One field of a request, as its request type describes it.
struct FieldInfo {
  std::string_view name;       // as JSON and Python spell it (snake_case); the command line: --kebab-case
  std::string_view help;       // one line, starting with a capital
  std::string_view unit = "";  // "tokens", "bytes", ... or "" when it has none
  CountRange range = {};       // a count, or each count of a list
  std::size_t max_items = 64;  // a list of counts
  double low = -std::numeric_limits<double>::infinity(), high = std::numeric_limits<double>::infinity();  // a number
  std::span<const std::string_view> choices = {};  // a text that must be one of these
  bool required = false;
  unsigned faces = kEveryFace;
  std::string_view short_flag = "";  // the command line's one-letter form, "-n"
  bool positional = false;           // the command line takes it without a flag, after the model
  // The range is the command's, shown in its help and the docs; the operation's own check
  // holds each face to its limits (the lab's are narrower), so the reader does not check it.
  bool range_checked_later = false;
  std::string_view example = "";  // how to write it, for the message when it is missing
};

// What kind of value a field holds, from its member's type: "flag" (bool), "count"
// (std::uint64_t, or std::optional of it), "counts" (a list of them), "number" (double),
// "text" (std::string, std::optional of it), "choice" (a text with choices, a DType or a CacheType),
// "bytes" (ByteSize), "tokens" (TokenInput), "token" (TokenRef), "heads" (HeadList),
// "choices" (std::vector<std::string>, each one of the field's choices), "sequences"
// (IdSequences: lists of token ids).
enum class FieldKind { flag, count, counts, number, text, choice, bytes, tokens, token, heads, choices, sequences };
std::string_view kind_name(FieldKind kind);

// A field as the faces read it: its description, its kind and its default as JSON (null
// where it has none).
struct FieldDescription {
  FieldInfo info;
  FieldKind kind;
  nlohmann::json default_value;
  bool optional = false;  // may be left out without a default (null): std::optional, ByteSize, TokenInput
};

struct OperationDescription {
  std::string_view name;  // "cost", "kv", "model generate"
  std::string_view help;
  std::vector<FieldDescription> fields;
};

// ---- the kinds, one overload per member type ----------------------------------------------

// The description of a member of each type (its kind and its value as JSON).
FieldDescription describe_field(const bool& member, const FieldInfo& info);
FieldDescription describe_field(const std::uint64_t& member, const FieldInfo& info);
FieldDescription describe_field(const std::optional<std::uint64_t>& member, const FieldInfo& info);
FieldDescription describe_field(const std::vector<std::uint64_t>& member, const FieldInfo& info);
FieldDescription describe_field(const double& member, const FieldInfo& info);
FieldDescription describe_field(const std::string& member, const FieldInfo& info);
FieldDescription describe_field(const std::optional<std::string>& member, const FieldInfo& info);
FieldDescription describe_field(const DType& member, const FieldInfo& info);
FieldDescription describe_field(const CacheType& member, const FieldInfo& info);
FieldDescription describe_field(const ByteSize& member, const FieldInfo& info);
FieldDescription describe_field(const TokenInput& member, const FieldInfo& info);
FieldDescription describe_field(const TokenRef& member, const FieldInfo& info);
FieldDescription describe_field(const HeadList& member, const FieldInfo& info);
FieldDescription describe_field(const std::vector<std::string>& member, const FieldInfo& info);
FieldDescription describe_field(const IdSequences& member, const FieldInfo& info);

// Reads `value` (present and not null) into a member of each type, checked against the
// field's range or choices; InputError names info.name (or "name[k]" for a list's item).
void read_field(const nlohmann::json& value, const FieldInfo& info, bool& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, std::uint64_t& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, std::optional<std::uint64_t>& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, std::vector<std::uint64_t>& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, double& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, std::string& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, std::optional<std::string>& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, DType& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, CacheType& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, ByteSize& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, TokenRef& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, HeadList& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, std::vector<std::string>& member);
void read_field(const nlohmann::json& value, const FieldInfo& info, IdSequences& member);
// A token field reads its own two keys from the whole body (text, or ids; not both).
void read_tokens(const nlohmann::json& body, const FieldInfo& info, TokenInput& member);

// The member as a request's JSON writes it (request_json).
nlohmann::json field_json(bool member);
nlohmann::json field_json(std::uint64_t member);
nlohmann::json field_json(const std::optional<std::uint64_t>& member);
nlohmann::json field_json(const std::vector<std::uint64_t>& member);
nlohmann::json field_json(double member);
nlohmann::json field_json(const std::string& member);
nlohmann::json field_json(const std::optional<std::string>& member);
nlohmann::json field_json(DType member);
nlohmann::json field_json(CacheType member);
nlohmann::json field_json(const ByteSize& member);
nlohmann::json field_json(const TokenInput& member);
nlohmann::json field_json(const TokenRef& member);
nlohmann::json field_json(const HeadList& member);
nlohmann::json field_json(const std::vector<std::string>& member);
nlohmann::json field_json(const IdSequences& member);

// The JSON keys a field takes (a token field two: text and ids).
std::vector<std::string> field_keys(const FieldDescription& field);

// Refuses a body that is not an object, or that has a key no field offered by `face` takes.
void check_body_keys(const nlohmann::json& body, const OperationDescription& description, Face face);

// What a required field's absence is called: "missing; give ..., e.g. 3,6,100000".
std::string fmt_missing(const FieldInfo& info, bool tokens);

// ---- a request type's description, reader and writer -----------------------------------

template <class Request>
OperationDescription describe_operation() {
  OperationDescription d{Request::kName, Request::kHelp, {}};
  Request defaults{};
  defaults.for_each(
      [&](const auto& member, const FieldInfo& info) { d.fields.push_back(describe_field(member, info)); });
  return d;
}

// The request `body` asks for, as `face` gives it: every field offered there read and
// checked, the rest left at their defaults. Throws InputError naming the field.
template <class Request>
Request read_request(const nlohmann::json& body, Face face) {
  check_body_keys(body, describe_operation<Request>(), face);
  Request r{};
  r.for_each([&](auto& member, const FieldInfo& info) {
    using Member = std::remove_cvref_t<decltype(member)>;
    if constexpr (std::is_same_v<Member, TokenInput>) {
      read_tokens(body, info, member);
      if (info.required && !member.given()) fail(info.name, fmt_missing(info, true));
    } else {
      const auto it = body.find(info.name);
      if (it != body.end() && !it->is_null())
        read_field(*it, info, member);
      else if (info.required)
        fail(info.name, fmt_missing(info, false));
    }
  });
  return r;
}

// A request as JSON: every field, defaults included (the reply says what was computed).
template <class Request>
nlohmann::json request_json(Request r) {
  nlohmann::json out = nlohmann::json::object();
  r.for_each([&](const auto& member, const FieldInfo& info) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(member)>, TokenInput>) {
      if (member.ids)
        out[ids_key(info.name)] = *member.ids;
      else
        out[std::string(info.name)] = field_json(member);
    } else {
      out[std::string(info.name)] = field_json(member);
    }
  });
  return out;
}

// The description as JSON: {"name", "help", "fields": [{"name", "kind", "default", "help",
// "unit", "required", "min", "max", "choices", "faces", "flag"}]} (GET /api/operations,
// Python's signatures, docs/operations.md).
nlohmann::json description_json(const OperationDescription& d);

// The command line's spelling of a field: "d_model" -> "--d-model".
std::string flag_name(std::string_view field);

// One line that says what a field takes: its help, unit, default, range or choices
// ("Context lengths (tokens; default 4096,32768,131072; each 1 or more)"); docs/operations.md
// gives the default in a column of its own.
std::string field_help_line(const FieldDescription& field, bool with_default = true);

}  // namespace attnlab
