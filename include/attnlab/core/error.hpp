// The one error type attnlab raises for bad input (files, flags, requests).
//
// An error names the field it is about ("heads[1].w_k", "options.remove_heads", "--d-model")
// separately from its message, which says the bad value, the limit, and how to fix it. The
// CLI prints "field: message" on stderr and exits with 2; the server answers 400 with
// {"error": "field: message", "field": field}. No face parses a field back out of the text.
// Broken invariants inside the library are assertions, not InputErrors.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnlab {

class InputError : public std::runtime_error {
 public:
  // An error about one field: what() is "field: message".
  InputError(std::string_view field, std::string_view message);
  // An error about no one field (a file that cannot be opened, contradictory flags).
  explicit InputError(const std::string& message);

  const std::string& field() const { return field_; }      // "" when about no one field
  const std::string& message() const { return message_; }  // what() without the field

  // The same error, its field placed under `parent`: "options" + "remove_heads" gives
  // "options.remove_heads", "scenario" + "heads[1].w_k" gives "scenario.heads[1].w_k".
  // An error about no field gets `parent` as its field.
  InputError under(std::string_view parent) const;
  // The same error about another field (the CLI names its flag: "d_model" -> "--d-model").
  InputError renamed(std::string_view field) const;

 private:
  std::string field_;
  std::string message_;
};

// Raises InputError(field, message). Code that the page's WebAssembly engine shares
// (src/wasm/, built without exceptions) raises its errors through this; there it stops the
// engine instead, and the page falls back to asking the server, which says what was wrong.
[[noreturn]] void fail(std::string_view field, std::string_view message);

}  // namespace attnlab
