// The attnlab command: parses the subcommand and its flags, runs it, and turns bad input
// into one clear message on stderr and exit code 2.
#include <fmt/format.h>

#include <cstdio>

#include "attnlab/core/error.hpp"
#include "common.hpp"

int main(int argc, char** argv) {
  using namespace attnlab::cli;
  CLI::App app{"attnlab: an attention laboratory. See every number one attention head computes."};
  app.set_version_flag("--version", ATTNLAB_VERSION);
  app.require_subcommand(0, 1);
  const std::vector<Command> commands{explain_command(app), run_command(app),   scenarios_command(app),
                                      serve_command(app),   bench_command(app), cost_command(app),
                                      kv_command(app),      probe_command(app), model_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    fmt::print(stderr, "attnlab: {}\nRun `attnlab --help` (or `attnlab SUBCOMMAND --help`) for the flags.\n", e.what());
    return 2;
  }
  try {
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
    fmt::print("{}", app.help());
    return 0;
  } catch (const attnlab::InputError& e) {
    fmt::print(stderr, "attnlab: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "attnlab: internal error: {}\nPlease report it with the command you ran.\n", e.what());
    return 1;
  }
}
