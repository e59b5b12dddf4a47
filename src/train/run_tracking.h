// Records a run beyond its directory, as the directory is written: the run catalog
// (runs/kiln.db, through a background CatalogRecorder) and TensorBoard event files. It
// observes the RunDirectory: every run.json written updates the run's catalog row, every
// metrics.jsonl line becomes metric points. Tracking never stops or slows a run: a failure
// is kept and finish() returns it, for the run to report.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "track/catalog_recorder.h"
#include "track/tensorboard.h"
#include "train/config.h"
#include "train/run_directory.h"

namespace kiln::train {

class RunTracking : public RunObserver {
 public:
  RunTracking(const TrackingConfig& config, const std::filesystem::path& runs_dir);
  ~RunTracking() override;

  void info_written(const std::filesystem::path& run_dir, const nlohmann::json& info) override;
  void metrics_appended(const nlohmann::json& info, const nlohmann::json& record) override;
  // A run reopened by `kiln resume`: its catalog metrics become those of the metrics.jsonl
  // lines kept.
  void reopened(const std::filesystem::path& run_dir, const nlohmann::json& info);
  // Another run's directory changed (marked crashed): its catalog row follows.
  void other_run_changed(const std::filesystem::path& run_dir);

  // Waits at most tracking.wait_seconds for what is queued; returns one line per problem
  // ("run catalog runs/kiln.db: ...: database is locked; ... not recorded"), empty when
  // everything was recorded.
  std::vector<std::string> finish();

 private:
  TrackingConfig config_;
  std::filesystem::path catalog_path_;
  std::optional<track::CatalogRecorder> catalog_;
  std::unique_ptr<track::TensorBoardWriter> tensorboard_;  // opened with the run directory
  bool tensorboard_reported_ = false;
  std::vector<std::string> problems_;
  bool finished_ = false;
};

}  // namespace kiln::train
