// InputError, and fail() where exceptions exist (everywhere but the WebAssembly engine,
// src/wasm/engine.cpp, which defines its own fail()).
#include "attnlab/core/error.hpp"

namespace attnlab {

namespace {
std::string joined(std::string_view field, std::string_view message) {
  return field.empty() ? std::string(message) : std::string(field) + ": " + std::string(message);
}
}  // namespace

InputError::InputError(std::string_view field, std::string_view message)
    : std::runtime_error(joined(field, message)), field_(field), message_(message) {}

InputError::InputError(const std::string& message) : std::runtime_error(message), message_(message) {}

InputError InputError::under(std::string_view parent) const {
  if (field_.empty()) return InputError(parent, message_);
  const bool index = field_.front() == '[';
  return InputError(std::string(parent) + (index ? "" : ".") + field_, message_);
}

InputError InputError::renamed(std::string_view field) const { return InputError(field, message_); }

void fail(std::string_view field, std::string_view message) { throw InputError(field, message); }

}  // namespace attnlab
