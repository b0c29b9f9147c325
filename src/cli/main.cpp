// The attnlab command: parses the subcommand and its flags, runs it, and turns bad input
// into one clear message on stderr and exit code 2.
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "attnlab/core/error.hpp"
#include "common.hpp"

namespace {

// Settings read only when the process starts, so set here and the command started again,
// once (ATTNLAB_BLAS_RESTARTED names what was added, and the restarted command removes it
// again for its children), each only where the user has not set it:
// - OPENBLAS_NUM_THREADS=1: OpenBLAS makes no pool of its own (the products share OpenMP's
//   threads, attnlab/model/blas.hpp's gemm);
// - GLIBC_TUNABLES=glibc.malloc.hugetlb=1: malloc asks for transparent huge pages for its
//   large blocks (the forward's buffers, the logits), which are then faulted in 2 MiB at a
//   time instead of 4 KiB: GPT-2 small over 1024 tokens measured 0.88 s → 0.77 s on 2 cores.
void restart_with_fitting_runtime(char** argv) {
  if (const char* added = std::getenv("ATTNLAB_BLAS_RESTARTED")) {
    // Restarted: what was added has been read; the command's children (a browser, rsvg-convert,
    // another attnlab) start from the user's environment.
    for (const char* name : {"OPENBLAS_NUM_THREADS", "GLIBC_TUNABLES"})
      if (std::strstr(added, name)) unsetenv(name);
    unsetenv("ATTNLAB_BLAS_RESTARTED");
    return;
  }
  const bool threads = !std::getenv("OPENBLAS_NUM_THREADS"), pages = !std::getenv("GLIBC_TUNABLES");
  if (!threads && !pages) return;
  std::string added = "added:";
  if (threads) setenv("OPENBLAS_NUM_THREADS", "1", 1), added += " OPENBLAS_NUM_THREADS";
  if (pages) setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1), added += " GLIBC_TUNABLES";
  setenv("ATTNLAB_BLAS_RESTARTED", added.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only if it failed: carry on as we are
  if (threads) unsetenv("OPENBLAS_NUM_THREADS");
  if (pages) unsetenv("GLIBC_TUNABLES");
  unsetenv("ATTNLAB_BLAS_RESTARTED");
}

}  // namespace

int main(int argc, char** argv) {
  restart_with_fitting_runtime(argv);
  using namespace attnlab::cli;
  CLI::App app{"attnlab: an attention laboratory. See every number one attention head computes."};
  app.set_version_flag("--version", ATTNLAB_VERSION);
  app.require_subcommand(0, 1);
  const std::vector<Command> commands{explain_command(app), run_command(app),       scenarios_command(app),
                                      serve_command(app),   bench_command(app),     cost_command(app),
                                      kv_command(app),      probe_command(app),     model_command(app),
                                      train_command(app),   operations_command(app)};

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
