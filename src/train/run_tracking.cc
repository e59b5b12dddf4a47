// Catalog and TensorBoard recording of a run as it is written (run_tracking.h).
#include "train/run_tracking.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "base/wall_clock.h"
#include "io/json_fields.h"
#include "train/run_record.h"

namespace kiln::train {

namespace fs = std::filesystem;

namespace {

// Unix milliseconds of an ISO 8601 UTC time ("2026-12-02T15:52:59Z"); 0 when unreadable.
int64_t unix_ms(const std::string& iso) {
  std::tm time{};
  if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &time)) return 0;
  return static_cast<int64_t>(timegm(&time)) * 1000;
}

track::MlflowStatus mlflow_status(const std::string& status) {
  if (status == "completed") return track::MlflowStatus::kFinished;
  if (status == "interrupted") return track::MlflowStatus::kKilled;
  if (status == "running") return track::MlflowStatus::kRunning;
  return track::MlflowStatus::kFailed;
}

// The files of a run directory that go to MLflow as artifacts: its records, not its weights
// (which can be large; `kiln runs push` sends the same set).
std::vector<std::string> artifact_files(const fs::path& run_dir) {
  std::vector<std::string> files;
  for (const char* name : {"run.json", "config.toml", "metrics.jsonl", "report.html"}) {
    if (fs::exists(run_dir / name)) files.push_back(name);
  }
  return files;
}

// Config keys as MLflow accepts them: "model.layers[0].type" -> "model.layers.0.type"
// (MLflow allows letters, digits and _ - . : / and space in a key).
std::map<std::string, std::string> mlflow_params(const std::map<std::string, std::string>& params) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : params) {
    std::string name;
    for (char c : key) {
      if (c == '[') {
        name += '.';
      } else if (c != ']') {
        name += c;
      }
    }
    out[name] = value;
  }
  return out;
}

}  // namespace

RunTracking::RunTracking(const TrackingConfig& config, const fs::path& runs_dir)
    : config_(config), catalog_path_(track::Catalog::path_in(runs_dir)) {
  if (config_.catalog) catalog_.emplace(catalog_path_);
}

RunTracking::~RunTracking() {
  if (!finished_) finish();
}

void RunTracking::info_written(const fs::path& run_dir, const track::RunInfo& info) {
  std::lock_guard lock(mutex_);
  if (run_dir != run_dir_ || !config_params_) config_params_ = config_params_of(run_dir);
  run_dir_ = run_dir;
  last_info_ = info;
  const bool starts_mlflow = !config_.mlflow_uri.empty() && !mlflow_started_;
  std::optional<track::RunRecord> recorded;
  if (catalog_ || starts_mlflow) recorded = run_record(run_dir, info, *config_params_);
  if (catalog_) catalog_->record_run(*recorded);
  if (starts_mlflow) {
    mlflow_started_ = true;
    const track::RunRecord& record = *recorded;
    track::MlflowOptions options;
    options.uri = config_.mlflow_uri;
    options.experiment =
        config_.mlflow_experiment.empty() ? record.experiment : config_.mlflow_experiment;
    mlflow_.emplace(options);
    std::map<std::string, std::string> tags = record.tags;
    tags["kiln.run_key"] = record.key();
    tags["kiln.run_dir"] = record.run_dir;
    for (const track::LineageEdge& edge : record.lineage)
      tags["kiln." + edge.relation] = edge.target;
    mlflow_->start_run(record.run_id, unix_ms(record.started_at), tags);
    mlflow_->log_params(mlflow_params(record.params));
  }
  if (config_.tensorboard && !tensorboard_ && !tensorboard_reported_) {
    std::string problem;
    tensorboard_ = track::TensorBoardWriter::open(run_dir, &problem);
    if (!tensorboard_) {
      tensorboard_reported_ = true;
      problems_.push_back("TensorBoard: " + problem);
    }
  }
}

void RunTracking::metrics_appended(const track::MetricsLine& line) {
  std::lock_guard lock(mutex_);
  std::vector<track::MetricPoint> points = track::metric_points(line);
  if (points.empty()) return;
  if (tensorboard_) {
    for (const track::MetricPoint& point : points) {
      tensorboard_->add_scalar(point.key, point.step, static_cast<float>(point.value),
                               point.wall_time);
    }
    // An evaluation ends an epoch: let a TensorBoard watching the run see it.
    if (line.kind == "eval") tensorboard_->flush();
  }
  if (mlflow_) {
    for (const track::MetricPoint& point : points) {
      mlflow_->log_metric(point.key, point.value, point.step,
                          static_cast<int64_t>(point.wall_time * 1000));
    }
  }
  if (catalog_) {
    std::string key = last_info_.key();
    catalog_->add_metrics(std::move(key), std::move(points));
  }
}

void RunTracking::reopened(const fs::path& run_dir, const track::RunInfo& info) {
  std::lock_guard lock(mutex_);
  if (!catalog_) return;
  track::RunRecord record = run_record(run_dir, info);
  std::string key = record.key();
  catalog_->record_run(std::move(record));
  try {
    catalog_->replace_metrics(key, read_metric_points(run_dir));
  } catch (const std::exception& error) {
    problems_.push_back(fmt::format("run catalog: the run's earlier metrics: {}", error.what()));
  }
}

void RunTracking::other_run_changed(const fs::path& run_dir) {
  std::lock_guard lock(mutex_);
  if (!catalog_) return;
  try {
    catalog_->record_run(run_record(run_dir, track::read_run_info(run_dir)));
  } catch (const std::exception& error) {
    problems_.push_back(fmt::format("run catalog: {}: {}", run_dir.string(), error.what()));
  }
}

std::vector<std::string> RunTracking::finish() {
  std::lock_guard lock(mutex_);
  finished_ = true;
  if (tensorboard_) {
    tensorboard_->flush();
    if (!tensorboard_->ok()) problems_.push_back("TensorBoard: " + tensorboard_->problem());
    tensorboard_.reset();
  }
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(config_.wait_seconds * 1000));
  if (mlflow_) {
    for (const std::string& file : artifact_files(run_dir_))
      mlflow_->log_artifact(run_dir_ / file, file);
    std::string status = last_info_.status.empty() ? "failed" : last_info_.status;
    track::MlflowReport report = mlflow_->finish(mlflow_status(status), unix_milliseconds_now(),
                                                 std::chrono::ceil<std::chrono::seconds>(wait));
    mlflow_summary_ = track::MlflowMirrorRecord{config_.mlflow_uri, report.experiment_id,
                                                report.run_id, report.complete};
    for (const std::string& problem : report.problems) {
      problems_.push_back(problem + " (`kiln runs push` sends the run later)");
    }
    mlflow_.reset();
  }
  if (catalog_) {
    std::string problem = catalog_->finish(wait);
    if (!problem.empty()) {
      problems_.push_back(problem +
                          " (the run directory is complete; `kiln runs reindex` "
                          "records it later)");
    }
  }
  return problems_;
}

track::MlflowReport push_run_to_mlflow(const fs::path& run_dir, const std::string& uri,
                                       const std::string& experiment,
                                       std::chrono::seconds max_wait) {
  track::RunInfo info = track::read_run_info(run_dir);
  track::RunRecord record = run_record(run_dir, info);
  track::MlflowRunRecord push;
  push.run_name = record.run_id;
  push.start_time_ms = unix_ms(record.started_at);
  push.end_time_ms =
      record.finished_at.empty() ? unix_milliseconds_now() : unix_ms(record.finished_at);
  push.status = mlflow_status(record.status);
  push.params = mlflow_params(record.params);
  push.tags = record.tags;
  push.tags["kiln.run_key"] = record.key();
  push.tags["kiln.run_dir"] = record.run_dir;
  for (const track::LineageEdge& edge : record.lineage)
    push.tags["kiln." + edge.relation] = edge.target;
  for (const track::MetricPoint& point : read_metric_points(run_dir)) {
    push.metrics.push_back(
        {point.key, point.value, point.step, static_cast<int64_t>(point.wall_time * 1000)});
  }
  for (const std::string& file : artifact_files(run_dir))
    push.artifacts.push_back({run_dir / file, file});
  if (info.mlflow && info.mlflow->uri == uri) push.mlflow_run_id = info.mlflow->run_id;
  track::MlflowOptions options;
  options.uri = uri;
  options.experiment = experiment.empty() ? record.experiment : experiment;
  return track::push_run_to_mlflow(options, push, max_wait);
}

}  // namespace kiln::train
