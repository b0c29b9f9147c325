// The list of operations, and their descriptions as JSON and Markdown.
#include "attnlab/operations/operations.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attnlab/operations/bench.hpp"
#include "attnlab/operations/capacity.hpp"
#include "attnlab/operations/evict.hpp"
#include "attnlab/operations/generate.hpp"
#include "attnlab/operations/model.hpp"
#include "attnlab/operations/survey.hpp"
#include "attnlab/operations/train.hpp"

namespace attnlab {

std::vector<OperationDescription> operation_descriptions() {
  return {describe_operation<CostRequest>(),      describe_operation<KvRequest>(),
          describe_operation<InfoRequest>(),      describe_operation<TokenizeRequest>(),
          describe_operation<RunRequest>(),       describe_operation<MapRequest>(),
          describe_operation<GenerateRequest>(),  describe_operation<ModelKvRequest>(),
          describe_operation<EvictRequest>(),     describe_operation<EvalRequest>(),
          describe_operation<HeadsRequest>(),     describe_operation<SurveyRequest>(),
          describe_operation<AttributeRequest>(), describe_operation<QkRequest>(),
          describe_operation<CircuitsRequest>(),  describe_operation<LensRequest>(),
          describe_operation<PatchRequest>(),     describe_operation<VerdictRequest>(),
          describe_operation<ExportRequest>(),    describe_operation<TrainRequest>(),
          describe_operation<BenchRequest>()};
}

OperationDescription operation_description(std::string_view name) {
  std::vector<std::string_view> names;
  for (OperationDescription& d : operation_descriptions()) {
    if (d.name == name) return d;
    names.push_back(d.name);
  }
  fail("operation", fmt::format("\"{}\" is not an operation; the operations are: {}", text_excerpt(name, 40),
                                fmt::join(names, ", ")));
}

nlohmann::json operations_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const OperationDescription& d : operation_descriptions())
    list.push_back(description_json(d));
  return {{"operations", std::move(list)}};
}

namespace {

// A cell of a Markdown table: "|" escaped.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string default_text(const FieldDescription& f) {
  const nlohmann::json& d = f.default_value;
  if (d.is_null()) return f.info.required ? "required" : "none";
  if (d.is_array()) {
    std::string text;
    for (const nlohmann::json& x : d)
      text += (text.empty() ? "" : ",") + x.dump();
    return text;
  }
  if (d.is_string()) return d.get<std::string>().empty() ? "none" : d.get<std::string>();
  return d.dump();
}

}  // namespace

std::string operations_markdown() {
  std::string out;
  for (const OperationDescription& d : operation_descriptions()) {
    out += fmt::format("### {}\n\n{}.\n\n", d.name, d.help);
    out += "| field (JSON, Python) | command line | kind | default | help |\n|---|---|---|---|---|\n";
    for (const FieldDescription& f : d.fields) {
      std::string name = fmt::format("`{}`", f.info.name),
                  flag = f.info.positional ? fmt::format("`{}` (after the model)", f.info.name)
                                           : fmt::format("`{}`", flag_name(f.info.name));
      if (f.kind == FieldKind::tokens) {
        name += fmt::format(" or `{}`", ids_key(f.info.name));
        flag += fmt::format(" or `{}`", flag_name(ids_key(f.info.name)));
      }
      if (!(f.info.faces & kHttpApi) || !(f.info.faces & kPython)) {  // the faces that take it, where not all
        std::vector<std::string_view> faces;
        if (f.info.faces & kCommandLine) faces.push_back("command line");
        if (f.info.faces & kHttpApi) faces.push_back("API");
        if (f.info.faces & kPython) faces.push_back("Python");
        name += fmt::format(" ({} only)", fmt::join(faces, " and "));
      }
      if (!(f.info.faces & kCommandLine)) flag = "";
      out += fmt::format("| {} | {} | {} | {} | {} |\n", name, flag, kind_name(f.kind), cell(default_text(f)),
                         cell(field_help_line(f, false)));
    }
    out += "\n";
  }
  return out;
}

}  // namespace attnlab
