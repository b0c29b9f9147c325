// Every operation described once (operations/request.hpp), in one list: GET
// /api/operations serves it (the page's defaults), Python builds its functions'
// signatures from it, `attnlab operations --markdown` writes docs/operations.md from it.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "attnlab/operations/request.hpp"

namespace attnlab {

// cost, kv, model generate, ... in the order docs/operations.md lists them.
std::vector<OperationDescription> operation_descriptions();

// The one called `name`; throws InputError naming "operation" (listing them) otherwise.
OperationDescription operation_description(std::string_view name);

// {"operations": [description_json...]}.
nlohmann::json operations_json();

// Each operation's options as Markdown tables (docs/operations.md's generated part).
std::string operations_markdown();

}  // namespace attnlab
