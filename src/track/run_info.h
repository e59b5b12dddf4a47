// run.json, the record of one training run, as a type: the trainer writes it through this,
// and `kiln resume`, `kiln generate`, `kiln report`, the catalog and `kiln runs` read it
// through this, so the format has one owner (docs/tracking.md, "The run directory").
//
// The fields are those kiln reads back: the run's name, its life (status, times, the
// process that runs it), its identity, its resumes and its result. The rest of run.json
// (environment, dataset, timing, memory, jit, data_wait, ...) are reports for people and
// tools, each written whole by one producer and read only for display: they travel as
// sections of JSON text, so that this header needs no JSON library and a key a later kiln
// adds survives a rewrite by this one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::track {

// What makes two runs comparable: the same config, data, kernels and kiln.
struct RunIdentityRecord {
  std::string config_sha256;
  std::string data_sha256;
  std::string kernels;
  std::string kiln_version;
};

// One `kiln resume` of the run.
struct ResumeRecord {
  std::string at;  // UTC, ISO 8601
  int64_t from_step = 0;
  std::string previous_status;
  std::string savepoint;  // relative to the run directory; empty when none was usable
  std::vector<std::string> skipped_savepoints;  // damaged ones, with why
  std::vector<std::string> changed;             // identity changes allowed by --allow-changed
  std::string environment;                      // JSON text (track/run_environment.h)
};

// Where the run's MLflow mirror sent it (docs/tracking.md).
struct MlflowMirrorRecord {
  std::string uri;
  std::string experiment_id;
  std::string run_id;
  bool complete = false;  // every record was sent and the MLflow run was ended
};

struct FinalMetrics {
  double test_accuracy = 0;
  double test_loss = 0;
  double train_loss = 0;
};

struct RunInfo {
  // The run's name.
  std::string experiment;
  std::string run_id;
  std::string config_sha256;
  // Its life. status is "running", "completed", "failed", "interrupted" or "crashed";
  // only a "completed" run has final weights. Empty text means absent.
  std::string status;
  std::string started_at;  // UTC, ISO 8601
  std::string finished_at;
  std::optional<int64_t> pid;              // the process running (or that ran) it
  std::string host;                        // that process's host
  std::optional<int64_t> pid_start_ticks;  // tells that process from a later one with its id
  std::string error;                       // why it failed or crashed
  std::string signal;                      // what interrupted it
  std::string crash_detected_at;
  // Its identity.
  std::string kiln_version;
  std::string kernels;  // "fast" or "reference": they give different bits
  std::optional<int64_t> seed;
  std::optional<RunIdentityRecord> identity;
  std::vector<ResumeRecord> resumes;
  // Its result.
  std::optional<int64_t> steps;
  std::optional<int64_t> skipped_steps;
  std::string params_file;  // relative to the run directory
  std::string params_sha256;
  std::string state_file;
  std::string last_savepoint;
  std::optional<double> seconds;
  std::optional<double> median_step_ms;
  std::optional<double> first_step_seconds;
  std::optional<FinalMetrics> final_metrics;
  std::optional<MlflowMirrorRecord> mlflow;
  // Every other key of run.json: its value as JSON text, by key. A key above whose value
  // has another type than the field's (an edited or damaged file) is kept here, verbatim,
  // and its field stays absent. Inside the typed records (identity, a resume, final,
  // mlflow) only their own fields are kept (a resume's environment as JSON text).
  std::map<std::string, std::string> sections;

  // "<experiment>/<run id>".
  std::string key() const { return experiment + "/" + run_id; }
  // The section `name` as JSON text, or "" when there is none.
  std::string section(std::string_view name) const;
};

// run.json's text: pretty with `indent` spaces (the file uses 2) or compact for indent < 0,
// keys in sorted order. Text that is not UTF-8 (a path, an error quoting one) is written
// with U+FFFD in its place.
std::string run_info_text(const RunInfo& info, int indent = 2);

// Reads run.json's text; `where` names it in errors. Text that is not JSON, or JSON that
// is not an object, is a kiln::Error naming `where`.
RunInfo parse_run_info(std::string_view text, const std::string& where);

// `run_dir`/run.json. A directory without one, or no directory, is a kiln::Error that says
// so and what a run directory is.
RunInfo read_run_info(const std::filesystem::path& run_dir);

}  // namespace kiln::track
