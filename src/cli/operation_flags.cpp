// Flags from an operation's description, and the flags given as its request's JSON body.
#include "operation_flags.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "attnlab/model/model.hpp"
#include "attnlab/operations/operations.hpp"
#include "common.hpp"

namespace attnlab::cli {

using nlohmann::json;

namespace {

// What a flag's value is called in the help: --tokens N,..., --temperature X.
std::string value_name(FieldKind kind) {
  switch (kind) {
    case FieldKind::count: return "N";
    case FieldKind::counts: return "N,...";
    case FieldKind::number: return "X";
    case FieldKind::choice: return "NAME";
    case FieldKind::bytes: return "SIZE";
    case FieldKind::token: return "TOKEN";
    default: return "TEXT";
  }
}

}  // namespace

OperationFlags::OperationFlags(CLI::App& app, OperationDescription description) : description_(std::move(description)) {
  for (const FieldDescription& f : description_.fields) {
    if (!(f.info.faces & kCommandLine)) continue;
    const std::string help = field_help_line(f);
    const auto add = [&](const std::string& key, bool ids, std::string_view short_flag, const std::string& line) {
      Flag& flag = flags_.emplace_back(Flag{f.kind, key, ids});
      const std::string names = f.info.positional    ? key
                                : short_flag.empty() ? flag_name(key)
                                                     : flag_name(key) + "," + std::string(short_flag);
      if (f.kind == FieldKind::flag)
        flag.option = app.add_flag(names, flag.on, line);
      else if (f.kind == FieldKind::heads || f.kind == FieldKind::choices)
        flag.option = app.add_option(names, flag.texts, line + " (repeat the flag, or separate them by commas)")
                          ->type_name(f.kind == FieldKind::heads ? "L.H" : "NAME")
                          ->allow_extra_args(false);
      else
        flag.option = app.add_option(names, flag.text, line)->type_name(ids ? "IDS" : value_name(f.kind));
    };
    if (f.kind == FieldKind::tokens) {
      add(std::string(f.info.name), false, f.info.short_flag, help);
      add(ids_key(f.info.name), true, "",
          fmt::format("Token ids instead of {}, e.g. 15496,995", flag_name(f.info.name)));
    } else {
      add(std::string(f.info.name), false, f.info.short_flag, help);
    }
  }
}

namespace {

// A number written in full ("0.8", "1e-3"), finite.
double parse_number(std::string_view text, std::string_view flag) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    fail(flag, fmt::format("expected a number (e.g. 0.8) but got \"{}\"", text.substr(0, 40)));
  return value;
}

// Token ids separated by commas ("15496,995").
json parse_ids(std::string_view text, std::string_view flag) {
  json ids = json::array();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    int id = -1;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (error != std::errc() || end != item.data() + item.size() || id < 0)
      fail(flag, fmt::format("\"{}\" is not a token id; write ids >= 0 separated by commas, e.g. 15496,995",
                             item.substr(0, 24)));
    if (ids.size() >= kMaxModelPositions) fail(flag, "too many ids");
    ids.push_back(id);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ids;
}

// A token as the command line writes it: digits are its id, anything else its text.
json token_json(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
  return digits ? json(std::stoul(text)) : json(text);
}

// A list given by repeating the flag, each maybe separated by commas ("0.1,1.3").
json list_json(const std::vector<std::string>& texts) {
  json heads = json::array();
  for (const std::string& text : texts)
    for (std::size_t start = 0; start <= text.size();) {
      const std::size_t comma = std::min(text.find(',', start), text.size());
      heads.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
  return heads;
}

}  // namespace

InputError OperationFlags::named(const InputError& error) const {
  for (const FieldDescription& f : description_.fields)
    if (f.info.positional && error.field() == f.info.name) return error;
  return with_flag_name(error);
}

json OperationFlags::body() const {
  json body = json::object();
  for (const Flag& flag : flags_) {
    if (flag.option->count() == 0) continue;
    const std::string name = flag_name(flag.key);
    switch (flag.kind) {
      case FieldKind::flag: body[flag.key] = flag.on; break;
      case FieldKind::count: body[flag.key] = parse_count(flag.text, name); break;
      case FieldKind::counts: body[flag.key] = parse_count_list(flag.text, name); break;
      case FieldKind::number: body[flag.key] = parse_number(flag.text, name); break;
      case FieldKind::tokens: body[flag.key] = flag.ids ? parse_ids(flag.text, name) : json(flag.text); break;
      case FieldKind::token: body[flag.key] = token_json(flag.text); break;
      case FieldKind::heads:
      case FieldKind::choices: body[flag.key] = list_json(flag.texts); break;
      case FieldKind::text:
      case FieldKind::choice:
      case FieldKind::bytes: body[flag.key] = flag.text; break;
      case FieldKind::sequences: break;  // offered to the API and Python only: never a flag
    }
  }
  return body;
}

}  // namespace attnlab::cli

namespace attnlab::cli {

Command operations_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "operations",
      "Every operation's options, described once: the command's flags, the API's fields, Python's keywords");
  auto markdown = std::make_shared<bool>(false);
  app->add_flag("--markdown", *markdown, "As docs/operations.md's tables (the default: JSON, as GET /api/operations)");
  return {app, [markdown]() {
            fmt::print("{}", *markdown ? operations_markdown() : operations_json().dump(2) + "\n");
            return 0;
          }};
}

}  // namespace attnlab::cli
