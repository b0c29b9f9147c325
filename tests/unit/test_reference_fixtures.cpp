// Every intermediate of the engine against traces computed independently in NumPy by
// tests/reference/make_fixtures.py (float64), within |a - b| <= 1e-9 + 1e-9·|ref|.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "attnlab/scenario/scenario.hpp"
#include "compare.hpp"

using namespace attnlab;
using nlohmann::json;

namespace {

Matrix from_json(const json& rows) {
  Matrix m(rows.size(), rows.empty() ? 0 : rows[0].size());
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j)
      m(i, j) = rows[i][j].is_null() ? -std::numeric_limits<double>::infinity() : rows[i][j].get<double>();
  return m;
}

std::vector<std::filesystem::path> fixture_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(ATTNLAB_FIXTURE_DIR))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST(ReferenceFixtures, ThereAreAtLeastADozen) { EXPECT_GE(fixture_files().size(), 12u); }

class ReferenceFixture : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(ReferenceFixture, EveryIntermediateMatchesNumPy) {
  std::ifstream in(GetParam());
  const json fixture = json::parse(in);
  const Scenario scenario = scenario_from_json(fixture["scenario"]);
  const Trace trace = run_scenario(scenario);
  const json& expected = fixture["trace"];

  EXPECT_EQ(trace.tokens, expected["tokens"].get<std::vector<std::string>>());
  EXPECT_EQ(trace.source_tokens, expected["source_tokens"].get<std::vector<std::string>>());
  ASSERT_EQ(trace.heads.size(), expected["heads"].size());
  for (std::size_t h = 0; h < trace.heads.size(); ++h) {
    const HeadTrace& got = trace.heads[h];
    const json& want = expected["heads"][h];
    SCOPED_TRACE("head " + std::to_string(h));
    EXPECT_EQ(got.d_k, want["d_k"].get<std::size_t>());
    EXPECT_EQ(got.d_v, want["d_v"].get<std::size_t>());
    const std::pair<const char*, const Matrix*> grids[] = {{"queries", &got.queries},
                                                           {"keys", &got.keys},
                                                           {"values", &got.values},
                                                           {"scores", &got.scores},
                                                           {"scaled", &got.scaled},
                                                           {"logits", &got.logits},
                                                           {"exponentials", &got.exponentials},
                                                           {"weights", &got.weights},
                                                           {"output", &got.output}};
    for (const auto& [name, matrix] : grids)
      EXPECT_TRUE(test::all_close(*matrix, from_json(want[name]))) << name;
    EXPECT_TRUE(test::all_close(got.row_sums, want["row_sums"].get<std::vector<double>>())) << "row_sums";
    EXPECT_EQ(got.fully_masked, want["fully_masked"].get<std::vector<bool>>());
  }
  EXPECT_TRUE(test::all_close(trace.output, from_json(expected["output"]))) << "layer output";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceFixture, ::testing::ValuesIn(fixture_files()), [](const auto& info) {
  std::string name = info.param.stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});
