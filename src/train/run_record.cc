// Catalog records from run directories (run_record.h).
#include "train/run_record.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/bounded_read.h"
#include "io/json_fields.h"
#include "kiln/error.h"
#include "track/metrics_line.h"
#include "track/run_environment.h"
#include "train/run_directory.h"
#include "train/run_identity.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::map<std::string, std::string> identity_tags(const track::RunInfo& info) {
  std::map<std::string, std::string> tags;
  auto tag = [&](const char* name, const std::string& value) {
    if (!value.empty()) tags[name] = value;
  };
  tag("config_sha256", info.config_sha256);
  tag("kiln_version", info.kiln_version);
  tag("kernels", info.kernels);
  tag("host", info.host);
  if (info.seed) tag("seed", std::to_string(*info.seed));
  if (info.identity) tag("data_sha256", info.identity->data_sha256);
  track::RecordedCode code = track::recorded_code(info);
  tag("code_commit", code.commit);
  tag("code_dirty", code.dirty_text);
  return tags;
}

std::vector<track::ArtifactEntry> artifacts_of(const fs::path& run_dir,
                                               const track::RunInfo& info) {
  std::vector<track::ArtifactEntry> artifacts;
  auto add = [&](const char* name, const std::string& file, const std::string& sha256) {
    if (file.empty()) return;
    std::error_code error;
    auto bytes = fs::file_size(run_dir / file, error);
    artifacts.push_back({name, file, sha256, error ? -1 : static_cast<int64_t>(bytes)});
  };
  add("params", info.params_file, info.params_sha256);
  add("state", info.state_file, "");
  return artifacts;
}

}  // namespace

std::map<std::string, std::string> config_params_of(const fs::path& run_dir) {
  std::optional<std::string> config =
      io::read_regular_file_if_present(run_dir / "config.toml", io::kMaxRecordBytes);
  return config ? config_keys(*config) : std::map<std::string, std::string>();
}

track::RunRecord run_record(const fs::path& run_dir, const track::RunInfo& info) {
  return run_record(run_dir, info, config_params_of(run_dir));
}

track::RunRecord run_record(const fs::path& run_dir, const track::RunInfo& info,
                            std::map<std::string, std::string> config_params) {
  track::RunRecord run;
  run.experiment = info.experiment;
  run.run_id = info.run_id;
  if (run.run_id.empty()) run.run_id = run_dir.filename().string();
  if (run.experiment.empty()) run.experiment = run_dir.parent_path().filename().string();
  run.run_dir = run_dir.string();
  run.status = info.status;
  run.started_at = info.started_at;
  run.finished_at = info.finished_at;
  run.info = info;
  run.params = std::move(config_params);
  run.tags = identity_tags(info);
  for (const track::ResumeRecord& resume : info.resumes) {
    std::string from =
        resume.savepoint.empty() ? fmt::format("step {}", resume.from_step) : resume.savepoint;
    run.lineage.push_back({"resumed_from", from});
  }
  run.artifacts = artifacts_of(run_dir, info);
  return run;
}

std::vector<track::MetricPoint> read_metric_points(const fs::path& run_dir) {
  std::vector<track::MetricPoint> points;
  for (const track::MetricsLine& line : track::read_metrics_file(run_dir).lines) {
    for (track::MetricPoint& point : track::metric_points(line)) points.push_back(std::move(point));
  }
  return points;
}

ReindexReport reindex_runs(const fs::path& runs_dir, track::Catalog& catalog) {
  ReindexReport report;
  std::vector<fs::path> run_dirs;
  std::error_code error;
  for (const auto& experiment : fs::directory_iterator(runs_dir, error)) {
    if (!experiment.is_directory()) continue;
    for (const auto& run : fs::directory_iterator(experiment.path(), error)) {
      if (fs::exists(run.path() / "run.json")) run_dirs.push_back(run.path());
    }
  }
  if (error) {
    fail(kUnknownSite,
         fmt::format("cannot list the runs in {}: {}", runs_dir.string(), error.message()));
  }
  std::sort(run_dirs.begin(), run_dirs.end());  // directory order is the file system's
  for (const fs::path& run_dir : run_dirs) {
    try {
      track::RunRecord record = run_record(run_dir, track::read_run_info(run_dir));
      std::vector<track::MetricPoint> points = read_metric_points(run_dir);
      catalog.record_run(record);
      catalog.replace_metrics(record.key(), points);
      ++report.runs;
      report.metric_points += static_cast<int64_t>(points.size());
    } catch (const std::exception& failure) {
      report.problems.push_back(fmt::format("{}: {}", run_dir.string(), failure.what()));
    }
  }
  return report;
}

}  // namespace kiln::train
