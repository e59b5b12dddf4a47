// The background metrics.jsonl writer: lines arrive whole and in order, flush() and lines()
// wait for the queue, the observer hears of every line (on the writer's thread, never beside
// run.json's observer call), a failed write surfaces later as the error naming the file and
// keeps the lines before it, and nothing queued is lost when the log closes. Also run under
// TSan (.ci/run).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/atomic_file.h"
#include "kiln/error.h"
#include "track/catalog.h"
#include "train/metrics_log.h"
#include "train/run_directory.h"
#include "train/run_observer.h"
#include "train/run_record.h"
#include "train/run_test_util.h"
#include "train/run_tracking.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<nlohmann::json> read_lines(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// Fails every write to metrics.jsonl with ENOSPC (TearDown removes the hook).
void fail_metrics_writes() {
  io::set_write_fault_for_testing(
      [](const fs::path& path) { return path.filename() == "metrics.jsonl" ? ENOSPC : 0; });
}

// What `action` throws as a kiln::Error, or "" when it does not throw.
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// A metrics line of `kind` for `step`, with a loss when one is given.
track::MetricsLine line_at(int64_t step, std::optional<double> loss = {}, std::string kind = "") {
  track::MetricsLine line;
  line.kind = std::move(kind);
  line.step = step;
  if (loss) line.values["loss"] = *loss;
  return line;
}

// Records what it is told and on which thread.
class RecordingObserver : public RunObserver {
 public:
  void info_written(const fs::path&, const track::RunInfo& info) override {
    std::lock_guard lock(mutex_);
    events.push_back("info " + info.status);
  }
  void metrics_appended(const track::MetricsLine& line) override {
    std::lock_guard lock(mutex_);
    events.push_back("step " + std::to_string(line.step));
    threads.push_back(std::this_thread::get_id());
  }
  std::vector<std::string> events;
  std::vector<std::thread::id> threads;

 private:
  std::mutex mutex_;
};

class MetricsLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = run_test::fresh_dir("metrics-log",
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = dir_ / "metrics.jsonl";
  }
  void TearDown() override {
    io::set_write_fault_for_testing(nullptr);
    fs::remove_all(dir_);
  }
  std::FILE* open(const char* mode = "w") { return std::fopen(path_.c_str(), mode); }
  fs::path dir_, path_;
};

TEST_F(MetricsLogTest, LinesArriveWholeAndInOrderOnceFlushed) {
  MetricsLog log(path_, open(), 0);
  for (int step = 1; step <= 1000; ++step) log.append(line_at(step, 1.0 / step));
  log.flush();
  std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 1000u);
  for (int step = 1; step <= 1000; ++step) EXPECT_EQ(lines[step - 1]["step"], step);
  EXPECT_EQ(log.lines(), 1000);
}

TEST_F(MetricsLogTest, LinesAreWrittenWithinTheIntervalWithoutAFlush) {
  MetricsLog log(path_, open(), 0);
  log.append(line_at(1));
  // Generous: the writer wakes after kWriteInterval; a loaded machine may be slower.
  auto deadline = std::chrono::steady_clock::now() + 40 * MetricsLog::kWriteInterval;
  while (read_lines(path_).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(MetricsLog::kWriteInterval / 5);
  }
  EXPECT_EQ(read_lines(path_).size(), 1u);
}

TEST_F(MetricsLogTest, ClosingWritesWhatIsQueued) {
  {
    MetricsLog log(path_, open(), 0);
    for (int step = 1; step <= 10; ++step) log.append(line_at(step));
  }
  EXPECT_EQ(read_lines(path_).size(), 10u);
}

TEST_F(MetricsLogTest, AReopenedLogCountsTheLinesAlreadyThere) {
  std::ofstream(path_) << "{\"step\":1}\n{\"step\":2}\n";
  MetricsLog log(path_, open("a"), 2);
  log.append(line_at(3));
  EXPECT_EQ(log.lines(), 3);
  EXPECT_EQ(read_lines(path_).back()["step"], 3);
}

TEST_F(MetricsLogTest, AFullQueueIsWrittenWithoutWaitingForTheInterval) {
  MetricsLog log(path_, open(), 0);
  for (size_t i = 0; i < MetricsLog::kMaxQueued; ++i) log.append(line_at(i));
  auto deadline = std::chrono::steady_clock::now() + 20 * MetricsLog::kWriteInterval;
  while (read_lines(path_).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(read_lines(path_).empty());
}

TEST_F(MetricsLogTest, TheObserverHearsOfEveryLineOnTheWritersThread) {
  RecordingObserver observer;
  MetricsLog log(path_, open(), 0);
  log.observe(&observer);
  for (int step = 1; step <= 3; ++step) log.append(line_at(step));
  log.flush();
  EXPECT_EQ(observer.events, (std::vector<std::string>{"step 1", "step 2", "step 3"}));
  for (std::thread::id id : observer.threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST_F(MetricsLogTest, AFailedWriteSurfacesOnceNamingTheFileAndKeepsTheLinesBefore) {
  MetricsLog log(path_, open(), 0);
  log.append(line_at(1));
  log.flush();
  fail_metrics_writes();
  log.append(line_at(2));
  std::string message = error_of([&] { log.flush(); });
  EXPECT_THAT(message, HasSubstr("cannot write " + path_.string()));
  EXPECT_THAT(message, HasSubstr("No space left on device"));
  io::set_write_fault_for_testing(nullptr);
  // Thrown once: the run that reports it may still write what it can.
  log.append(line_at(3));
  EXPECT_EQ(log.lines(), 2);
  std::vector<nlohmann::json> lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_EQ(lines[1]["step"], 3);
}

TEST_F(MetricsLogTest, AFailedWriteIsThrownByTheNextAppend) {
  MetricsLog log(path_, open(), 0);
  io::set_write_fault_for_testing([](const fs::path&) { return EIO; });
  log.append(line_at(1));
  // The writer takes the line within the interval; the append after that throws.
  auto deadline = std::chrono::steady_clock::now() + 40 * MetricsLog::kWriteInterval;
  bool thrown = false;
  while (!thrown && std::chrono::steady_clock::now() < deadline) {
    try {
      log.append(line_at(2));
      std::this_thread::sleep_for(MetricsLog::kWriteInterval / 5);
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("metrics.jsonl: Input/output error"));
      thrown = true;
    }
  }
  EXPECT_TRUE(thrown);
}

// Through the run directory: run.json is written only once the lines before it are, so the
// observer hears them first, and a finished run.json never has lines missing behind it.
TEST_F(MetricsLogTest, RunJsonIsWrittenAfterTheLinesBeforeIt) {
  RecordingObserver observer;
  RunDirectory run = RunDirectory::create(dir_ / "runs", "exp", "", std::string(64, '0'), {});
  run.observe(&observer);
  run.append_metrics(line_at(1));
  run.append_metrics(line_at(2));
  run.finish_completed();
  EXPECT_EQ(observer.events,
            (std::vector<std::string>{"info running", "step 1", "step 2", "info completed"}));
  EXPECT_EQ(read_lines(run.path() / "metrics.jsonl").size(), 2u);
  EXPECT_EQ(run.metrics_lines(), 2);
}

// A failed metrics write fails the run at its end at the latest, and run.json says so.
TEST_F(MetricsLogTest, AMetricsWriteThatFailsAtTheEndFailsTheRun) {
  RunDirectory run = RunDirectory::create(dir_ / "runs", "exp", "", std::string(64, '0'), {});
  fail_metrics_writes();
  run.append_metrics(line_at(1));
  std::string message = error_of([&] { run.finish_completed(); });
  EXPECT_THAT(message, HasSubstr("metrics.jsonl"));
  io::set_write_fault_for_testing(nullptr);
  EXPECT_EQ(run.finish_failed(message), "");
  nlohmann::json info = run_test::read_json(run.path() / "run.json");
  EXPECT_EQ(info["status"], "failed");
  EXPECT_THAT(info["error"].get<std::string>(), HasSubstr("metrics.jsonl"));
}

// Run tracking hears the lines on the writer's thread and run.json on the caller's: the
// catalog ends with every point metrics.jsonl holds (TSan watches the two threads).
TEST_F(MetricsLogTest, TrackingRecordsEveryLineTheWriterWrote) {
  fs::path runs = dir_ / "runs";
  std::string key;
  {
    TrackingConfig config;
    RunTracking tracking(config, runs);
    RunDirectory run = RunDirectory::create(runs, "exp", "", std::string(64, '0'), {});
    run.observe(&tracking);
    for (int step = 1; step <= 50; ++step) {
      run.append_metrics(line_at(step, 1.0 / step, "train"));
      if (step % 10 == 0) run.write_info();
    }
    run.finish_completed();
    EXPECT_TRUE(tracking.finish().empty());
    key = "exp/" + run.run_id();
    EXPECT_EQ(read_metric_points(run.path()).size(), 50u);
  }
  track::Catalog catalog(track::Catalog::path_in(runs));
  EXPECT_EQ(catalog.metrics(key, "train/loss").size(), 50u);
}

}  // namespace
}  // namespace kiln::train
