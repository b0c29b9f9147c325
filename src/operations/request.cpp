// The field kinds of operations/request.hpp: how each is described, read from JSON,
// checked against its range or choices, and written back.
#include "attnlab/operations/request.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "attnlab/analysis/units.hpp"
#include "attnlab/model/model.hpp"

namespace attnlab {

using nlohmann::json;

namespace {

constexpr std::string_view kDTypes[] = {"f32", "f16", "bf16"};
constexpr std::string_view kCacheTypes[] = {"f32", "f16", "bf16", "q8_0"};

FieldDescription described(const FieldInfo& info, FieldKind kind, json value, bool optional = false) {
  return {info, kind, std::move(value), optional};
}

void check_choice(const std::string& value, const FieldInfo& info) {
  if (info.choices.empty()) return;
  if (std::find(info.choices.begin(), info.choices.end(), value) == info.choices.end())
    fail(info.name,
         fmt::format("\"{}\" is not a choice; give one of {}", text_excerpt(value, 40), fmt::join(info.choices, ", ")));
}

std::string count_range_text(const CountRange& r) {
  if (r.high != std::numeric_limits<std::uint64_t>::max()) return fmt::format("{} to {}", r.low, r.high);
  return r.low > 0 ? fmt::format("{} or more", r.low) : "";
}

}  // namespace

std::string ids_key(std::string_view token_field) {
  return token_field == "text" ? std::string("ids") : std::string(token_field) + "_ids";
}

std::string_view kind_name(FieldKind kind) {
  switch (kind) {
    case FieldKind::flag: return "flag";
    case FieldKind::count: return "count";
    case FieldKind::counts: return "counts";
    case FieldKind::number: return "number";
    case FieldKind::text: return "text";
    case FieldKind::choice: return "choice";
    case FieldKind::bytes: return "bytes";
    case FieldKind::tokens: return "tokens";
    case FieldKind::token: return "token";
    case FieldKind::heads: return "heads";
    case FieldKind::choices: return "choices";
    case FieldKind::sequences: return "sequences";
  }
  return "?";
}

// ---- describe --------------------------------------------------------------------------------

FieldDescription describe_field(const bool& m, const FieldInfo& info) { return described(info, FieldKind::flag, m); }
FieldDescription describe_field(const std::uint64_t& m, const FieldInfo& info) {
  return described(info, FieldKind::count, m);
}
FieldDescription describe_field(const std::optional<std::uint64_t>& m, const FieldInfo& info) {
  return described(info, FieldKind::count, field_json(m), true);
}
FieldDescription describe_field(const std::vector<std::uint64_t>& m, const FieldInfo& info) {
  return described(info, FieldKind::counts, m.empty() ? json(nullptr) : json(m));
}
FieldDescription describe_field(const double& m, const FieldInfo& info) {
  return described(info, FieldKind::number, m);
}
FieldDescription describe_field(const std::string& m, const FieldInfo& info) {
  return described(info, info.choices.empty() ? FieldKind::text : FieldKind::choice, m);
}
FieldDescription describe_field(const std::optional<std::string>& m, const FieldInfo& info) {
  return described(info, info.choices.empty() ? FieldKind::text : FieldKind::choice, field_json(m), true);
}
FieldDescription describe_field(const DType& m, const FieldInfo& info) {
  FieldInfo with_choices = info;
  with_choices.choices = kDTypes;
  return described(with_choices, FieldKind::choice, field_json(m));
}
FieldDescription describe_field(const CacheType& m, const FieldInfo& info) {
  FieldInfo with_choices = info;
  with_choices.choices = kCacheTypes;
  return described(with_choices, FieldKind::choice, field_json(m));
}
FieldDescription describe_field(const ByteSize& m, const FieldInfo& info) {
  return described(info, FieldKind::bytes, field_json(m), true);
}
FieldDescription describe_field(const TokenInput&, const FieldInfo& info) {
  return described(info, FieldKind::tokens, nullptr, true);
}
FieldDescription describe_field(const TokenRef&, const FieldInfo& info) {
  return described(info, FieldKind::token, nullptr, true);
}
FieldDescription describe_field(const HeadList& m, const FieldInfo& info) {
  return described(info, FieldKind::heads, field_json(m));
}
FieldDescription describe_field(const std::vector<std::string>& m, const FieldInfo& info) {
  return described(info, FieldKind::choices, field_json(m));
}
FieldDescription describe_field(const IdSequences& m, const FieldInfo& info) {
  return described(info, FieldKind::sequences, m.empty() ? json(nullptr) : json(m), true);
}

// ---- read ------------------------------------------------------------------------------------

void read_field(const json& v, const FieldInfo& info, bool& m) { m = read_flag(v, info.name); }
namespace {
CountRange reader_range(const FieldInfo& info) { return info.range_checked_later ? CountRange{} : info.range; }
}  // namespace

void read_field(const json& v, const FieldInfo& info, std::uint64_t& m) {
  m = read_count(v, info.name, reader_range(info));
}
void read_field(const json& v, const FieldInfo& info, std::optional<std::uint64_t>& m) {
  m = read_count(v, info.name, reader_range(info));
}
void read_field(const json& v, const FieldInfo& info, std::vector<std::uint64_t>& m) {
  // One count stands for a list of one.
  m = v.is_array() ? read_count_list(v, info.name, info.max_items, info.range)
                   : std::vector<std::uint64_t>{read_count(v, info.name, info.range)};
  if (m.empty()) fail(info.name, fmt::format("is an empty list; give 1 to {} numbers", info.max_items));
}
void read_field(const json& v, const FieldInfo& info, double& m) {
  m = read_number(v, info.name);
  if (!info.range_checked_later && (m < info.low || m > info.high))
    fail(info.name, fmt::format("{} is outside {} to {}", m, info.low, info.high));
}
void read_field(const json& v, const FieldInfo& info, std::string& m) {
  m = read_string(v, info.name);
  check_choice(m, info);
}
void read_field(const json& v, const FieldInfo& info, std::optional<std::string>& m) {
  std::string text;
  read_field(v, info, text);
  m = std::move(text);
}
void read_field(const json& v, const FieldInfo& info, DType& m) {
  m = parse_dtype(read_string(v, info.name), info.name);
}
void read_field(const json& v, const FieldInfo& info, CacheType& m) {
  m = parse_cache_type(read_string(v, info.name), info.name);
}
void read_field(const json& v, const FieldInfo& info, ByteSize& m) {
  m.bytes = v.is_string() ? parse_byte_size(v.get<std::string>(), info.name) : read_count(v, info.name);
  if (*m.bytes == 0) fail(info.name, "is 0 bytes; give a size such as \"24GiB\" or a number of bytes");
}

void read_field(const json& v, const FieldInfo& info, TokenRef& m) {
  if (v.is_string())
    m.text = v.get<std::string>();
  else if (v.is_number_integer())
    m.id = read_count(v, info.name);  // checked against the model's vocabulary when it runs
  else
    fail(info.name, fmt::format("expected a token (its text, or its id) but got {}", json_kind(v)));
}
void read_field(const json& v, const FieldInfo& info, HeadList& m) {
  const json list = v.is_array() ? v : json::array({v});  // one head stands for a list of one
  if (list.size() > info.max_items)
    fail(info.name, fmt::format("{} heads; give at most {}", list.size(), info.max_items));
  m.clear();
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string field = v.is_array() ? fmt::format("{}[{}]", info.name, k) : std::string(info.name);
    if (!list[k].is_string()) fail(field, "expected a head as \"LAYER.HEAD\", e.g. \"1.3\"");
    const HeadRef h = parse_head_ref(list[k].get<std::string>(), field);
    if (std::find(m.begin(), m.end(), h) == m.end()) m.push_back(h);  // once each
  }
}

void read_field(const json& v, const FieldInfo& info, std::vector<std::string>& m) {
  if (!v.is_array()) fail(info.name, fmt::format("expected a list of names but got {}", json_kind(v)));
  if (v.size() > info.max_items) fail(info.name, fmt::format("{} items; give at most {}", v.size(), info.max_items));
  m.clear();
  for (std::size_t k = 0; k < v.size(); ++k) {
    FieldInfo item = info;
    const std::string field = fmt::format("{}[{}]", info.name, k);
    item.name = field;
    std::string name;
    read_field(v[k], item, name);  // a text, one of the choices
    if (std::find(m.begin(), m.end(), name) == m.end()) m.push_back(std::move(name));
  }
}

void read_field(const json& v, const FieldInfo& info, IdSequences& m) {
  if (!v.is_array()) fail(info.name, fmt::format("expected a list of token-id lists but got {}", json_kind(v)));
  if (v.size() > info.max_items)
    fail(info.name, fmt::format("{} sequences; give at most {}", v.size(), info.max_items));
  m.clear();
  for (std::size_t k = 0; k < v.size(); ++k) {
    TokenInput ids;
    read_tokens({{"ids", v[k]}}, {.name = "text"}, ids);  // each checked as a token field's ids
    m.push_back(*ids.ids);
  }
}

void read_tokens(const json& body, const FieldInfo& info, TokenInput& m) {
  const std::string ids_name = ids_key(info.name);
  const auto text = body.find(info.name), ids = body.find(ids_name);
  const bool has_text = text != body.end() && !text->is_null(), has_ids = ids != body.end() && !ids->is_null();
  if (has_text && has_ids) fail(ids_name, fmt::format("give {} or {}, not both", info.name, ids_name));
  if (has_text) m.text = read_string(*text, info.name);
  if (!has_ids) return;
  if (!ids->is_array()) fail(ids_name, fmt::format("expected a list of token ids but got {}", describe_json(*ids)));
  const std::vector<std::uint64_t> values = read_count_list(*ids, ids_name, kMaxModelPositions);
  m.ids.emplace();
  for (std::size_t k = 0; k < values.size(); ++k) {
    if (values[k] >= kMaxModelVocabulary)  // no model has it; checked against the model's own when it runs
      fail(fmt::format("{}[{}]", ids_name, k), fmt::format("token id {} is outside every vocabulary", values[k]));
    m.ids->push_back(static_cast<int>(values[k]));
  }
}

std::string fmt_missing(const FieldInfo& info, bool tokens) {
  const std::string what =
      tokens ? fmt::format("give {} or {}", info.name, ids_key(info.name)) : fmt::format("give {}", info.name);
  return info.example.empty() ? fmt::format("missing; {}", what)
                              : fmt::format("missing; {}, e.g. {}", what, info.example);
}

// ---- write -----------------------------------------------------------------------------------

json field_json(bool m) { return m; }
json field_json(std::uint64_t m) { return m; }
json field_json(const std::optional<std::uint64_t>& m) { return m ? json(*m) : json(nullptr); }
json field_json(const std::vector<std::uint64_t>& m) { return m; }
json field_json(double m) { return m; }
json field_json(const std::string& m) { return m; }
json field_json(const std::optional<std::string>& m) { return m ? json(*m) : json(nullptr); }
json field_json(DType m) { return dtype_name(m); }
json field_json(CacheType m) { return cache_type_name(m); }
json field_json(const ByteSize& m) { return field_json(m.bytes); }
json field_json(const TokenRef& m) {
  if (m.id) return *m.id;
  return m.text ? json(*m.text) : json(nullptr);
}
json field_json(const HeadList& m) {
  json list = json::array();
  for (const HeadRef& h : m)
    list.push_back(to_string(h));
  return list;
}
json field_json(const std::vector<std::string>& m) { return m; }
json field_json(const IdSequences& m) { return m; }
json field_json(const TokenInput& m) {
  if (m.ids) return *m.ids;
  return m.text ? json(*m.text) : json(nullptr);
}

// ---- the body, the description ---------------------------------------------------------------

std::vector<std::string> field_keys(const FieldDescription& field) {
  std::vector<std::string> keys{std::string(field.info.name)};
  if (field.kind == FieldKind::tokens) keys.push_back(ids_key(field.info.name));
  return keys;
}

void check_body_keys(const json& body, const OperationDescription& d, Face face) {
  if (!body.is_object()) fail("body", fmt::format("expected a JSON object but got {}", json_kind(body)));
  std::vector<std::string> known;
  for (const FieldDescription& f : d.fields)
    if (f.info.faces & face)
      for (std::string& key : field_keys(f))
        known.push_back(std::move(key));
  for (const auto& [key, value] : body.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(text_excerpt(key, 40), fmt::format("unknown field (known: {})", fmt::join(known, ", ")));
}

std::string flag_name(std::string_view field) {
  std::string flag = "--" + std::string(field);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

json description_json(const OperationDescription& d) {
  json fields = json::array();
  for (const FieldDescription& f : d.fields) {
    json faces = json::array();
    if (f.info.faces & kCommandLine) faces.push_back("cli");
    if (f.info.faces & kHttpApi) faces.push_back("api");
    if (f.info.faces & kPython) faces.push_back("python");
    json field = {
        {"name", f.info.name},        {"kind", kind_name(f.kind)},
        {"default", f.default_value}, {"help", f.info.help},
        {"unit", f.info.unit},        {"required", f.info.required},
        {"faces", std::move(faces)},  {"flag", f.info.positional ? std::string(f.info.name) : flag_name(f.info.name)}};
    if (f.kind == FieldKind::tokens) field["ids"] = ids_key(f.info.name);
    if (f.kind == FieldKind::count || f.kind == FieldKind::counts) {
      field["min"] = f.info.range.low;
      field["max"] =
          f.info.range.high == std::numeric_limits<std::uint64_t>::max() ? json(nullptr) : json(f.info.range.high);
    }
    if (f.kind == FieldKind::number) {
      field["min"] = std::isfinite(f.info.low) ? json(f.info.low) : json(nullptr);
      field["max"] = std::isfinite(f.info.high) ? json(f.info.high) : json(nullptr);
    }
    if (f.kind == FieldKind::counts) field["max_items"] = f.info.max_items;
    if (!f.info.choices.empty()) field["choices"] = f.info.choices;
    fields.push_back(std::move(field));
  }
  return {{"name", d.name}, {"help", d.help}, {"fields", std::move(fields)}};
}

std::string field_help_line(const FieldDescription& f, bool with_default) {
  std::vector<std::string> notes;
  if (!f.info.unit.empty()) notes.emplace_back(f.info.unit);
  if (with_default && f.info.required) notes.emplace_back("required");
  const json& d = f.default_value;
  if (with_default && !d.is_null() && !(d.is_boolean() && !d.get<bool>()) &&
      !(d.is_string() && d.get<std::string>().empty())) {
    std::string text;
    if (d.is_array())
      for (const json& x : d)
        text += (text.empty() ? "" : ",") + x.dump();
    else
      text = d.is_string() ? d.get<std::string>() : d.dump();
    notes.push_back("default " + text);
  }
  if (f.kind == FieldKind::count || f.kind == FieldKind::counts)
    if (std::string range = count_range_text(f.info.range); !range.empty())
      notes.push_back((f.kind == FieldKind::counts ? "each " : "") + range);
  if (f.kind == FieldKind::number && std::isfinite(f.info.low) && std::isfinite(f.info.high))
    notes.push_back(fmt::format("{} to {}", f.info.low, f.info.high));
  if (!f.info.choices.empty()) notes.push_back(fmt::format("{}", fmt::join(f.info.choices, ", ")));
  if (notes.empty()) return std::string(f.info.help);
  return fmt::format("{} ({})", f.info.help, fmt::join(notes, "; "));
}

}  // namespace attnlab
