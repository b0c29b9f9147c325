// Training in the lab (`attnlab serve --model RUN --runs DIR`) through real HTTP (api_test_support.hpp).
#include "api_test_support.hpp"

// ---- training (`attnlab serve --model RUN --runs DIR`, docs/api.md "Training") ------------
// A small training run made with the library (what `attnlab train --out DIR --steps 40
// --log-every 10 --checkpoint-every 20 --layers 2 --heads 2 --d-model 16 --context 16
// --vocab 12` writes) is the server's --model; runs started here go to a fresh --runs.
namespace {

namespace fs = std::filesystem;

attnlab::TrainSettings small_settings(std::size_t steps) {
  attnlab::TrainSettings s;
  s.layers = 2, s.heads = 2, s.d_model = 16, s.context = 16, s.vocab = 12;
  s.steps = steps, s.log_every = 10, s.checkpoint_every = 20, s.batch = 8;
  return s;
}

// The same settings as a POST /api/training/start body.
json small_request(std::size_t steps) {
  return {{"layers", 2},    {"heads", 2},      {"d_model", 16}, {"context", 16},         {"vocab", 12},
          {"steps", steps}, {"log_every", 10}, {"batch", 8},    {"checkpoint_every", 20}};
}

// A run that takes minutes, to be cancelled (it never gets near its end in these tests).
json long_request() {
  return {{"layers", 2},   {"heads", 2},  {"d_model", 64},   {"context", 64},           {"vocab", 28},
          {"steps", 3000}, {"batch", 16}, {"log_every", 10}, {"checkpoint_every", 1000}};
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Token ids of the induction task's vocabulary (12: BOS is 11), a stretch repeated.
const std::vector<int> kRunIds = {11, 3, 7, 1, 9, 3, 7, 1, 9, 2};

class TrainingApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::path(ATTNLAB_TEST_TMP) / ("training-" + std::to_string(getpid()));
    fs::remove_all(root_);
    attnlab::run_training(small_settings(40), root_ / "model-run");
    model_ = std::make_shared<const attnlab::ModelDir>(attnlab::open_model_dir((root_ / "model-run").string()));
    running_ = new RunningServer(model_, root_ / "runs");
    port_ = running_->port;
  }
  static void TearDownTestSuite() {
    delete running_;
    model_.reset();
    fs::remove_all(root_);
  }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  static json get_json(const std::string& path, int expected_status = 200) {
    auto r = client().Get(path);
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, expected_status) << path << ": " << r->body.substr(0, 400);
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json; charset=utf-8");
    return json::parse(r->body);
  }
  static json post_json(const std::string& path, const json& body, int expected_status = 200) {
    auto r = client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r) << "no response";
    if (!r) return {};
    EXPECT_EQ(r->status, expected_status) << path << ": " << r->body.substr(0, 400);
    return json::parse(r->body);
  }
  // A refusal: the status, {"error": "FIELD: ...", "field": FIELD} (or null and no prefix).
  static void expect_refused(const json& reply, const json& field, const std::string& message) {
    EXPECT_EQ(reply["field"], field) << reply;
    const std::string error = reply["error"];
    if (field.is_string()) EXPECT_THAT(error, ::testing::StartsWith(field.get<std::string>() + ": "));
    EXPECT_THAT(error, ::testing::HasSubstr(message));
  }
  // GET `path` until `done` says so (no time limit: CTest's is the bound).
  static json poll(const std::string& path, const std::function<bool(const json&)>& done) {
    for (;;) {
      json j = get_json(path);
      if (j.is_discarded() || j.is_null() || done(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // head h of layer l's weights as POST /api/model/run gives them, against a forward pass
  static void expect_weights_of(const json& reply, const attnlab::ForwardResult& f, std::size_t heads) {
    const std::size_t n = f.n;
    ASSERT_EQ(reply["weights"].size(), f.attention.size());
    for (std::size_t l = 0; l < f.attention.size(); ++l)
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j)
            ASSERT_NEAR(reply["weights"][l][h][i][j].get<double>(), f.attention[l][(h * n + i) * n + j], 5e-5 + 1e-9)
                << l << "." << h << " cell " << i << "," << j;
  }

  static fs::path root_;
  static std::shared_ptr<const attnlab::ModelDir> model_;
  static RunningServer* running_;
  static int port_;
};
fs::path TrainingApi::root_;
std::shared_ptr<const attnlab::ModelDir> TrainingApi::model_;
RunningServer* TrainingApi::running_ = nullptr;
int TrainingApi::port_ = 0;

}  // namespace

TEST_F(TrainingApi, TheModelsRunGivesItsSettingsLogCheckpointsAndState) {
  const json v = get_json("/api/training");
  EXPECT_EQ(v["training"], true);
  EXPECT_EQ(v["run"], nullptr);
  EXPECT_EQ(v["name"], "model-run");
  EXPECT_EQ(v["state"], "done");
  EXPECT_EQ(v["checkpoints"], (json{0, 20, 40}));
  EXPECT_EQ(v["final"], true);
  EXPECT_EQ(v["settings"], attnlab::train_settings_json(small_settings(40)));
  EXPECT_EQ(v["log_count"], 5);
  EXPECT_EQ(v["since"], 0);
  // the log is train.json's, entry for entry: steps 0, 10, ..., 40, every head scored
  const json file = attnlab::read_train_json(root_ / "model-run");
  EXPECT_EQ(v["log"], file["log"]);
  ASSERT_EQ(v["log"].size(), 5u);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(v["log"][k]["step"], 10 * k);
    EXPECT_EQ(v["log"][k]["heads"].size(), 4u);
    EXPECT_TRUE(v["log"][k]["loss_second_half"].is_number());
  }
  // from an index on (how the page follows a run), and an index past the end
  const json later = get_json("/api/training?since=3");
  EXPECT_EQ(later["log"], (json{file["log"][3], file["log"][4]}));
  EXPECT_EQ(later["since"], 3);
  EXPECT_EQ(later["log_count"], 5);
  EXPECT_EQ(get_json("/api/training?since=5")["log"], json::array());
  expect_refused(get_json("/api/training?since=6", 400), "since", "6 is past the log's 5 entries");
  expect_refused(get_json("/api/training?since=x", 400), "since", "\"x\" is not a log index");
  expect_refused(get_json("/api/training?run=..%2Fmodel-run", 400), "run", "is not a run's name");
  expect_refused(get_json("/api/training?run=nope", 400), "run", "there is no training run \"nope\"");
  expect_refused(get_json("/api/training?colour=red", 400), "colour", "unknown field");
  // the model says it is a training run
  EXPECT_EQ(get_json("/api/model")["training"], true);
}

TEST_F(TrainingApi, AStepRunsThatCheckpointOfTheRun) {
  const fs::path run = root_ / "model-run";
  std::vector<json> replies;
  for (const std::size_t step : {0, 20, 40}) {
    SCOPED_TRACE("step " + std::to_string(step));
    const json reply = post_json("/api/model/run", {{"ids", kRunIds}, {"step", step}});
    const attnlab::Model checkpoint = attnlab::load_gpt2(attnlab::checkpoint_dir(run, step).string());
    expect_weights_of(reply, attnlab::model_forward(checkpoint, kRunIds, {.keep_attention = true}), 2);
    replies.push_back(reply);
  }
  // training moved the heads: step 0's weights are not step 40's
  double largest = 0;
  for (std::size_t i = 0; i < kRunIds.size(); ++i)
    for (std::size_t j = 0; j <= i; ++j)
      largest = std::max(largest, std::abs(replies[0]["weights"][1][0][i][j].get<double>() -
                                           replies[2]["weights"][1][0][i][j].get<double>()));
  EXPECT_GT(largest, 0.01);
  // no step: the final model, which is the last checkpoint
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}})["weights"], replies[2]["weights"]);
  // the model at a step, and one head of it as a scenario
  const json info = get_json("/api/model?step=20");
  EXPECT_EQ(info["step"], 20);
  EXPECT_EQ(info["training"], true);
  EXPECT_EQ(info["name"], "model-run");
  EXPECT_EQ(info["n_layer"], 2);
  const json trace = post_json(
      "/api/attention", {{"scenario", {{"model", {{"ids", kRunIds}, {"layer", 1}, {"head", 0}, {"step", 20}}}}}});
  const attnlab::ForwardResult f20 = attnlab::model_forward(
      attnlab::load_gpt2(attnlab::checkpoint_dir(run, 20).string()), kRunIds, {.keep_attention = true});
  const std::size_t n = kRunIds.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j)
      ASSERT_NEAR(trace["heads"][0]["weights"][i][j].get<double>(), f20.attention[1][i * n + j], 1e-5);
  EXPECT_EQ(trace["scenario_json"]["model"]["step"], 20);
}

TEST_F(TrainingApi, AStepThatIsNotACheckpointIs400NamingStep) {
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"step", 30}}, 400), "step",
                 "step 30 is not a checkpoint of model-run; its checkpoints are at steps 0, 20, 40");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"step", -1}}, 400), "step", "a whole number >= 0");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"step", "20"}}, 400), "step", "a whole number");
  expect_refused(get_json("/api/model?step=30", 400), "step", "its checkpoints are at steps 0, 20, 40");
  expect_refused(get_json("/api/model?step=abc", 400), "step", "a whole number");
  expect_refused(get_json("/api/model?layer=1", 400), "layer", "unknown parameter");
  expect_refused(
      post_json("/api/attention",
                {{"scenario", {{"model", {{"ids", kRunIds}, {"layer", 0}, {"head", 0}, {"step", 35}}}}}}, 400),
      "scenario.model.step", "step 35 is not a checkpoint");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", "nope"}}, 400), "run",
                 "there is no training run \"nope\"");
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", "../model-run"}}, 400), "run",
                 "is not a run's name");
  expect_refused(post_json("/api/attention",
                           {{"scenario", {{"model", {{"ids", kRunIds}, {"layer", 0}, {"head", 0}, {"run", 7}}}}}}, 400),
                 "scenario.model.run", "is not a run's name");
  // and the server keeps serving
  EXPECT_EQ(post_json("/api/model/run", {{"ids", {1, 2}}, {"step", 0}})["ids"], (json{1, 2}));
}

TEST_F(TrainingApi, BadSettingsAre400NamingTheSetting) {
  const auto refused = [](const json& body, const std::string& field, const std::string& message) {
    SCOPED_TRACE(body.dump());
    expect_refused(post_json("/api/training/start", body, 400), field, message);
  };
  refused({{"layers", 5}}, "layers", "5 is not a whole number from 1 to 4");
  refused({{"heads", 0}}, "heads", "from 1 to 8");
  refused({{"heads", 3}}, "d_model", "32 is not divisible by heads 3");
  refused({{"context", 256}}, "context", "from 12 to 128");
  refused({{"steps", 0}}, "steps", "from 1 to 20000");
  refused({{"steps", 1.5}}, "steps", "expected a whole number >= 0 but got 1.5");
  refused({{"lr", 2}}, "lr", "2 is not a learning rate");
  refused({{"lr", "fast"}}, "lr", "expected a number but got a string");
  refused({{"attn_only", 1}}, "attn_only", "expected true or false");
  refused({{"prev_token_steps", -1}}, "prev_token_steps", "expected a whole number >= 0 but got -1");
  refused({{"prev_token_steps", 20001}}, "prev_token_steps", "from 0 to 20000");
  refused({{"task", "copy"}}, "task", "\"copy\" is not a choice; give one of induction");
  refused({{"colour", 1}}, "colour", "unknown field");
  refused({{"steps", 20000}, {"log_every", 1}}, "log_every", "20001 log entries; at most 1001");
  refused({{"log_every", 0}}, "log_every", "from 1 to 20000");
  refused({{"steps", 20000}, {"log_every", 100}, {"checkpoint_every", 10}}, "checkpoint_every",
          "2001 checkpoints; at most 101");
  refused({{"steps", 20000},
           {"batch", 64},
           {"context", 128},
           {"d_model", 128},
           {"layers", 4},
           {"log_every", 100},
           {"checkpoint_every", 1000}},
          "steps", "training FLOPs; at most 2e+12 (the lab's limit");
  expect_refused(post_json("/api/training/start", json::array({1}), 400), "body", "expected a JSON object");
  // nothing started
  EXPECT_EQ(get_json("/api/training/job")["job"], nullptr);
}

// A run holds a heavy slot (its share of the cores) while it trains: with none free, the
// start is 503 and Retry-After, like any heavy request, and nothing starts.
TEST_F(TrainingApi, ARunFindingEveryHeavySlotTakenIs503AndStartsNothing) {
  const std::size_t slots = get_json("/api/health")["heavy_work"]["slots"];
  running_->server.set_heavy_slots(0);
  auto r = client().Post("/api/training/start", small_request(30).dump(), "application/json");
  running_->server.set_heavy_slots(slots);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_THAT(json::parse(r->body)["error"].get<std::string>(),
              ::testing::HasSubstr("all 0 slots for heavy work are taken (a training run or an analysis job"));
  EXPECT_EQ(get_json("/api/training/job")["job"], nullptr);
  EXPECT_FALSE(fs::exists(root_ / "runs" / "run-1")) << "no run directory for a run that did not start";
}

TEST_F(TrainingApi, ARunStartedHereTrainsInTheBackgroundIsFollowedAndWritesWhatTheLibraryWrites) {
  const json before = get_json("/api/training/job");
  EXPECT_EQ(before["job"], nullptr);
  EXPECT_EQ(before["busy"], false);
  EXPECT_EQ(before["limits"]["layers"], (json{1, 4}));
  EXPECT_EQ(before["defaults"], attnlab::train_settings_json(attnlab::TrainSettings{}));
  EXPECT_EQ(fs::path(before["runs_dir"].get<std::string>()).filename(), "runs");
  expect_refused(post_json("/api/training/cancel", json::object(), 409), nullptr, "no training run is running");

  const json started = post_json("/api/training/start", small_request(30), 202);
  EXPECT_EQ(started["run"], "run-1");
  EXPECT_EQ(started["state"], "running");
  EXPECT_EQ(started["settings"], attnlab::train_settings_json(small_settings(30)));
  EXPECT_EQ(fs::path(started["dir"].get<std::string>()), fs::absolute(root_ / "runs" / "run-1").lexically_normal());
  // followed as the page does: the log from the last entry seen on, until the run ends
  json log = json::array();
  json view;
  for (;;) {
    view = get_json("/api/training?run=run-1&since=" + std::to_string(log.size()));
    ASSERT_EQ(view["since"], log.size());
    for (const json& entry : view["log"])
      log.push_back(entry);
    ASSERT_EQ(view["log_count"], log.size());
    if (view["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(view["state"], "done");
  EXPECT_EQ(view["checkpoints"], (json{0, 20, 30}));
  EXPECT_EQ(view["final"], true);
  ASSERT_EQ(log.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k)
    EXPECT_EQ(log[k]["step"], 10 * k);
  const fs::path dir = root_ / "runs" / "run-1";
  EXPECT_EQ(attnlab::read_train_json(dir)["log"], log);
  const json job = get_json("/api/training/job");
  EXPECT_EQ(job["job"]["run"], "run-1");
  EXPECT_EQ(job["job"]["state"], "done");
  EXPECT_EQ(job["job"]["step"], 30);
  EXPECT_EQ(job["busy"], false);

  // The same settings through the library, on the threads the server gives a job (its batch
  // split as the server's run split it), give the same directory: the same log (but the
  // seconds), the same checkpoints and the same final model, byte for byte.
  const fs::path library = root_ / "library-run";
  const attnlab::ThreadBudget budget(get_json("/api/health")["heavy_work"]["threads_per_job"].get<int>());
  const attnlab::TrainingOutcome outcome = attnlab::run_training(small_settings(30), library);
  EXPECT_EQ(outcome.checkpoints, (std::vector<std::size_t>{0, 20, 30}));
  json library_log = attnlab::read_train_json(library)["log"], server_log = log;
  for (json* l : {&library_log, &server_log})
    for (json& entry : *l)
      entry.erase("seconds");
  EXPECT_EQ(server_log, library_log);
  for (const fs::path& file :
       {fs::path("model.safetensors"), fs::path("config.json"), fs::path("checkpoints/step-20/model.safetensors"),
        fs::path("checkpoints/step-0/model.safetensors")})
    EXPECT_TRUE(file_bytes(dir / file) == file_bytes(library / file)) << file << " differs";

  // Opened as a model: the run by name, at any of its checkpoints.
  const json info = get_json("/api/model?run=run-1");
  EXPECT_EQ(info["loaded"], true);
  EXPECT_EQ(info["run"], "run-1");
  EXPECT_EQ(info["name"], "run-1");
  EXPECT_EQ(info["training"], true);
  EXPECT_EQ(info["n_head"], 2);
  const json at20 = post_json("/api/model/run", {{"ids", kRunIds}, {"run", "run-1"}, {"step", 20}});
  expect_weights_of(at20,
                    attnlab::model_forward(attnlab::load_gpt2((dir / "checkpoints/step-20").string()), kRunIds,
                                           {.keep_attention = true}),
                    2);
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", "run-1"}, {"step", 10}}, 400), "step",
                 "step 10 is not a checkpoint of run-1; its checkpoints are at steps 0, 20, 30");
}

TEST_F(TrainingApi, OneRunAtATimeOthersAreServedMeanwhileAndCancelKeepsTheLastCheckpoint) {
  const json started = post_json("/api/training/start", long_request(), 202);
  const std::string run = started["run"];  // run-1 when this test has the server to itself
  const std::size_t number = std::stoul(run.substr(4));
  poll("/api/training?run=" + run, [](const json& v) { return v["log_count"] >= 2; });
  // busy: a second run is refused with 409, saying which run trains
  expect_refused(post_json("/api/training/start", small_request(10), 409), nullptr, run + " is training");
  const json job = get_json("/api/training/job");
  EXPECT_EQ(job["busy"], true);
  EXPECT_EQ(job["job"]["state"], "running");
  EXPECT_EQ(job["job"]["steps"], 3000);
  // other requests are answered while it trains: a model run, and the run's own checkpoint
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}, {"weights", false}})["ids"], kRunIds);
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}, {"run", run}, {"step", 0}})["ids"], kRunIds);
  // its final model is not there yet
  expect_refused(post_json("/api/model/run", {{"ids", kRunIds}, {"run", run}}, 400), "step",
                 run + " has no final model yet");
  EXPECT_EQ(get_json("/api/training?run=" + run)["state"], "running");
  // cancel the wrong run: refused; the right one: it stops at its next step
  expect_refused(post_json("/api/training/cancel", {{"run", "run-7"}}, 409), "run", "is not the run training here");
  const json cancelled = post_json("/api/training/cancel", json::object());
  EXPECT_EQ(cancelled["run"], run);
  EXPECT_EQ(cancelled["cancelling"], true);
  const json view = poll("/api/training?run=" + run, [](const json& v) { return v["state"] != "running"; });
  EXPECT_EQ(view["state"], "cancelled");
  EXPECT_EQ(view["final"], true);
  const std::size_t last = view["log"].back()["step"];
  EXPECT_LT(last, 3000u);
  EXPECT_EQ(view["checkpoints"].back(), last) << "the step it stopped at is kept as a checkpoint";
  EXPECT_EQ(view["checkpoints"][0], 0);
  const fs::path dir = root_ / "runs" / run;
  EXPECT_TRUE(file_bytes(dir / "model.safetensors") ==
              file_bytes(attnlab::checkpoint_dir(dir, last) / "model.safetensors"));
  EXPECT_EQ(attnlab::read_train_json(dir)["log"], view["log"]);
  EXPECT_EQ(post_json("/api/model/run", {{"ids", kRunIds}, {"run", run}})["ids"], kRunIds);
  expect_refused(post_json("/api/training/cancel", json::object(), 409), nullptr, "no training run is running");
  // the slot is free again: the next run is the next number
  const std::string next = "run-" + std::to_string(number + 1);
  EXPECT_EQ(post_json("/api/training/start", small_request(10), 202)["run"], next);
  EXPECT_EQ(poll("/api/training?run=" + next, [](const json& v) { return v["state"] != "running"; })["state"], "done");
}

// Starts the long run (run-1) through client `c` and returns once its first log entry is
// written, so the run is training.
void start_long_run_and_wait_for_its_first_log(httplib::Client& c) {
  auto r = c.Post("/api/training/start", long_request().dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  for (;;) {
    auto v = c.Get("/api/training?run=run-1");
    ASSERT_TRUE(v);
    if (json::parse(v->body)["log_count"] >= 1) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(TrainingApiShutdown, AServerStoppedWhileARunTrainsCancelsItAndKeepsItsLastCheckpoint) {
  const fs::path runs = fs::path(ATTNLAB_TEST_TMP) / ("shutdown-" + std::to_string(getpid()));
  fs::remove_all(runs);
  {
    RunningServer running(nullptr, runs);
    httplib::Client c("127.0.0.1", running.port);
    ASSERT_NO_FATAL_FAILURE(start_long_run_and_wait_for_its_first_log(c));
  }  // the server goes, with the run still training
  const fs::path dir = runs / "run-1";
  const json log = attnlab::read_train_json(dir)["log"];
  const std::size_t last = log.back()["step"];
  EXPECT_LT(last, 3000u);
  EXPECT_TRUE(attnlab::has_final_model(dir));
  EXPECT_EQ(attnlab::checkpoint_steps(dir).back(), last);
  fs::remove_all(runs);
}

// stop() itself (not the server's destruction) ends the run: when it returns, the run has
// stopped at a step, written that step's checkpoint and its final model.
TEST(TrainingApiShutdown, StopEndsARunTrainingAndWritesItsLastCheckpointBeforeItReturns) {
  const fs::path runs = fs::path(ATTNLAB_TEST_TMP) / ("stop-" + std::to_string(getpid()));
  fs::remove_all(runs);
  RunningServer running(nullptr, runs);
  httplib::Client c("127.0.0.1", running.port);
  ASSERT_NO_FATAL_FAILURE(start_long_run_and_wait_for_its_first_log(c));
  running.server.stop();  // the server object still lives
  const fs::path dir = runs / "run-1";
  EXPECT_TRUE(attnlab::has_final_model(dir)) << "stop() returned before the run wrote its final model";
  const json log = attnlab::read_train_json(dir)["log"];
  const std::size_t last = log.back()["step"];
  EXPECT_LT(last, 3000u);
  EXPECT_EQ(attnlab::checkpoint_steps(dir).back(), last);
  fs::remove_all(runs);
}

TEST_F(Api, WithoutAModelThereIsNoTrainingButRunsCanStillBeNamed) {
  auto r = client().Get("/api/training");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body), (json{{"training", false}, {"run", nullptr}}));
  auto missing = client().Get("/api/model?run=run-99");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  EXPECT_EQ(json::parse(missing->body)["field"], "run");
}
