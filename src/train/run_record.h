// What the run catalog (and the MLflow mirror) keep of a run, read from what the run
// directory holds: run.json, config.toml and metrics.jsonl. The trainer records runs with
// it as they go, and `kiln runs reindex` / `kiln runs push` read finished ones.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "track/catalog.h"
#include "track/run_info.h"

namespace kiln::train {

// The record of the run in `run_dir` whose run.json says `info`: config keys as params
// (from config.toml; none when it is missing), identity as tags, resumes as lineage, the
// weights as artifacts.
track::RunRecord run_record(const std::filesystem::path& run_dir, const track::RunInfo& info);
// The same with the config keys given (a run's config.toml does not change while it runs).
track::RunRecord run_record(const std::filesystem::path& run_dir, const track::RunInfo& info,
                            std::map<std::string, std::string> config_params);
// The keys of `run_dir`/config.toml ("section.key" -> value); none when it is missing.
std::map<std::string, std::string> config_params_of(const std::filesystem::path& run_dir);

// Every point of `run_dir`/metrics.jsonl (track::metric_points of each line). A last line
// that is not JSON (torn by a crash) is left out; any other is an error naming the file and
// line.
std::vector<track::MetricPoint> read_metric_points(const std::filesystem::path& run_dir);

}  // namespace kiln::train

namespace kiln::train {

struct ReindexReport {
  int64_t runs = 0;
  int64_t metric_points = 0;
  std::vector<std::string> problems;  // one per run directory that could not be recorded
};

// Records every run directory under `runs_dir` (<runs_dir>/<experiment>/<run-id>/run.json)
// in `catalog`, replacing what it held for them: the catalog rebuilt from the directories.
ReindexReport reindex_runs(const std::filesystem::path& runs_dir, track::Catalog& catalog);

}  // namespace kiln::train
