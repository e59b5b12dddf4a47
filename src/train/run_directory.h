// A training run's directory, runs/<experiment>/<run-id>/: the resolved config, one JSON
// line of metrics per step and per evaluation, the final weights, and run.json, which
// says whether the run is still running, completed or failed. run.json is rewritten
// atomically at each change of status, so a reader (or a later `kiln resume`) never
// mistakes a crashed or failed run for a finished one: only "completed" runs are.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::train {

class RunDirectory {
 public:
  // Creates runs_dir/experiment/<run-id>, where run-id is the start time (UTC, to the
  // second) and the first 8 hex digits of the config's SHA-256; a second run in the same
  // second with the same config gets "-2", "-3"... Writes config.toml and run.json
  // (status "running").
  static RunDirectory create(const std::filesystem::path& runs_dir, const std::string& experiment,
                             const std::string& resolved_config, nlohmann::json run_info);
  RunDirectory(RunDirectory&&) noexcept;
  RunDirectory& operator=(RunDirectory&&) = delete;
  ~RunDirectory();

  const std::filesystem::path& path() const { return path_; }
  const std::string& run_id() const { return run_id_; }
  nlohmann::json& info() { return info_; }

  // Appends one line to metrics.jsonl (flushed, so that a crash keeps what was written).
  void append_metrics(const nlohmann::json& record);
  // Rewrites run.json with the current info (atomically).
  void write_info();
  // Sets status "completed" or "failed" (with the error) and writes run.json.
  void finish_completed();
  void finish_failed(const std::string& error);

 private:
  RunDirectory(std::filesystem::path path, std::string run_id, nlohmann::json info);
  std::filesystem::path path_;
  std::string run_id_;
  nlohmann::json info_;
  std::FILE* metrics_ = nullptr;
};

// The current UTC time as ISO 8601 ("2026-11-30T22:54:17Z").
std::string utc_timestamp();

}  // namespace kiln::train
