// The background metrics.jsonl writer (metrics_log.h), on a BackgroundWorker.
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
    : path_(std::move(path)),
      file_(file),
      written_lines_(lines),
      writer_([this](std::vector<track::MetricsLine>& batch) { return write(batch); },
              {.batch_window = kWriteInterval, .batch_ready = kMaxQueued}) {}

MetricsLog::~MetricsLog() {
  writer_.drain();
  std::fclose(file_);
}

void MetricsLog::append(track::MetricsLine line) {
  writer_.push(std::move(line));
}

void MetricsLog::flush() {
  writer_.flush();
}

int64_t MetricsLog::lines() {
  flush();
  return written_lines_;
}

void MetricsLog::observe(RunObserver* observer) {
  flush();
  observer_ = observer;
}

BatchProgress MetricsLog::write(std::vector<track::MetricsLine>& batch) {
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
  if (error != 0) {
    // What did not fit must not be half-written on the next try. The batch is lost to the
    // file, not to the run: its error ends the run, whose savepoints count only the lines
    // written before it.
    std::clearerr(file_);
    fail(kUnknownSite, fmt::format("cannot write {}: {}", path_.string(), std::strerror(error)),
         error == ENOSPC ? "free space on that file system" : "");
  }
  written_lines_ += static_cast<int64_t>(batch.size());
  if (RunObserver* observer = observer_) {
    for (const track::MetricsLine& line : batch) observer->metrics_appended(line);
  }
  return {batch.size()};
}

}  // namespace kiln::train
