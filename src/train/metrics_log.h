// A run's metrics.jsonl, written from a thread of its own so that logging a step costs the
// training thread one queue push. The writer wakes on a timer (kWriteInterval), or early when
// a reader needs the file complete, and writes all queued lines with one write and one
// flush; then it tells the observer (run tracking) of each line, on its thread.
//
// What this trades: a crash loses at most the lines of the last interval (a savepoint never
// counts lines that are not in the file: lines() writes the queue first). A failed write
// (disk full) surfaces at the next append(), flush() or lines(), as the same error naming
// metrics.jsonl that a synchronous write would have raised; the lines before it stay.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/background_worker.h"
#include "track/metrics_line.h"

namespace kiln::train {

class RunObserver;

class MetricsLog {
 public:
  // How long a line may wait in the queue: what a crash can lose, and how far behind a
  // live `kiln report` or TensorBoard may be.
  static constexpr std::chrono::milliseconds kWriteInterval{250};
  // A queue this long is written at once (bounds the memory of a very fast loop).
  static constexpr size_t kMaxQueued = 4096;

  // Takes `file`, open for writing at the end of `path`, which holds `lines` lines already.
  MetricsLog(std::filesystem::path path, std::FILE* file, int64_t lines);
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  // Writes what is queued (errors are dropped: the run's failure is being recorded
  // elsewhere by then), stops the thread and closes the file.
  ~MetricsLog();

  // Queues one line; throws a failed earlier write's error.
  void append(track::MetricsLine line);
  // Returns once every queued line is written and observed; throws a failed write's error.
  void flush();
  // flush(), then the lines in the file.
  int64_t lines();
  // From the next write on, tells `observer` of each line written (after a flush(), so that
  // the observer is never called from two threads at once).
  void observe(RunObserver* observer);

 private:
  // Writes `batch` as one block and tells the observer; throws the error naming
  // metrics.jsonl.
  BatchProgress write(std::vector<track::MetricsLine>& batch);

  std::filesystem::path path_;
  std::FILE* file_;
  std::atomic<int64_t> written_lines_;
  std::atomic<RunObserver*> observer_{nullptr};
  BackgroundWorker<track::MetricsLine> writer_;  // last: its thread uses the members above
};

}  // namespace kiln::train
