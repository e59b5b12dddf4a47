// A training run's directory, runs/<experiment>/<run-id>/: the resolved config, one JSON
// line of metrics per step and per evaluation, the final weights, and run.json, which
// says whether the run is still running, completed, failed, was interrupted or crashed.
// run.json is rewritten atomically at each change of status (in place as a last resort
// when the disk is full), so a reader (or a later `kiln resume`) never mistakes a crashed
// or failed run for a finished one: only "completed" runs are.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "track/metrics_line.h"
#include "track/run_info.h"
#include "train/metrics_log.h"
#include "train/run_lock.h"
#include "train/run_observer.h"

namespace kiln::train {

class RunDirectory {
 public:
  // Creates runs_dir/experiment/<run-id> and takes its lock (run_lock.h), where run-id is the start
  // time (UTC, to the second) and the first 8 hex digits of `config_sha256` (the identity's,
  // identity_toml); a second run in the same second with the same config gets "-2", "-3"... Writes
  // run.json (status "running", with this process's pid and host), then config.toml. First marks
  // the experiment's stale runs as crashed (mark_crashed_runs). If run.json cannot be written the
  // directory is removed; a later failure is recorded in it as "failed".
  static RunDirectory create(const std::filesystem::path& runs_dir, const std::string& experiment,
                             const std::string& resolved_config, const std::string& config_sha256,
                             track::RunInfo run_info);
  // Continues an existing run (kiln resume): keeps the first `metrics_lines` lines of
  // metrics.jsonl (what was recorded up to the savepoint resumed from; the rest is redone),
  // sets run.json's status back to "running" under this process, and appends from there.
  static RunDirectory reopen(const std::filesystem::path& path, track::RunInfo run_info,
                             int64_t metrics_lines);
  // Rank r > 0 of an MPI job: a view of rank 0's run directory at `path` that writes
  // nothing (only rank 0 writes a run's files and its catalog entry). Metrics lines are
  // counted, not written.
  static RunDirectory follower(const std::filesystem::path& path, track::RunInfo run_info,
                               int64_t metrics_lines);
  bool writes() const { return writes_; }

  RunDirectory(RunDirectory&&) noexcept;
  RunDirectory& operator=(RunDirectory&&) = delete;
  ~RunDirectory();

  const std::filesystem::path& path() const { return path_; }
  const std::string& run_id() const { return run_id_; }
  track::RunInfo& info() { return info_; }
  // The runs of the same experiment that create() found stale and marked "crashed".
  const std::vector<std::filesystem::path>& crashed_runs() const { return crashed_runs_; }

  // From now on, tells `observer` (which must outlive this) of each write; the current
  // run.json first.
  void observe(RunObserver* observer);

  // Queues one line for metrics.jsonl, with the wall time added as its time (Unix seconds);
  // a background writer appends and flushes it within MetricsLog::kWriteInterval. A failed
  // write is an error naming metrics.jsonl and the reason, thrown by the next call that
  // touches the metrics (this one, metrics_lines(), write_info()).
  void append_metrics(track::MetricsLine line);
  // Lines in metrics.jsonl, once everything queued is written.
  int64_t metrics_lines() { return writes_ ? metrics_->lines() : follower_lines_; }
  // Writes what metrics are queued, then rewrites run.json with the current info
  // (atomically; in place if that fails): a reader of a finished run.json finds every line.
  void write_info();
  // Sets status "completed" and writes run.json.
  void finish_completed();
  // Set status "failed" (with the error) or "interrupted" (with the signal and the steps
  // taken) and write run.json. They never throw, since they run while another error is
  // being reported: they return what went wrong writing run.json, or "".
  std::string finish_failed(const std::string& error) noexcept;
  std::string finish_interrupted(const std::string& signal_name, int64_t steps) noexcept;

 private:
  RunDirectory(std::filesystem::path path, std::string run_id, track::RunInfo info);
  // Opens metrics.jsonl with fopen `mode` ("w" for a new run, "a" to continue one that
  // holds `lines` lines) and starts its writer.
  void open_metrics(const char* mode, int64_t lines);
  void write_run_json();
  std::string finish_unfinished() noexcept;
  // First, so that it is released last: after the destructor's final run.json.
  RunLock lock_;
  std::filesystem::path path_;
  std::string run_id_;
  track::RunInfo info_;
  std::unique_ptr<MetricsLog> metrics_;
  std::vector<std::filesystem::path> crashed_runs_;
  RunObserver* observer_ = nullptr;
  bool writes_ = true;
  int64_t follower_lines_ = 0;  // a follower's metrics lines
};

// Marks each run under experiment_dir whose run.json says "running" but whose process is
// gone (same host, and no process with its pid, or one started at another time) as
// "crashed", and returns their directories. Runs of other hosts are left alone: from here
// they cannot be told apart from live ones.
std::vector<std::filesystem::path> mark_crashed_runs(const std::filesystem::path& experiment_dir);

// What is wrong with `run_dir`'s final weights against its run.json `info`: "" when
// params.safetensors is there with the SHA-256 run.json records, else the problem in words
// ("params.safetensors is missing", "the SHA-256 of params.safetensors is X, run.json
// records Y"). `kiln resume` and `kiln generate` check the same thing.
std::string final_weights_problem(const std::filesystem::path& run_dir, const track::RunInfo& info);

// Whether run.json `info` says "running" for a process that may still be running it: one
// of this host that is still there, or one of another host (which cannot be judged).
bool run_may_be_running(const track::RunInfo& info);

// The current UTC time as ISO 8601 ("2026-11-30T22:54:17Z").
std::string utc_timestamp();

}  // namespace kiln::train
