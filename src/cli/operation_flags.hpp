// The command line's face of an operation (operations/request.hpp): its flags made from
// the operation's description, and the flags given turned into the JSON body that
// read_request() reads, so that the command checks and defaults exactly as the API and
// Python do. The command adds nothing of its own but --json and what picks the model.
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>

#include "attnlab/operations/request.hpp"
#include "numbers.hpp"

namespace attnlab::cli {

class OperationFlags {
 public:
  // Adds a flag to `app` for every field the command line offers (--d-model for d_model;
  // --text and --ids for a token field), with the field's help, unit, default and range.
  OperationFlags(CLI::App& app, OperationDescription description);

  // The flags given, as the JSON body of the request: each text read by its field's kind
  // ("4096,32768" a list of counts). Throws InputError naming the flag for text that is not
  // of its kind.
  nlohmann::json body() const;

  // The error with its field as the command line spells it: --d-model for a flag, the
  // positional's own name for a positional (text).
  InputError named(const InputError& error) const;

 private:
  struct Flag {
    FieldKind kind;
    std::string key;   // the JSON key ("d_model", or a token field's "ids")
    bool ids = false;  // a token field's --ids
    CLI::Option* option = nullptr;
    std::string text;
    std::vector<std::string> texts;  // a list given by repeating the flag (heads)
    bool on = false;
  };
  OperationDescription description_;
  std::deque<Flag> flags_;  // CLI11 holds pointers into these
};

// What `work` returns, its errors naming the flags rather than the library's fields
// ("target" -> --target).
template <class Work>
auto naming_flags(Work&& work) {
  try {
    return work();
  } catch (const InputError& e) {
    throw with_flag_name(e);
  }
}

// The request the flags ask for, checked; an error names the flag (--top-k).
template <class Request>
Request read_flags(const OperationFlags& flags) {
  try {
    return read_request<Request>(flags.body(), kCommandLine);
  } catch (const InputError& e) {
    throw flags.named(e);
  }
}

}  // namespace attnlab::cli
