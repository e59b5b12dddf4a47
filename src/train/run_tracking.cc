// Catalog and TensorBoard recording of a run as it is written (run_tracking.h).
#include "train/run_tracking.h"

#include <chrono>

#include <fmt/format.h>

#include "train/run_record.h"

namespace kiln::train {

namespace fs = std::filesystem;

RunTracking::RunTracking(const TrackingConfig& config, const fs::path& runs_dir)
    : config_(config), catalog_path_(track::Catalog::path_in(runs_dir)) {
  if (config_.catalog) catalog_.emplace(catalog_path_);
}

RunTracking::~RunTracking() {
  if (!finished_) finish();
}

void RunTracking::info_written(const fs::path& run_dir, const nlohmann::json& info) {
  if (catalog_) catalog_->record_run(run_record(run_dir, info));
  if (config_.tensorboard && !tensorboard_ && !tensorboard_reported_) {
    std::string problem;
    tensorboard_ = track::TensorBoardWriter::open(run_dir, &problem);
    if (!tensorboard_) {
      tensorboard_reported_ = true;
      problems_.push_back("TensorBoard: " + problem);
    }
  }
}

void RunTracking::metrics_appended(const nlohmann::json& info, const nlohmann::json& record) {
  std::vector<track::MetricPoint> points = metric_points(record);
  if (points.empty()) return;
  if (tensorboard_) {
    for (const track::MetricPoint& point : points) {
      tensorboard_->add_scalar(point.key, point.step, static_cast<float>(point.value),
                               point.wall_time);
    }
    // An evaluation ends an epoch: let a TensorBoard watching the run see it.
    if (record.value("kind", "") == "eval") tensorboard_->flush();
  }
  if (catalog_) {
    std::string key = fmt::format("{}/{}", info.value("experiment", ""), info.value("run_id", ""));
    catalog_->add_metrics(std::move(key), std::move(points));
  }
}

void RunTracking::reopened(const fs::path& run_dir, const nlohmann::json& info) {
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
  if (!catalog_) return;
  try {
    catalog_->record_run(run_record(run_dir, read_run_json(run_dir)));
  } catch (const std::exception& error) {
    problems_.push_back(fmt::format("run catalog: {}: {}", run_dir.string(), error.what()));
  }
}

std::vector<std::string> RunTracking::finish() {
  finished_ = true;
  if (tensorboard_) {
    tensorboard_->flush();
    if (!tensorboard_->ok()) problems_.push_back("TensorBoard: " + tensorboard_->problem());
    tensorboard_.reset();
  }
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(config_.wait_seconds * 1000));
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

}  // namespace kiln::train
