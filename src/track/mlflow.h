// Mirroring kiln runs to an MLflow tracking server (docs/tracking.md, "MLflow").
//
// MlflowMirror follows a run while it trains: every method only queues, and one background
// thread sends, so a slow, down or misconfigured server never slows a step. push_run_to_mlflow
// sends a finished run in one go (`kiln runs push RUN`). Both go through the same sender: the
// experiment is looked up by name (created if missing), then the run is created and fed
// with log-batch calls (metrics in order, up to 1000 a call; params and tags 100), its
// artifacts uploaded through the server's artifact proxy, and its status set last.
// Failures that may pass (unreachable, timeouts, 5xx) are retried with capped exponential
// backoff until the caller's deadline; what could not be sent is counted in the report.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::track {

struct MlflowRetry {
  std::chrono::milliseconds first_delay{250};
  std::chrono::milliseconds max_delay{8000};
  double factor = 2.0;
};

struct MlflowOptions {
  std::string uri;         // "http://host:5000"
  std::string experiment;  // created if the server has none by that name
  std::chrono::milliseconds request_timeout{5000};
  // Records (a metric, a param, a tag, an artifact) waiting to be sent; beyond this the
  // newest are dropped and counted, so a long outage costs bounded memory.
  size_t max_queued = 100000;
  MlflowRetry retry;
  // How long the mirror lets records gather before sending less than a full batch.
  std::chrono::milliseconds flush_interval{1000};
};

enum class MlflowStatus { kRunning, kFinished, kFailed, kKilled };
const char* mlflow_status_name(MlflowStatus status);  // "FINISHED", MLflow's spelling

struct MlflowMetric {
  std::string key;
  double value = 0;
  int64_t step = 0;
  int64_t timestamp_ms = 0;  // Unix time
};

struct MlflowArtifact {
  std::filesystem::path local_path;  // read when it is sent, not when it is logged
  std::string artifact_path;         // relative, '/'-separated: "config/train.toml"
};

// A finished run, as push_run_to_mlflow sends it.
struct MlflowRunRecord {
  std::string run_name;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  MlflowStatus status = MlflowStatus::kFinished;
  std::map<std::string, std::string> params;
  std::map<std::string, std::string> tags;
  std::vector<MlflowMetric> metrics;  // sent in this order
  std::vector<MlflowArtifact> artifacts;
  // An MLflow run id to complete instead of creating a run: a mirror that did not finish
  // leaves one, and MLflow ignores a metric it already holds (same key, step, timestamp
  // and value), so pushing again fills the gaps without duplicates.
  std::string mlflow_run_id;
};

struct MlflowCounts {
  int64_t metrics = 0;
  int64_t params = 0;
  int64_t tags = 0;
  int64_t artifacts = 0;
  int64_t total() const { return metrics + params + tags + artifacts; }
  // "5 metrics, 1 param": the non-zero counts, for messages ("nothing" when all are zero).
  std::string describe() const;
};

struct MlflowReport {
  // Every record sent and the run's final status set.
  bool complete = false;
  MlflowCounts sent;
  MlflowCounts unsent;    // still queued, or in flight, when sending stopped
  MlflowCounts dropped;   // the queue was full
  MlflowCounts rejected;  // refused by MLflow, or invalid for it (a bad key, a missing file)
  std::string experiment_id;
  std::string run_id;  // empty if the run was never created
  // The first few things that went wrong, as sentences for the user; unless complete, the
  // last one says what did not get to MLflow and why.
  std::vector<std::string> problems;
};

class MlflowMirror {
 public:
  explicit MlflowMirror(MlflowOptions options);
  // Stops sending at once, whatever is queued, if finish() was not called.
  ~MlflowMirror();
  MlflowMirror(const MlflowMirror&) = delete;
  MlflowMirror& operator=(const MlflowMirror&) = delete;

  // None of these waits for the network or throws. Records logged before start_run wait
  // for it; records logged after finish are dropped.
  void start_run(std::string run_name, int64_t start_time_ms,
                 std::map<std::string, std::string> tags = {}) noexcept;
  void log_params(const std::map<std::string, std::string>& params) noexcept;
  void log_metric(std::string key, double value, int64_t step, int64_t timestamp_ms) noexcept;
  void set_tag(std::string key, std::string value) noexcept;
  void log_artifact(std::filesystem::path local_path, std::string artifact_path) noexcept;

  // Sends what is queued, sets the run's status, and returns within `max_wait` (plus at
  // most about a second to abandon a request in flight) whether or not the server
  // answered. A second call returns the first one's report.
  MlflowReport finish(MlflowStatus status, int64_t end_time_ms,
                      std::chrono::seconds max_wait) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // null only if even the mirror's memory could not be had
};

// Sends a whole run and sets its status, retrying until `max_wait` has passed.
MlflowReport push_run_to_mlflow(const MlflowOptions& options, const MlflowRunRecord& run,
                                std::chrono::seconds max_wait) noexcept;

}  // namespace kiln::track
