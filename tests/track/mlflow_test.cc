// The MLflow mirror and push_run_to_mlflow against two kinds of server started here: a recording
// stub (tests/tools/mlflow_stub.py) that can be slow, failing or not MLflow at all, and the
// real MLflow server from the tracking peers' venv, whose runs are read back through
// MLflow's own Python client (tests/tools/mlflow_readback.py).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/scratch_dir.h"
#include "support/source_tree.h"
#include "track/mlflow.h"
#include "track/mlflow_client.h"

extern char** environ;

namespace kiln::track {
namespace {

using namespace std::chrono_literals;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

const std::filesystem::path kSource = kiln::testing::source_dir();
const std::filesystem::path kTrackingPython = kSource / ".venv/tracking/bin/python";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A port nothing listens on now: bound to port 0, read back, released.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A child process in a process group of its own, so that stopping it also stops what it
// started (mlflow server runs its web server as a child).
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { stop(); }

  // Starts `args` with stdout and stderr going to `log` and `extra_env` ("NAME=value")
  // added to this process's environment; false if it could not start.
  bool start(const std::vector<std::string>& args, const std::filesystem::path& log,
             const std::vector<std::string>& extra_env = {}) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.push_back(*entry);
    for (const std::string& entry : extra_env) env.push_back(const_cast<char*>(entry.c_str()));
    env.push_back(nullptr);
    int error = posix_spawn(&pid_, argv[0], &actions, &attributes, argv.data(), env.data());
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) pid_ = -1;
    return error == 0;
  }

  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    return ::waitpid(pid_, &status, WNOHANG) == 0;
  }

  // SIGTERM to the group, SIGKILL to whatever is left of it after 10 s.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 200 && !exited; ++i) {
      exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(50ms);
    }
    if (!exited || ::kill(-pid_, 0) == 0) ::kill(-pid_, SIGKILL);
    if (!exited) ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

MlflowOptions options_for(const std::string& uri) {
  MlflowOptions options;
  options.uri = uri;
  options.experiment = "kiln-tests";
  options.request_timeout = 2s;
  options.retry.first_delay = 50ms;
  options.retry.max_delay = 400ms;
  return options;
}

// --- the recording stub -------------------------------------------------------------------

class MlflowStub : public ::testing::Test {
 protected:
  // Starts tests/tools/mlflow_stub.py in `mode` and returns its URI.
  std::string start_stub(const std::string& mode, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "/usr/bin/python3", (kSource / "tests/tools/mlflow_stub.py").string(),
        "--mode",           mode,
        "--port-file",      (dir_ / "port").string(),
        "--record",         (dir_ / "requests.jsonl").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_TRUE(stub_.start(args, dir_ / "stub.log"));
    auto start = Clock::now();
    while (!std::filesystem::exists(dir_ / "port") && seconds_since(start) < 30) {
      EXPECT_TRUE(stub_.running()) << read_text(dir_ / "stub.log");
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(std::filesystem::exists(dir_ / "port")) << read_text(dir_ / "stub.log");
    return fmt::format("http://127.0.0.1:{}/", read_text(dir_ / "port"));
  }

  void TearDown() override { stub_.stop(); }

  std::vector<json> requests() const {
    std::vector<json> all;
    std::ifstream in(dir_ / "requests.jsonl");
    for (std::string line; std::getline(in, line);) all.push_back(json::parse(line));
    return all;
  }

  // The metrics of the log-batch calls the stub accepted, in the order it got them.
  std::vector<json> accepted_metrics() const {
    std::vector<json> metrics;
    for (const json& request : requests()) {
      if (request["path"] != "/api/2.0/mlflow/runs/log-batch" || request["status"] != 200) continue;
      for (const json& metric : request["json"].value("metrics", json::array())) {
        metrics.push_back(metric);
      }
    }
    return metrics;
  }

  testing::ScratchDir dir_;
  Child stub_;
};

TEST_F(MlflowStub, MirrorsARunInBatchesKeepingTheMetricsInOrder) {
  MlflowMirror mirror(options_for(start_stub("ok")));
  std::ofstream(dir_ / "train.toml") << "[model]\nwidth = 64\n";
  mirror.start_run("stub-run", 1700000000000, {{"kiln.run_id", "r-1"}});
  std::map<std::string, std::string> params;
  for (int i = 0; i < 150; ++i) params[fmt::format("p{:03}", i)] = std::to_string(i);
  mirror.log_params(params);
  for (int step = 0; step < 2500; ++step) {
    mirror.log_metric("loss", 1.0 / (step + 1), step, 1700000000000 + step);
  }
  mirror.log_metric("loss", std::nan(""), 2500, 1700000002500);
  mirror.set_tag("kiln.parent", "r-0");
  mirror.log_artifact(dir_ / "train.toml", "config/train.toml");
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, 1700000009000, 20s);

  EXPECT_TRUE(report.complete) << ::testing::PrintToString(report.problems);
  EXPECT_EQ(report.sent.metrics, 2501);
  EXPECT_EQ(report.sent.params, 150);
  EXPECT_EQ(report.sent.tags, 2);
  EXPECT_EQ(report.sent.artifacts, 1);
  EXPECT_FALSE(report.run_id.empty());

  std::vector<json> metrics = accepted_metrics();
  ASSERT_EQ(metrics.size(), 2501u);
  for (int step = 0; step < 2500; ++step) {
    ASSERT_EQ(metrics[step]["step"], step);
    ASSERT_EQ(metrics[step]["value"].get<double>(), 1.0 / (step + 1));
    ASSERT_EQ(metrics[step]["timestamp"], 1700000000000 + step);
  }
  EXPECT_EQ(metrics[2500]["value"], "NaN");  // protobuf's JSON for what JSON lacks

  size_t metric_calls = 0, param_calls = 0;
  for (const json& request : requests()) {
    if (request["path"] != "/api/2.0/mlflow/runs/log-batch") continue;
    const json& body = request["json"];
    if (body.contains("metrics")) {
      ++metric_calls;
      EXPECT_LE(body["metrics"].size(), 1000u);
    }
    if (body.contains("params")) {
      ++param_calls;
      EXPECT_LE(body["params"].size(), 100u);
    }
  }
  EXPECT_GE(metric_calls, 3u);
  EXPECT_EQ(param_calls, 2u);

  std::vector<json> all = requests();
  ASSERT_GE(all.size(), 4u);
  EXPECT_EQ(all[0]["path"], "/api/2.0/mlflow/experiments/get-by-name");
  EXPECT_EQ(all[0]["query"]["experiment_name"], "kiln-tests");
  EXPECT_EQ(all[1]["path"], "/api/2.0/mlflow/experiments/create");
  EXPECT_EQ(all[2]["path"], "/api/2.0/mlflow/runs/create");
  EXPECT_EQ(all[2]["json"]["run_name"], "stub-run");
  EXPECT_EQ(all[2]["json"]["start_time"], 1700000000000);
  const json& last = all.back();
  EXPECT_EQ(last["path"], "/api/2.0/mlflow/runs/update");
  EXPECT_EQ(last["json"]["status"], "FINISHED");
  EXPECT_EQ(last["json"]["end_time"], 1700000009000);
  bool uploaded = false;
  for (const json& request : all) {
    if (request["method"] != "PUT") continue;
    uploaded = true;
    EXPECT_EQ(request["path"], fmt::format("/api/2.0/mlflow-artifacts/artifacts/1/{}/artifacts/"
                                           "config/train.toml",
                                           report.run_id));
    EXPECT_EQ(request["data"], "[model]\nwidth = 64\n");
  }
  EXPECT_TRUE(uploaded);
}

TEST_F(MlflowStub, DownServerNeverBlocksTheCallerAndFinishSaysWhatWasNotSent) {
  std::string uri = fmt::format("http://127.0.0.1:{}/", free_port());
  MlflowMirror mirror(options_for(uri));
  auto start = Clock::now();
  mirror.start_run("down-run", now_ms());
  mirror.log_params({{"lr", "0.1"}});
  for (int step = 0; step < 10000; ++step) mirror.log_metric("loss", 0.5, step, now_ms());
  // Not a speed test: the calls only queue, whatever the network does.
  EXPECT_LT(seconds_since(start), 2.0);

  start = Clock::now();
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 2s);
  EXPECT_LT(seconds_since(start), 4.0);
  EXPECT_FALSE(report.complete);
  EXPECT_EQ(report.sent.total(), 0);
  EXPECT_EQ(report.unsent.metrics, 10000);
  EXPECT_EQ(report.unsent.params, 1);
  EXPECT_TRUE(report.run_id.empty());
  ASSERT_FALSE(report.problems.empty());
  EXPECT_THAT(
      report.problems.back(),
      AllOf(HasSubstr("MLflow at " + uri + " unreachable: Couldn't connect to server"),
            HasSubstr("the run was not created in MLflow: 10000 metrics, 1 param not sent")));
}

TEST_F(MlflowStub, FullQueueDropsAndCountsInsteadOfBlocking) {
  MlflowOptions options = options_for(fmt::format("http://127.0.0.1:{}/", free_port()));
  options.max_queued = 1000;
  MlflowMirror mirror(options);
  mirror.start_run("full-run", now_ms());
  for (int step = 0; step < 1500; ++step) mirror.log_metric("loss", 0.5, step, now_ms());
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 1s);
  EXPECT_EQ(report.unsent.metrics + report.dropped.metrics, 1500);
  EXPECT_GE(report.dropped.metrics, 500);
  EXPECT_THAT(::testing::PrintToString(report.problems),
              HasSubstr("the queue of 1000 records waiting for MLflow was full"));
}

TEST_F(MlflowStub, SlowServerTimesOutAndFinishKeepsItsDeadline) {
  MlflowOptions options = options_for(start_stub("slow", {"--sleep", "30"}));
  options.request_timeout = 1s;
  MlflowMirror mirror(options);
  mirror.start_run("slow-run", now_ms());
  for (int step = 0; step < 100; ++step) mirror.log_metric("loss", 0.5, step, now_ms());
  auto start = Clock::now();
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 3s);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_FALSE(report.complete);
  EXPECT_EQ(report.unsent.metrics, 100);
  ASSERT_FALSE(report.problems.empty());
  EXPECT_THAT(report.problems.back(),
              AllOf(HasSubstr("did not answer GET experiments/get-by-name within"),
                    HasSubstr("100 metrics not sent")));
}

TEST_F(MlflowStub, ServerErrorsAreRetriedAndEveryMetricArrivesOnceInOrder) {
  MlflowMirror mirror(options_for(start_stub("error5xx", {"--fail-first", "2"})));
  mirror.start_run("flaky-run", now_ms());
  for (int step = 0; step < 2500; ++step) {
    mirror.log_metric(step % 2 == 0 ? "loss" : "accuracy", step * 0.25, step, 1700000000000 + step);
  }
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 30s);
  EXPECT_TRUE(report.complete) << ::testing::PrintToString(report.problems);
  EXPECT_EQ(report.sent.metrics, 2500);

  std::vector<json> metrics = accepted_metrics();
  ASSERT_EQ(metrics.size(), 2500u);
  for (int step = 0; step < 2500; ++step) {
    ASSERT_EQ(metrics[step]["step"], step);
    ASSERT_EQ(metrics[step]["key"], step % 2 == 0 ? "loss" : "accuracy");
  }
  int answered_503 = 0;
  for (const json& request : requests()) answered_503 += request["status"] == 503 ? 1 : 0;
  EXPECT_GE(answered_503, 8);  // two for each of the four calls kiln makes
}

TEST_F(MlflowStub, SomethingThatIsNotMlflowIsNamedAndNotRetried) {
  std::string uri = start_stub("notmlflow");
  MlflowMirror mirror(options_for(uri));
  mirror.start_run("lost-run", now_ms());
  mirror.log_metric("loss", 1, 0, now_ms());
  auto start = Clock::now();
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 10s);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_FALSE(report.complete);
  ASSERT_FALSE(report.problems.empty());
  EXPECT_THAT(report.problems.front(),
              AllOf(HasSubstr(uri + " is not an MLflow server"),
                    HasSubstr("GET experiments/get-by-name answered 404 (text/html)")));
  EXPECT_THAT(report.problems.back(), HasSubstr("1 metric not sent"));
  EXPECT_EQ(requests().size(), 1u);
}

TEST_F(MlflowStub, InvalidKeysCostOnlyTheirOwnRecord) {
  MlflowMirror mirror(options_for(start_stub("ok")));
  mirror.start_run("keys-run", now_ms());
  mirror.log_metric("loss", 1, 0, now_ms());
  mirror.log_metric("bad,key", 1, 0, now_ms());
  mirror.log_metric("../escape", 1, 0, now_ms());
  mirror.log_artifact(dir_ / "missing.txt", "missing.txt");
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 10s);
  EXPECT_FALSE(report.complete);
  EXPECT_EQ(report.sent.metrics, 1);
  EXPECT_EQ(report.rejected.metrics, 2);
  EXPECT_EQ(report.rejected.artifacts, 1);
  std::string problems = ::testing::PrintToString(report.problems);
  EXPECT_THAT(problems, HasSubstr("metric 'bad,key' holds a character other than"));
  EXPECT_THAT(problems, HasSubstr("metric '../escape' has an empty, '.' or '..' path segment"));
  EXPECT_THAT(problems, HasSubstr("missing.txt"));
  EXPECT_EQ(requests().back()["json"]["status"], "FINISHED");  // the rest still went
}

TEST_F(MlflowStub, FinishWithoutStartRunSaysSo) {
  MlflowMirror mirror(options_for(start_stub("ok")));
  mirror.log_metric("loss", 1, 0, now_ms());
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, now_ms(), 5s);
  EXPECT_FALSE(report.complete);
  EXPECT_THAT(::testing::PrintToString(report.problems), HasSubstr("start_run was never called"));
  EXPECT_EQ(report.unsent.metrics, 1);
}

TEST_F(MlflowStub, PushRunSendsAFinishedRunAndCanCompleteAnExistingOne) {
  std::string uri = start_stub("ok");
  MlflowRunRecord run;
  run.run_name = "pushed";
  run.start_time_ms = 1700000000000;
  run.end_time_ms = 1700000005000;
  run.status = MlflowStatus::kFailed;
  run.params = {{"lr", "0.1"}};
  run.tags = {{"kiln.run_id", "r-9"}};
  for (int step = 0; step < 1200; ++step) run.metrics.push_back({"loss", 1.0, step, 1700000000000});
  MlflowReport first = push_run_to_mlflow(options_for(uri), run, 20s);
  EXPECT_TRUE(first.complete) << ::testing::PrintToString(first.problems);
  EXPECT_EQ(first.sent.metrics, 1200);

  run.mlflow_run_id = first.run_id;
  MlflowReport second = push_run_to_mlflow(options_for(uri), run, 20s);
  EXPECT_TRUE(second.complete) << ::testing::PrintToString(second.problems);
  EXPECT_EQ(second.run_id, first.run_id);
  int created = 0;
  for (const json& request : requests()) {
    created += request["path"] == "/api/2.0/mlflow/runs/create" ? 1 : 0;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(requests().back()["json"]["status"], "FAILED");
}

TEST(MlflowClientTest, UriThatIsNotHttpIsFatal) {
  MlflowClient client("file:///tmp/mlruns", 1s);
  MlflowCallResult result = client.get("experiments/get-by-name", {{"experiment_name", "x"}}, {});
  EXPECT_EQ(result.outcome, MlflowCallOutcome::kFatal);
  EXPECT_THAT(result.message, HasSubstr("is not an http:// or https:// address"));
}

TEST(MlflowClientTest, EscapesEachPathSegment) {
  EXPECT_EQ(MlflowClient::escape_path("a b/c%d/e.txt"), "a%20b/c%25d/e.txt");
}

// --- the real MLflow server ---------------------------------------------------------------

// One server for the suite: it takes seconds to start.
class MlflowServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     fmt::format("kiln_MlflowServer_{}", ::getpid()));
    std::filesystem::remove_all(*dir_);
    std::filesystem::create_directories(*dir_);
    problem_ = new std::string();
    server_ = new Child();
    if (!std::filesystem::exists(kTrackingPython)) {
      *problem_ = fmt::format("{} is missing: run scripts/setup to build the tracking peers' venv",
                              kTrackingPython.string());
      return;
    }
    int port = free_port();
    uri_ = new std::string(fmt::format("http://127.0.0.1:{}", port));
    std::vector<std::string> args = {kTrackingPython.string(),
                                     (kSource / ".venv/tracking/bin/mlflow").string(),
                                     "server",
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port),
                                     "--workers",
                                     "1",
                                     "--backend-store-uri",
                                     fmt::format("sqlite:///{}", (*dir_ / "mlflow.db").string()),
                                     "--artifacts-destination",
                                     (*dir_ / "artifacts").string()};
    // Its job runner (a dozen more processes importing MLflow) serves features kiln does
    // not use, and would slow the start and the first requests on a small machine.
    if (!server_->start(args, *dir_ / "server.log", {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false"})) {
      *problem_ = "could not start mlflow server";
      return;
    }
    wait_until_ready();
  }

  // Ready once it answers the API as MLflow does (for a missing experiment, an MLflow error).
  static void wait_until_ready() {
    MlflowClient client(*uri_, 2s);
    auto start = Clock::now();
    // A cold start imports MLflow twice and creates its database: seconds on a quiet
    // machine, a minute or more on a loaded one.
    while (seconds_since(start) < 180) {
      MlflowCallResult result =
          client.get("experiments/get-by-name", {{"experiment_name", "kiln-probe"}}, {});
      if (result.error_code == "RESOURCE_DOES_NOT_EXIST") return;
      if (!server_->running()) break;
      std::this_thread::sleep_for(250ms);
    }
    *problem_ =
        fmt::format("mlflow server did not come up; its log:\n{}", read_text(*dir_ / "server.log"));
  }

  static void TearDownTestSuite() {
    server_->stop();
    std::filesystem::remove_all(*dir_);
    delete server_;
    delete problem_;
    delete dir_;
    delete uri_;
  }

  void SetUp() override { ASSERT_TRUE(problem_->empty()) << *problem_; }

  // Runs mlflow_readback.py on `expected`; its output on a mismatch.
  static std::string read_back(json expected) {
    expected["tracking_uri"] = *uri_;
    std::filesystem::path file = *dir_ / "expected.json";
    std::ofstream(file) << expected.dump();
    std::string command =
        fmt::format("{} {} {} 2>&1", kTrackingPython.string(),
                    (kSource / "tests/tools/mlflow_readback.py").string(), file.string());
    std::FILE* pipe = ::popen(command.c_str(), "r");
    std::string output;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
    int status = ::pclose(pipe);
    return status == 0 ? std::string() : fmt::format("exit {}: {}", status, output);
  }

  static MlflowOptions server_options(const std::string& experiment) {
    MlflowOptions options = options_for(*uri_);
    options.experiment = experiment;
    options.request_timeout = 10s;  // a loaded machine's sqlite commits
    return options;
  }

  static inline std::filesystem::path* dir_ = nullptr;
  static inline std::string* uri_ = nullptr;
  static inline std::string* problem_ = nullptr;
  static inline Child* server_ = nullptr;
};

TEST_F(MlflowServer, MirroredRunReadsBackThroughMlflowsOwnClient) {
  std::filesystem::path artifact = *dir_ / "train.toml";
  std::string content = "[model]\nwidth = 64\n";
  std::ofstream(artifact) << content;
  json expected = {{"experiment", "kiln-mirror"}, {"run_name", "mirrored"}, {"status", "FINISHED"}};
  std::map<std::string, std::string> params = {
      {"model.width", "64"}, {"optim.lr", "0.001"}, {"data.batch_size", "32"}};
  std::map<std::string, std::string> tags = {{"kiln.run_id", "2026-01-01-abc"},
                                             {"kiln.parent_run", "2025-12-31-xyz"}};
  expected["params"] = params;
  expected["tags"] = tags;
  expected["artifacts"] = {{"config/train.toml", content}};

  MlflowMirror mirror(server_options("kiln-mirror"));
  mirror.start_run("mirrored", 1700000000000, tags);
  mirror.log_params(params);
  const char* keys[] = {"train/loss", "train/accuracy", "lr"};
  for (int i = 0; i < 2502; ++i) {
    int step = i / 3;
    double value = 1.0 / (i + 1);
    int64_t timestamp = 1700000000000 + 10 * step;
    mirror.log_metric(keys[i % 3], value, step, timestamp);
    expected["metrics"][keys[i % 3]].push_back({step, value, timestamp});
  }
  mirror.log_artifact(artifact, "config/train.toml");
  MlflowReport report = mirror.finish(MlflowStatus::kFinished, 1700000100000, 60s);
  ASSERT_TRUE(report.complete) << ::testing::PrintToString(report.problems);
  EXPECT_EQ(report.sent.metrics, 2502);
  EXPECT_EQ(read_back(expected), "");
}

TEST_F(MlflowServer, PushedRunReadsBackAndPushingAgainAddsNoDuplicates) {
  MlflowRunRecord run;
  run.run_name = "pushed";
  run.start_time_ms = 1700000000000;
  run.end_time_ms = 1700000050000;
  run.status = MlflowStatus::kFailed;
  run.params = {{"optim.lr", "0.01"}};
  run.tags = {{"kiln.run_id", "2026-01-02-def"}};
  json expected = {{"experiment", "kiln-push"}, {"run_name", "pushed"}, {"status", "FAILED"}};
  expected["params"] = run.params;
  expected["tags"] = run.tags;
  expected["artifacts"] = json::object();
  for (int step = 0; step < 1100; ++step) {
    run.metrics.push_back({"loss", 2.0 - step * 0.001, step, 1700000000000 + step});
    expected["metrics"]["loss"].push_back({step, 2.0 - step * 0.001, 1700000000000 + step});
  }
  MlflowReport first = push_run_to_mlflow(server_options("kiln-push"), run, 60s);
  ASSERT_TRUE(first.complete) << ::testing::PrintToString(first.problems);

  run.mlflow_run_id = first.run_id;
  MlflowReport again = push_run_to_mlflow(server_options("kiln-push"), run, 60s);
  ASSERT_TRUE(again.complete) << ::testing::PrintToString(again.problems);
  EXPECT_EQ(again.run_id, first.run_id);
  EXPECT_EQ(read_back(expected), "");

  // The read-back is a real check: a different expectation fails it, saying how.
  expected["status"] = "FINISHED";
  expected["metrics"]["loss"][7][1] = 0.5;
  std::string mismatch = read_back(expected);
  EXPECT_THAT(mismatch, HasSubstr("status FAILED, expected FINISHED"));
  EXPECT_THAT(mismatch, HasSubstr("metric loss: (step, timestamp, value) (7,"));
}

}  // namespace
}  // namespace kiln::track
