// The attnlab command as a user runs it: the seeds' numbers on stdout, and for every kind
// of bad input one message on stderr, exit code 2, and nothing on stdout.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `attnlab ARGS` through the shell (ARGS is shell syntax), capturing both streams.
Result attnlab(const std::string& args) {
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

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::path(ATTNLAB_TEST_TMP) / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;  // file names are unique per test
  return p;
}

#define EXPECT_CONTAINS(text, expected) \
  EXPECT_NE((text).find(expected), std::string::npos) << "missing \"" << (expected) << "\" in:\n" << (text)

// Bad input: exit 2, the expected words on stderr, nothing on stdout.
void expect_refused(const std::string& args, const std::string& message) {
  SCOPED_TRACE("attnlab " + args);
  const Result r = attnlab(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_CONTAINS(r.err, message);
  EXPECT_EQ(r.out, "") << "no partial output";
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << "no crash";
}

}  // namespace

TEST(Cli, ExplainWithNoArgumentsWorksSeed000) {
  const Result r = attnlab("explain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"2×1 + 1×2 = 4", "2.12", "8.34 + 2.03 + 16.92 = 27.29", "= 0.69 0.93", "Query 2 \"t3\""})
    EXPECT_CONTAINS(r.out, s);
}

TEST(Cli, ExplainSoftmaxRowWorksSeed001AtThreeDecimals) {
  const Result r = attnlab("explain softmax-row");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "e^2 = 7.389,   e^0.500 = 1.649,   e^-1 = 0.368");
  EXPECT_CONTAINS(r.out, "= 9.406");
  EXPECT_CONTAINS(r.out, "7.389 / 9.406 = 0.786,   1.649 / 9.406 = 0.175,   0.368 / 9.406 = 0.039");
}

TEST(Cli, PrecisionFlagShowsMoreDecimals) {
  const Result r = attnlab("explain --precision 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "e^2.1213 = 8.3421");
}

TEST(Cli, ExplainPreviousTokenQueryFour) {
  const Result r = attnlab("explain previous-token --query 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "largest weight: key 3 \"fox\"");
}

TEST(Cli, ExplainAUserFileWithFlagsOverridingIt) {
  const auto file = write_temp("mine.json", R"({"format": "attnlab-scenario/1", "tokens": ["a", "b"],
    "embeddings": [[1, 0], [0, 1]], "heads": [{"w_q": [[1, 0], [0, 1]], "w_k": [[1, 0], [0, 1]], "w_v": [[1, 0], [0, 1]]}]})");
  const Result r = attnlab("explain " + file.string() + " --causal --temperature 0.1 --query 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "mask: causal, temperature T = 0.10");
  EXPECT_CONTAINS(r.out, "masked: -inf");
}

TEST(Cli, RunJsonFollowsTheTraceContract) {
  const Result r = attnlab("run three-tokens --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"], nlohmann::json::parse(R"(["t1","t2","t3"])"));
  EXPECT_EQ(j["source_tokens"], j["tokens"]);
  EXPECT_NEAR(j["heads"][0]["weights"][2][2].get<double>(), 0.62, 0.005);
  EXPECT_NEAR(j["output"][2][0].get<double>(), 0.69, 0.005);
}

TEST(Cli, RunTakesTheSameFlagsAsExplain) {
  const Result r = attnlab("run three-tokens --json --causal --mask-token 0 --window 2 --temperature 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["heads"][0]["logits"][2][0].is_null());
  EXPECT_TRUE(j["heads"][0]["fully_masked"][0].get<bool>());
  EXPECT_EQ(j["temperature"].get<double>(), 2.0);
}

TEST(Cli, ScenariosListsTheBundledOnesOneLineEach) {
  const Result r = attnlab("scenarios");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"three-tokens", "softmax-row", "previous-token", "random-head", "multi-head", "cross-attention"})
    EXPECT_CONTAINS(r.out, s);
  EXPECT_EQ(r.out.rfind("three-tokens", 0), 0u) << "the default comes first";
}

TEST(Cli, PermuteShowsOutputsUnchangedWithoutPositions) {
  const Result r = attnlab("explain three-tokens --permute 2,0,1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "only its row moved");
}

TEST(CliBadInput, UnknownScenarioFlagAndSubcommand) {
  expect_refused("explain three-tokenz", "unknown scenario \"three-tokenz\"; the bundled ones are:");
  expect_refused("explain --bogus", "--bogus");
  expect_refused("frobnicate", "frobnicate");
}

TEST(CliBadInput, MalformedAndInvalidFiles) {
  expect_refused("explain " + write_temp("broken.json", "{\"format\": ").string(), "malformed JSON at line 1");
  expect_refused("explain " + write_temp("nan.json", "{\"embeddings\": [[NaN]]}").string(), "malformed JSON");
  expect_refused("explain /no/such/scenario.json", "cannot open the file");
  expect_refused("explain " + write_temp("ragged.json", R"({"format": "attnlab-scenario/1", "tokens": ["a", "b"],
    "embeddings": [[1, 0], [0]], "heads": [{"random": 1}]})").string(), "embeddings[1]: ragged matrix");
}

TEST(CliBadInput, BadFlagValues) {
  expect_refused("explain --temperature 0", "temperature: must be a finite number > 0");
  expect_refused("explain --temperature -2", "temperature");
  expect_refused("explain --temperature abc", "--temperature");
  expect_refused("explain --mask-token 9", "mask_tokens[0]: token 9 does not exist");
  expect_refused("explain --query 3", "query: token 3 does not exist");
  expect_refused("explain --head 1", "--head: head 1 does not exist");
  expect_refused("explain --permute 0,0,1", "permute: index 0 appears twice");
  expect_refused("explain --causal --no-causal", "contradict");
  expect_refused("explain cross-attention --causal", "causal: a causal mask needs as many queries as keys");
  expect_refused("explain --precision 40", "--precision: must be 0 to 12");
}
