// raise_input_error where exceptions exist (everywhere but the WebAssembly engine).
#include "attnlab/core/error.hpp"

namespace attnlab {

void raise_input_error(const std::string& message) { throw InputError(message); }

}  // namespace attnlab
