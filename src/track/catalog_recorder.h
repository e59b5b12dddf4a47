// Writes a run's records to the catalog from a thread of its own, so that the training loop
// never waits for SQLite: the trainer queues the run's record and its metrics, and the
// recorder commits them in batches (one transaction per batch, at most every half second).
// When the catalog is locked, corrupt or unwritable, the records stay queued and are retried;
// finish() waits a bounded time and returns what could not be recorded, which the run
// reports. The run directory has everything either way (`kiln runs reindex`).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/background_worker.h"
#include "track/catalog.h"

namespace kiln::track {

class CatalogRecorder {
 public:
  explicit CatalogRecorder(std::filesystem::path path, int busy_timeout_ms = 5000);
  CatalogRecorder(const CatalogRecorder&) = delete;
  CatalogRecorder& operator=(const CatalogRecorder&) = delete;
  // finish()es with a short deadline when finish() was not called.
  ~CatalogRecorder();

  // Each call only queues; records reach the catalog in the order they were queued.
  void record_run(RunRecord run);
  void add_metrics(std::string run_key, std::vector<MetricPoint> points);
  void replace_metrics(std::string run_key, std::vector<MetricPoint> points);

  // Waits about `max_wait` (plus, at worst, one busy timeout of an attempt under way) for
  // the queue to be recorded and stops the thread. Returns ""
  // when everything was recorded, else what was not and why ("run catalog runs/kiln.db:
  // ...: database is locked; 2 records and 1200 metric points not recorded").
  std::string finish(std::chrono::milliseconds max_wait);

 private:
  struct Metrics {
    std::string run_key;
    std::vector<MetricPoint> points;
    bool replace = false;
  };
  using Op = std::variant<RunRecord, Metrics>;

  void push(Op op);
  // Records `ops` in order until one fails, whose error is then in problem_; the rest are
  // retried.
  BatchProgress apply(std::vector<Op>& ops);

  std::filesystem::path path_;
  int busy_timeout_ms_;
  // The worker's alone while it runs: opened on first use, and the latest failure (cleared
  // by a success), which finish() reads once the worker has stopped.
  std::optional<Catalog> catalog_;
  std::string problem_;
  bool finished_ = false;
  BackgroundWorker<Op> worker_;  // last: its thread uses the members above
};

}  // namespace kiln::track
