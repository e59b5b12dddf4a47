// Writes a run's records to the catalog from a thread of its own, so that the training loop
// never waits for SQLite: the trainer queues the run's record and its metrics, and the
// recorder commits them in batches (one transaction per batch, at most every half second).
// When the catalog is locked, corrupt or unwritable, the records stay queued and are retried;
// finish() waits a bounded time and returns what could not be recorded, which the run
// reports. The run directory has everything either way (`kiln runs reindex`).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

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
  void work();
  // Applies `ops` in order; returns how many were applied (all, unless one failed, whose
  // error is then in problem_).
  size_t apply(std::vector<Op>& ops);

  std::filesystem::path path_;
  int busy_timeout_ms_;
  std::optional<Catalog> catalog_;  // opened by the worker, on first use
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Op> queue_;
  std::string problem_;    // the latest failure; cleared by a success
  bool applying_ = false;  // the worker is writing a batch
  bool draining_ = false;  // finish() was called: no more batch windows
  bool stopping_ = false;
  bool finished_ = false;
  std::thread worker_;
};

}  // namespace kiln::track
