// A training run's tracking: the catalog row, metrics and lineage follow the run directory
// (also through a resume), TensorBoard files sit beside it, run.json names the environment,
// a broken catalog is reported without stopping the run, [tracking] is not part of the run
// identity, and reindex rebuilds the catalog from the directories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/savepoint.h"
#include "io/sha256.h"
#include "track/catalog.h"
#include "train/config.h"
#include "train/run_record.h"
#include "train/run_test_util.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using run_test::quiet;
using run_test::read_json;
using ::testing::HasSubstr;

TrainConfig tracked_run(const fs::path& runs_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {"data.train_limit=512", "data.test_limit=200",
                                        "train.epochs=2", "train.savepoint_every=2",
                                        "train.savepoint_keep_last=100"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return run_test::mlp_example(runs_dir, overrides);
}

std::string key_of(const fs::path& run_dir) {
  return run_dir.parent_path().filename().string() + "/" + run_dir.filename().string();
}

int count_event_files(const fs::path& run_dir) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    files += entry.path().filename().string().starts_with("events.out.tfevents.");
  }
  return files;
}

TEST(RunTracking, TheCatalogHoldsTheRunItsMetricsAndItsEnvironment) {
  fs::path runs = run_test::fresh_dir("tracking", "catalog");
  TrainSummary summary = train(tracked_run(runs, {"telemetry.every=2"}), quiet());
  EXPECT_TRUE(summary.tracking_problems.empty());
  nlohmann::json info = read_json(summary.run_dir / "run.json");
  const nlohmann::json& environment = info["environment"];
  EXPECT_EQ(environment["kiln_version"], "0.1.0");
  EXPECT_TRUE(environment["code"]["source"] == "git" || environment["code"]["source"] == "version");
  EXPECT_FALSE(environment["build"]["compiler"].get<std::string>().empty());
  EXPECT_EQ(environment["gemm"]["library"], "oneDNN");
  EXPECT_FALSE(environment["cpu"]["model"].get<std::string>().empty());
  EXPECT_FALSE(environment["cpu"]["simd_target"].get<std::string>().empty());
  EXPECT_GE(environment["cpu"]["cores"].get<int64_t>(), 1);
  EXPECT_GE(environment["devices"].get<int64_t>(), 1);

  track::Catalog catalog(track::Catalog::path_in(runs));
  std::vector<track::RunRow> rows = catalog.list();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, key_of(summary.run_dir));
  EXPECT_EQ(rows[0].status, "completed");
  EXPECT_EQ(rows[0].info.params_sha256, summary.params_sha256);
  EXPECT_EQ(catalog.params(rows[0].key).at("optim.lr"), "0.001");
  EXPECT_EQ(catalog.tags(rows[0].key).at("config_sha256"),
            info["config_sha256"].get<std::string>());
  // Every point metrics.jsonl holds, and nothing else.
  std::vector<track::MetricPoint> recorded = catalog.metrics(rows[0].key);
  EXPECT_EQ(recorded.size(), read_metric_points(summary.run_dir).size());
  std::vector<track::MetricPoint> accuracy = catalog.metrics(rows[0].key, "eval/test_accuracy");
  ASSERT_EQ(accuracy.size(), 2u);  // one per epoch
  EXPECT_DOUBLE_EQ(accuracy.back().value, summary.test_accuracy);
  EXPECT_GT(accuracy.back().wall_time, 1.7e9);
  // [telemetry]'s per-layer series are metrics like the others (steps 2, 4, 6, 8).
  EXPECT_EQ(catalog.metrics(rows[0].key, "telemetry/dense_1/grad_norm").size(), 4u);
  ASSERT_EQ(catalog.artifacts(rows[0].key).size(), 1u);
  EXPECT_EQ(catalog.artifacts(rows[0].key)[0].sha256, summary.params_sha256);
  EXPECT_EQ(count_event_files(summary.run_dir), 1);
  fs::remove_all(runs);
}

TEST(RunTracking, RunJsonHoldsTheTimingReport) {
  fs::path runs = run_test::fresh_dir("tracking", "timing");
  TrainConfig config = tracked_run(runs, {"train.epochs=1"});
  TrainSummary summary = train(config, quiet());
  nlohmann::json timing = read_json(summary.run_dir / "run.json")["timing"];
  EXPECT_GT(timing["compile_seconds"].get<double>(), 0);
  EXPECT_GE(timing["compiles"].get<int64_t>(), 1);
  const nlohmann::json& step = timing["step_ms"];
  EXPECT_LE(step["p10"].get<double>(), step["median"].get<double>());
  EXPECT_LE(step["median"].get<double>(), step["p90"].get<double>());
  EXPECT_GT(step["p10"].get<double>(), 0);
  EXPECT_NEAR(timing["examples_per_second"].get<double>(),
              1e3 * static_cast<double>(config.train.batch_size) / step["median"].get<double>(),
              1e-6 * timing["examples_per_second"].get<double>());
  double percent = timing["data_wait_percent"].get<double>();
  EXPECT_TRUE(percent >= 0 && percent <= 100) << percent;
  // The loop reads each step's loss and accuracy: a few synchronisations per step, not one
  // per parameter.
  double syncs = timing["host_syncs_per_step"].get<double>();
  EXPECT_GT(syncs, 0);
  EXPECT_LE(syncs, 4);
  EXPECT_EQ(timing["misplaced_params"], 0);
  ASSERT_EQ(timing["placement"].size(), 6u);  // three dense layers: kernel and bias each
  for (const nlohmann::json& param : timing["placement"]) {
    EXPECT_EQ(param["devices"], param["requested"]) << param.dump();
    EXPECT_TRUE(param["ok"].get<bool>());
  }
  // The time to the first step, phase by phase in order, adding up to the whole.
  std::vector<std::string> phases;
  double total = 0;
  for (const nlohmann::json& phase : timing["startup"]) {
    phases.push_back(phase[0].get<std::string>());
    EXPECT_GE(phase[1].get<double>(), 0) << phase.dump();
    total += phase[1].get<double>();
  }
  EXPECT_THAT(phases, ::testing::ElementsAre("process_start", "config", "data_read", "data_checks",
                                             "data_identity", "data_setup", "model",
                                             "run_directory", "first_step"));
  EXPECT_NEAR(total, timing["first_step_seconds"].get<double>(), 1e-3);
  fs::remove_all(runs);
}

TEST(RunTracking, AResumedRunKeepsOnlyTheMetricsItKeptAndRecordsItsLineage) {
  fs::path runs = run_test::fresh_dir("tracking", "resume");
  TrainSummary straight = train(tracked_run(runs), quiet());
  // As if killed after step 4: later savepoints gone, run.json still "running".
  for (const auto& entry : savepoint::list_committed(straight.run_dir / "savepoints")) {
    if (entry.step > 4) fs::remove_all(entry.path);
  }
  nlohmann::json info = read_json(straight.run_dir / "run.json");
  info["status"] = "running";
  info["pid"] = 999999999;
  io::write_file_atomically(straight.run_dir / "run.json", info.dump(2));

  TrainSummary resumed = resume(straight.run_dir, {}, quiet());
  EXPECT_EQ(resumed.resumed_from_step, 4);
  track::Catalog catalog(track::Catalog::path_in(runs));
  std::string key = key_of(straight.run_dir);
  EXPECT_EQ(catalog.find(key).status, "completed");
  EXPECT_EQ(catalog.metrics(key).size(), read_metric_points(straight.run_dir).size());
  std::vector<track::MetricPoint> loss = catalog.metrics(key, "train/loss");
  ASSERT_EQ(loss.size(), static_cast<size_t>(straight.steps));  // steps 5.. redone, not doubled
  for (size_t i = 0; i < loss.size(); ++i) EXPECT_EQ(loss[i].step, static_cast<int64_t>(i) + 1);
  std::vector<track::LineageEdge> lineage = catalog.lineage(key);
  ASSERT_EQ(lineage.size(), 1u);
  EXPECT_EQ(lineage[0].relation, "resumed_from");
  EXPECT_EQ(lineage[0].target, "savepoints/step-00000004");
  EXPECT_EQ(count_event_files(straight.run_dir), 2);  // one per process
  fs::remove_all(runs);
}

TEST(RunTracking, ACorruptCatalogIsReportedAndTheRunCompletes) {
  fs::path runs = run_test::fresh_dir("tracking", "corrupt");
  fs::create_directories(runs);
  std::ofstream(track::Catalog::path_in(runs)) << std::string(8192, 'x');
  TrainSummary summary = train(tracked_run(runs, {"tracking.wait_seconds=0.2"}), quiet());
  ASSERT_EQ(summary.tracking_problems.size(), 1u);
  EXPECT_THAT(summary.tracking_problems[0], HasSubstr("file is not a database"));
  EXPECT_THAT(summary.tracking_problems[0], HasSubstr("kiln runs reindex"));
  nlohmann::json info = read_json(summary.run_dir / "run.json");
  EXPECT_EQ(info["status"], "completed");
  ASSERT_TRUE(info.contains("tracking_problems"));
  EXPECT_THAT(info["tracking_problems"][0].get<std::string>(), HasSubstr("not a database"));
  EXPECT_TRUE(fs::exists(summary.run_dir / "params.safetensors"));

  // The directory has it all: moved aside, the catalog is rebuilt from it.
  fs::rename(track::Catalog::path_in(runs), runs / "kiln.db.corrupt");
  track::Catalog rebuilt(track::Catalog::path_in(runs));
  ReindexReport report = reindex_runs(runs, rebuilt);
  EXPECT_TRUE(report.problems.empty());
  EXPECT_EQ(report.runs, 1);
  std::string key = key_of(summary.run_dir);
  EXPECT_EQ(rebuilt.find(key).status, "completed");
  EXPECT_EQ(static_cast<int64_t>(rebuilt.metrics(key).size()), report.metric_points);
  EXPECT_EQ(rebuilt.metrics(key).size(), read_metric_points(summary.run_dir).size());
  fs::remove_all(runs);
}

TEST(RunTracking, TrackingCanBeTurnedOffAndIsNotPartOfTheRunIdentity) {
  fs::path runs = run_test::fresh_dir("tracking", "off");
  TrainSummary summary = train(
      tracked_run(runs, {"tracking.catalog=false", "tracking.tensorboard=false", "train.epochs=1"}),
      quiet());
  EXPECT_FALSE(fs::exists(track::Catalog::path_in(runs)));
  EXPECT_EQ(count_event_files(summary.run_dir), 0);
  TrainConfig on = tracked_run(runs, {"train.epochs=1"});
  TrainConfig off = tracked_run(runs, {"train.epochs=1", "tracking.catalog=false"});
  EXPECT_EQ(identity_toml(on), identity_toml(off));
  EXPECT_NE(to_toml(on), to_toml(off));
  EXPECT_EQ(read_json(summary.run_dir / "run.json")["config_sha256"],
            io::sha256_hex(identity_toml(on)));
  fs::remove_all(runs);
}

TEST(RunRecord, ATornLastMetricsLineIsLeftOutAndAnyOtherIsAnError) {
  fs::path dir = run_test::fresh_dir("tracking", "torn");
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.jsonl")
      << R"({"kind":"train","step":1,"loss":0.5,"accuracy":"nan","time":1.5})"
      << "\n"
      << R"({"kind":"eval","step":1,"test_loss":"inf"})"
      << "\n"
      << R"({"kind":"nonfinite","step":1})"
      << "\n"
      << R"({"kind":"train","st)";
  std::vector<track::MetricPoint> points = read_metric_points(dir);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].key, "train/accuracy");
  EXPECT_TRUE(std::isnan(points[0].value));
  EXPECT_EQ(points[0].wall_time, 1.5);
  EXPECT_EQ(points[2].key, "eval/test_loss");
  EXPECT_TRUE(std::isinf(points[2].value));
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "\n{}\n";
  try {
    read_metric_points(dir);
    ADD_FAILURE() << "a torn line in the middle was accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("metrics.jsonl:4: not a JSON record"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::train
