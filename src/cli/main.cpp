// The attnlab command: parses the subcommand and its flags, runs it, and turns bad input
// into one clear message on stderr and exit code 2.
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "attnlab/core/error.hpp"
#include "attnlab/model/blas.hpp"
#include "common.hpp"

namespace {

// OpenBLAS chose its kernels when it loaded; when it fell back to generic code on a CPU it
// does not know (attnlab/model/blas.hpp), start again once with OPENBLAS_CORETYPE set to the
// kernels this CPU runs. ATTNLAB_BLAS_RESTARTED keeps it to one restart.
void restart_with_fitting_blas_kernels(char** argv) {
  if (std::getenv("ATTNLAB_BLAS_RESTARTED")) return;
  const std::optional<std::string> core = attnlab::blas_core_to_use();
  if (!core) return;
  setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
  setenv("ATTNLAB_BLAS_RESTARTED", "1", 1);
  execv("/proc/self/exe", argv);  // returns only if it failed: carry on with the kernels we have
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace

int main(int argc, char** argv) {
  restart_with_fitting_blas_kernels(argv);
  using namespace attnlab::cli;
  CLI::App app{"attnlab: an attention laboratory. See every number one attention head computes."};
  app.set_version_flag("--version", ATTNLAB_VERSION);
  app.require_subcommand(0, 1);
  const std::vector<Command> commands{
      explain_command(app), run_command(app), scenarios_command(app), serve_command(app), bench_command(app),
      cost_command(app),    kv_command(app),  probe_command(app),     model_command(app), train_command(app)};

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
