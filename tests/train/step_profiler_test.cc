// Profiling a run's steps: --trace-steps writes trace.json and takes run.json's roofline
// and memory report from those steps; every run has them from its default window; a range
// outside the run is refused before anything is written.
#include "train/step_profiler.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "run_test_util.h"
#include "runtime/allocator.h"
#include "support/errors.h"
#include "support/source_tree.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TrainConfig short_run(const fs::path& runs_dir) {
  return load_config(kiln::testing::source_dir() / "examples/fashion_mnist_mlp.toml",
                     {"data.train_limit=1024", "data.test_limit=200", "train.epochs=1",
                      fmt::format("experiment.runs_dir=\"{}\"", runs_dir.string())});
}

TEST(StepProfiler, TraceStepsWriteATraceAndTheRooflineAndMemoryReport) {
  fs::path runs = run_test::fresh_dir("profile", "trace");
  TrainOptions options = run_test::quiet();
  options.trace_steps = StepRange{2, 3};
  TrainSummary summary = train(short_run(runs), options);
  nlohmann::json info = run_test::read_json(summary.run_dir / "run.json");
  EXPECT_EQ(info["trace"]["steps"], nlohmann::json({2, 3}));
  EXPECT_EQ(info["trace"]["file"], "trace.json");
  EXPECT_EQ(info["trace"]["dropped_events"], 0);
  EXPECT_EQ(info["roofline"]["train_steps"], 2);
  EXPECT_GT(info["roofline"]["kernels"].get<int64_t>(), 5);
  EXPECT_GT(info["roofline"]["flops"].get<double>(), 0);
  EXPECT_FALSE(info["roofline"]["top"].empty());
  EXPECT_GT(info["memory"]["estimate"]["params"].get<int64_t>(), 0);
  EXPECT_GT(info["memory"]["estimate"]["optimizer_state"].get<int64_t>(), 0);
  EXPECT_GT(info["memory"]["observed_peak_bytes"].get<int64_t>(), 0);
  // Steps after the first reuse cached memory: the arena, the results, the next batch.
  const nlohmann::json& allocator = info["memory"]["allocator"];
  EXPECT_EQ(allocator["steps"], 2);
  if (default_allocator_cache_bytes() > 0) {  // (0 under AddressSanitizer: nothing is cached)
    EXPECT_EQ(allocator["system_allocations"], 0) << allocator.dump();
  }
  EXPECT_GT(allocator["reserved_bytes"].get<int64_t>(), 0);
  nlohmann::json trace = run_test::read_json(summary.run_dir / "trace.json");
  std::set<std::string> threads, categories;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name") threads.insert(event["args"]["name"]);
    if (event.contains("cat")) categories.insert(event["cat"]);
  }
  EXPECT_TRUE(threads.contains("training loop"));
  EXPECT_TRUE(threads.contains("device cpu:0"));
  EXPECT_TRUE(categories.contains("kernel"));
  EXPECT_TRUE(categories.contains("step"));
  EXPECT_TRUE(categories.contains("memory"));
}

TEST(StepProfiler, EveryRunHasARooflineFromItsDefaultWindowAndNoTraceFile) {
  fs::path runs = run_test::fresh_dir("profile", "default");
  TrainSummary summary = train(short_run(runs), run_test::quiet());
  nlohmann::json info = run_test::read_json(summary.run_dir / "run.json");
  EXPECT_EQ(info["trace"]["steps"],
            nlohmann::json({StepProfiler::kAutoFirst, StepProfiler::kAutoLast}));
  EXPECT_TRUE(info["trace"]["file"].is_null());
  EXPECT_FALSE(fs::exists(summary.run_dir / "trace.json"));
  EXPECT_GT(info["roofline"]["kernels"].get<int64_t>(), 0);
}

TEST(StepProfiler, ARangeOutsideTheRunIsRefusedBeforeAnythingIsWritten) {
  fs::path runs = run_test::fresh_dir("profile", "outside");
  TrainOptions options = run_test::quiet();
  options.trace_steps = StepRange{5, 500};  // the run has 8 steps
  EXPECT_THAT(testing::error_of([&] { train(short_run(runs), options); }),
              HasSubstr("--trace-steps 5-500 is outside the steps this run takes, 1-8"));
  EXPECT_FALSE(fs::exists(runs / "fashion_mnist_mlp"));
}

TEST(StepProfiler, StepRangesParseOrSayWhatWasExpected) {
  EXPECT_EQ(parse_step_range("10-12"), (StepRange{10, 12}));
  EXPECT_EQ(parse_step_range("7"), (StepRange{7, 7}));
  for (const char* bad : {"", "0-3", "5-4", "a-b", "3-", "-3", "1-2-3"}) {
    EXPECT_THAT(testing::error_of([&] { parse_step_range(bad); }),
                HasSubstr("expected A-B with 1 <= A <= B"))
        << bad;
  }
}

}  // namespace
}  // namespace kiln::train
