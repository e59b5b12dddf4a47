// Records a run beyond its directory, as the directory is written: the run catalog
// (runs/kiln.db, through a background CatalogRecorder) and TensorBoard event files. It
// observes the RunDirectory: every run.json written updates the run's catalog row, every
// metrics.jsonl line becomes metric points. Tracking never stops or slows a run: a failure
// is kept and finish() returns it, for the run to report. Its methods may be called from any
// thread (metrics arrive on the metrics writer's).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "track/catalog_recorder.h"
#include "track/mlflow.h"
#include "track/tensorboard.h"
#include "train/config.h"
#include "train/run_directory.h"

namespace kiln::train {

class RunTracking : public RunObserver {
 public:
  RunTracking(const TrackingConfig& config, const std::filesystem::path& runs_dir);
  ~RunTracking() override;

  void info_written(const std::filesystem::path& run_dir, const track::RunInfo& info) override;
  void metrics_appended(const track::MetricsLine& line) override;
  // A run reopened by `kiln resume`: its catalog metrics become those of the metrics.jsonl
  // lines kept.
  void reopened(const std::filesystem::path& run_dir, const track::RunInfo& info);
  // Another run's directory changed (marked crashed): its catalog row follows.
  void other_run_changed(const std::filesystem::path& run_dir);

  // Waits at most tracking.wait_seconds for what is queued; returns one line per problem
  // ("run catalog runs/kiln.db: ...: database is locked; ... not recorded"), empty when
  // everything was recorded.
  std::vector<std::string> finish();

  // What the mirror recorded (run.json's "mlflow": uri, experiment, run id, complete), or
  // nothing when there is no mirror; valid after finish().
  const std::optional<track::MlflowMirrorRecord>& mlflow_summary() const { return mlflow_summary_; }

 private:
  std::mutex mutex_;
  TrackingConfig config_;
  std::filesystem::path catalog_path_;
  std::optional<track::CatalogRecorder> catalog_;
  std::unique_ptr<track::TensorBoardWriter> tensorboard_;  // opened with the run directory
  std::optional<track::MlflowMirror> mlflow_;              // tracking.mlflow_uri set
  bool mlflow_started_ = false;
  std::filesystem::path run_dir_;
  track::RunInfo last_info_;  // run.json as last written: the final status and times
  // The run's config.toml as catalog params, read once: it does not change while the run runs.
  std::optional<std::map<std::string, std::string>> config_params_;
  bool tensorboard_reported_ = false;
  std::vector<std::string> problems_;
  std::optional<track::MlflowMirrorRecord> mlflow_summary_;
  bool finished_ = false;
};

// Sends a finished run to MLflow (`kiln runs push`): its params, tags, metrics and files, as
// the mirror would have; completes the MLflow run recorded in run.json's "mlflow" instead of
// creating another when there is one. Returns the report; never throws for network trouble.
track::MlflowReport push_run_to_mlflow(const std::filesystem::path& run_dir, const std::string& uri,
                                       const std::string& experiment,
                                       std::chrono::seconds max_wait);

}  // namespace kiln::train
