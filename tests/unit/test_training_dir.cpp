// A training run's directory (attnlab/analysis/training_dir.hpp): what run_training writes
// when it runs to the end and when it is stopped, what a second run into the same directory
// leaves, and how the directory is read back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "attnlab/analysis/training_dir.hpp"
#include "attnlab/core/error.hpp"

using namespace attnlab;
namespace fs = std::filesystem;

namespace {

TrainSettings tiny(std::size_t steps, std::size_t log_every, std::size_t checkpoint_every) {
  TrainSettings s;
  s.layers = 1, s.heads = 2, s.d_model = 8, s.context = 12, s.vocab = 10, s.batch = 2;
  s.steps = steps, s.log_every = log_every, s.checkpoint_every = checkpoint_every;
  return s;
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class TrainingDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnlab-training-dir-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

}  // namespace

TEST_F(TrainingDir, ARunWritesItsLogItsCheckpointsAndTheFinalModel) {
  std::vector<std::size_t> logged;
  const TrainingOutcome outcome = run_training(tiny(25, 10, 20), dir_, [&](const TrainLog& log) {
    logged.push_back(log.step);
    // train.json holds this entry by the time on_log is called
    EXPECT_EQ(read_train_json(dir_)["log"].back()["step"], log.step);
  });
  EXPECT_EQ(logged, (std::vector<std::size_t>{0, 10, 20, 25}));
  EXPECT_FALSE(outcome.stopped);
  EXPECT_EQ(outcome.last_step, 25u);
  // every multiple of checkpoint_every that was logged, and the last step
  EXPECT_EQ(outcome.checkpoints, (std::vector<std::size_t>{0, 20, 25}));
  EXPECT_EQ(checkpoint_steps(dir_), outcome.checkpoints);
  EXPECT_TRUE(is_training_run(dir_));
  EXPECT_TRUE(has_final_model(dir_));
  EXPECT_EQ(bytes_of(dir_ / "model.safetensors"), bytes_of(checkpoint_dir(dir_, 25) / "model.safetensors"));
  const nlohmann::json doc = read_train_json(dir_);
  EXPECT_EQ(doc["settings"], train_settings_json(tiny(25, 10, 20)));
  EXPECT_EQ(doc["settings"]["checkpoint_every"], 20);
  ASSERT_EQ(doc["log"].size(), 4u);
  EXPECT_EQ(doc["log"][3]["heads"].size(), 2u);
  // nothing half-written is left behind
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << e.path();
}

TEST_F(TrainingDir, AStoppedRunKeepsTheStepItStoppedAtAsItsLastCheckpoint) {
  std::size_t logs = 0;
  const TrainingOutcome outcome = run_training(
      tiny(100, 10, 20), dir_, [&](const TrainLog&) { ++logs; }, [&] { return logs >= 2; });
  // logged at 0 and 10, asked to stop at the next step (11), logged there, saved there
  EXPECT_TRUE(outcome.stopped);
  EXPECT_EQ(outcome.last_step, 11u);
  EXPECT_EQ(checkpoint_steps(dir_), (std::vector<std::size_t>{0, 11}));
  EXPECT_EQ(bytes_of(dir_ / "model.safetensors"), bytes_of(checkpoint_dir(dir_, 11) / "model.safetensors"));
  EXPECT_EQ(read_train_json(dir_)["log"].back()["step"], 11);
}

TEST_F(TrainingDir, ASecondRunIntoTheSameDirectoryLeavesOnlyItsOwnCheckpoints) {
  run_training(tiny(20, 10, 10), dir_);
  EXPECT_EQ(checkpoint_steps(dir_), (std::vector<std::size_t>{0, 10, 20}));
  run_training(tiny(15, 15, 15), dir_);
  EXPECT_EQ(checkpoint_steps(dir_), (std::vector<std::size_t>{0, 15}));
  EXPECT_EQ(read_train_json(dir_)["log"].size(), 2u);
}

TEST_F(TrainingDir, OnlyWholeCheckpointsCountAndABrokenTrainJsonIsRefusedByName) {
  fs::create_directories(dir_ / "checkpoints");
  EXPECT_FALSE(is_training_run(dir_));
  EXPECT_TRUE(checkpoint_steps(dir_).empty());
  for (const char* name : {"step-5", ".step-6.partial", "step-07", "step-x", "step-", "step-8"})
    fs::create_directories(dir_ / "checkpoints" / name);
  for (const char* name : {"step-5", ".step-6.partial", "step-07", "step-x"}) {
    std::ofstream(dir_ / "checkpoints" / name / "config.json") << "{}";
    std::ofstream(dir_ / "checkpoints" / name / "model.safetensors") << "";
  }
  std::ofstream(dir_ / "checkpoints" / "step-8" / "config.json") << "{}";  // no weights: not whole
  EXPECT_EQ(checkpoint_steps(dir_), (std::vector<std::size_t>{5}));

  const auto refused = [&](const std::string& text, const std::string& message) {
    std::ofstream(dir_ / "train.json") << text;
    try {
      (void)read_train_json(dir_);
      ADD_FAILURE() << "no error for " << text;
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), (dir_ / "train.json").string());
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused("{\"settings\": {}, ", "train.json");
  refused("[1, 2]", "is not a train.json");
  refused("{\"settings\": {}, \"log\": [{\"loss\": 1}]}", "log[0] has no whole \"step\"");
  fs::remove(dir_ / "train.json");
  EXPECT_THROW((void)read_train_json(dir_), InputError);
}
