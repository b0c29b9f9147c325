// Running the attnlab command as a user would, for the CLI tests: through the shell, both
// streams captured, and bad input checked for exit code 2, its message and no output.
#pragma once
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace attnlab_cli_test {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `attnlab ARGS` through the shell (ARGS is shell syntax), capturing both streams.
inline Result run_attnlab(const std::string& args) {
  const std::filesystem::path dir = ATTNLAB_TEST_TMP;
  std::filesystem::create_directories(dir);
  // CTest runs tests in parallel processes: each run gets files of its own.
  static int runs = 0;
  const std::string stem = std::to_string(getpid()) + "-" + std::to_string(++runs);
  const auto out = dir / (stem + ".out"), err = dir / (stem + ".err");
  const std::string command = std::string("\"") + ATTNLAB_BIN + "\" " + args + " >\"" + out.string() + "\" 2>\"" +
                              err.string() + "\" </dev/null";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// Runs `attnlab` with each argument passed as it is (quoted for the shell: any bytes,
// quotes, newlines and tabs included).
inline Result run_attnlab_argv(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& arg : args) {
    line += " '";
    for (char c : arg)
      line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += "'";
  }
  return run_attnlab(line);
}

inline std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::path(ATTNLAB_TEST_TMP) / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;  // file names are unique per test
  return p;
}

#define EXPECT_CONTAINS(text, expected) \
  EXPECT_NE((text).find(expected), std::string::npos) << "missing \"" << (expected) << "\" in:\n" << (text)

// Bad input: exit 2, the expected words on stderr, nothing on stdout.
inline void expect_refused(const std::string& args, const std::string& message) {
  SCOPED_TRACE("attnlab " + args);
  const Result r = run_attnlab(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.err, message);
  EXPECT_EQ(r.out, "") << "no partial output";
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << "no crash";
}

}  // namespace attnlab_cli_test
