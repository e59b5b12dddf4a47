// Catalog records from run directories (run_record.h).
#include "train/run_record.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "io/bounded_read.h"
#include "kiln/error.h"
#include "train/run_directory.h"
#include "train/run_identity.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string text_of(const json& info, const char* key) {
  auto found = info.find(key);
  if (found == info.end() || found->is_null()) return {};
  return found->is_string() ? found->get<std::string>() : found->dump();
}

// A metric value as metrics.jsonl writes it: a number, or "nan" / "inf" / "-inf" as text.
std::optional<double> metric_value(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const std::string& text = value.get_ref<const std::string&>();
  if (text == "nan" || text == "-nan") return std::nan("");
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  return std::nullopt;
}

std::map<std::string, std::string> identity_tags(const json& info) {
  std::map<std::string, std::string> tags;
  for (const char* key : {"config_sha256", "kiln_version", "kernels", "host", "seed"}) {
    std::string value = text_of(info, key);
    if (!value.empty()) tags[key] = value;
  }
  if (info.contains("identity") && info["identity"].is_object()) {
    std::string data = text_of(info["identity"], "data_sha256");
    if (!data.empty()) tags["data_sha256"] = data;
  }
  const json* code = info.contains("environment") && info["environment"].is_object() &&
                             info["environment"].contains("code")
                         ? &info["environment"]["code"]
                         : nullptr;
  if (code && code->is_object()) {
    std::string commit = text_of(*code, "commit");
    if (!commit.empty()) tags["code_commit"] = commit;
    if (code->contains("dirty")) tags["code_dirty"] = text_of(*code, "dirty");
  }
  return tags;
}

std::vector<track::ArtifactEntry> artifacts_of(const fs::path& run_dir, const json& info) {
  std::vector<track::ArtifactEntry> artifacts;
  auto add = [&](const char* name, const char* file_key, const char* sha_key) {
    std::string file = text_of(info, file_key);
    if (file.empty()) return;
    std::error_code error;
    auto bytes = fs::file_size(run_dir / file, error);
    artifacts.push_back({name, file, sha_key ? text_of(info, sha_key) : std::string(),
                         error ? -1 : static_cast<int64_t>(bytes)});
  };
  add("params", "params_file", "params_sha256");
  add("state", "state_file", nullptr);
  return artifacts;
}

}  // namespace

track::RunRecord run_record(const fs::path& run_dir, const json& info) {
  track::RunRecord run;
  run.experiment = text_of(info, "experiment");
  run.run_id = text_of(info, "run_id");
  if (run.run_id.empty()) run.run_id = run_dir.filename().string();
  if (run.experiment.empty()) run.experiment = run_dir.parent_path().filename().string();
  run.run_dir = run_dir.string();
  run.status = text_of(info, "status");
  run.started_at = text_of(info, "started_at");
  run.finished_at = text_of(info, "finished_at");
  run.info = info;
  if (std::optional<std::string> config =
          io::read_regular_file_if_present(run_dir / "config.toml", io::kMaxRecordBytes)) {
    run.params = config_keys(*config);
  }
  run.tags = identity_tags(info);
  if (info.contains("resumes") && info["resumes"].is_array()) {
    for (const json& resume : info["resumes"]) {
      if (!resume.is_object()) continue;
      std::string from = text_of(resume, "savepoint");
      if (from.empty()) from = fmt::format("step {}", text_of(resume, "from_step"));
      run.lineage.push_back({"resumed_from", from});
    }
  }
  run.artifacts = artifacts_of(run_dir, info);
  return run;
}

std::vector<track::MetricPoint> metric_points(const json& record) {
  std::vector<track::MetricPoint> points;
  if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) {
    return points;
  }
  std::string kind = text_of(record, "kind");
  if (kind != "train" && kind != "eval") return points;
  int64_t step = record["step"].get<int64_t>();
  double wall_time =
      record.contains("time") && record["time"].is_number() ? record["time"].get<double>() : 0.0;
  for (const auto& [name, value] : record.items()) {
    if (name == "kind" || name == "step" || name == "epoch" || name == "time") continue;
    std::optional<double> number = metric_value(value);
    if (number) points.push_back({fmt::format("{}/{}", kind, name), step, *number, wall_time});
  }
  return points;
}

std::vector<track::MetricPoint> read_metric_points(const fs::path& run_dir) {
  fs::path path = run_dir / "metrics.jsonl";
  std::istringstream in(io::read_regular_file_if_present(path, io::kMaxMetricsBytes).value_or(""));
  std::vector<track::MetricPoint> points;
  int64_t number = 0;
  int64_t torn = 0;  // a line that is not JSON: acceptable only as the last one
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (torn) {
      fail(kUnknownSite, fmt::format("{}:{}: not a JSON record", path.string(), torn),
           "only the last line may be torn (a run that crashed mid-write); fix or remove it");
    }
    if (line.empty()) continue;
    std::optional<json> record = io::parse_json_if_valid(line);
    if (!record) {
      torn = number;
      continue;
    }
    for (track::MetricPoint& point : metric_points(*record)) points.push_back(std::move(point));
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
      track::RunRecord record = run_record(run_dir, read_run_json(run_dir));
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
