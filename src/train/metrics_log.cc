// The background metrics.jsonl writer (metrics_log.h).
#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "kiln/error.h"
#include "train/run_observer.h"

namespace kiln::train {

MetricsLog::MetricsLog(std::filesystem::path path, std::FILE* file, int64_t lines)
    : path_(std::move(path)), file_(file), written_lines_(lines), writer_([this] { work(); }) {}

MetricsLog::~MetricsLog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
  std::fclose(file_);
}

void MetricsLog::rethrow_failure() {
  if (!failure_) return;
  std::exception_ptr failure = std::exchange(failure_, nullptr);
  std::rethrow_exception(failure);
}

void MetricsLog::append(track::MetricsLine line) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    rethrow_failure();
    // The writer sleeps on an empty queue without a timer: the first line starts its
    // interval. Waking it for every line would cost a context switch per step.
    wake = queue_.empty() || queue_.size() + 1 >= kMaxQueued;
    queue_.push_back(std::move(line));
  }
  if (wake) wake_.notify_one();
}

void MetricsLog::flush() {
  std::unique_lock lock(mutex_);
  ++flushes_waiting_;
  wake_.notify_one();
  idle_.wait(lock, [&] { return queue_.empty() && !writing_; });
  --flushes_waiting_;
  rethrow_failure();
}

int64_t MetricsLog::lines() {
  flush();
  std::lock_guard lock(mutex_);
  return written_lines_;
}

void MetricsLog::observe(RunObserver* observer) {
  flush();
  std::lock_guard lock(mutex_);
  observer_ = observer;
}

std::exception_ptr MetricsLog::write(const std::vector<track::MetricsLine>& batch) {
  std::string text;
  for (const track::MetricsLine& line : batch) {
    text += track::metrics_line_text(line);
    text += '\n';
  }
  int error = io::injected_write_fault(path_);
  if (error == 0 &&
      (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)) {
    error = errno;
  }
  if (error == 0) return nullptr;
  // What did not fit must not be half-written on the next try.
  std::clearerr(file_);
  try {
    fail(kUnknownSite, fmt::format("cannot write {}: {}", path_.string(), std::strerror(error)),
         error == ENOSPC ? "free space on that file system" : "");
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

void MetricsLog::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, everything written
    // Let the interval's lines gather, unless someone needs them written now.
    wake_.wait_for(lock, kWriteInterval, [&] {
      return stopping_ || flushes_waiting_ > 0 || queue_.size() >= kMaxQueued;
    });
    std::vector<track::MetricsLine> batch = std::move(queue_);
    queue_.clear();
    RunObserver* observer = observer_;
    writing_ = true;
    lock.unlock();
    std::exception_ptr failure = write(batch);
    if (!failure && observer != nullptr) {
      for (const track::MetricsLine& line : batch) observer->metrics_appended(line);
    }
    lock.lock();
    writing_ = false;
    if (failure) {
      // The batch is lost to the file, not to the run: its error ends the run, whose
      // savepoints count only the lines written before it.
      failure_ = failure;
    } else {
      written_lines_ += static_cast<int64_t>(batch.size());
    }
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace kiln::train
