// Parsing a whole JSON document from someone else, priced first (attnlab/core/json.hpp).
// Apart from json.cpp because it catches the parser's exceptions: the page's WebAssembly
// engine, built without exceptions, compiles json.cpp but not this file.
#include <fmt/format.h>

#include "attnlab/core/error.hpp"
#include "attnlab/core/json.hpp"

namespace attnlab {

using nlohmann::json;

std::string line_and_column(std::string_view text, std::size_t byte) {
  std::size_t line = 1, column = 1;
  for (std::size_t k = 0; k < byte && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

json parse_json_document(std::string_view text, std::string_view origin, std::size_t max_values) {
  const JsonShape shape = json_shape(text);
  if (shape.depth > kMaxJsonDepth)
    fail(origin,
         fmt::format("nested more than {} levels deep; no attnlab document needs more than a few", kMaxJsonDepth));
  if (shape.values > max_values)
    fail(origin, fmt::format("holds {} JSON values (numbers, strings, lists, objects), more than the limit of {}; "
                             "send a smaller document",
                             shape.values, max_values));
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(origin,
         fmt::format("malformed JSON at {}: expected one JSON object (check for a missing comma, quote or bracket; "
                     "NaN and Infinity are not JSON numbers)",
                     line_and_column(text, e.byte == 0 ? 0 : e.byte - 1)));
  } catch (const json::exception& e) {  // e.g. 1e999: a number too large for a double
    std::string what = e.what();
    if (const auto end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
    fail(origin, fmt::format("{}; every number must be finite", what));
  }
}

}  // namespace attnlab
