// What run tracking is told of a run directory's writes (RunDirectory::observe).
#pragma once

#include <filesystem>

#include "track/metrics_line.h"
#include "track/run_info.h"

namespace kiln::train {

// Told of each write a RunDirectory makes, after the write succeeded. It must not throw:
// recording a run elsewhere never stops it. info_written is called on the thread that
// writes run.json, metrics_appended on the metrics writer's thread (metrics_log.h); the two
// are never called at once, and every line written before a run.json is told before it.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void info_written(const std::filesystem::path& run_dir, const track::RunInfo& info) = 0;
  virtual void metrics_appended(const track::MetricsLine& line) = 0;
};

}  // namespace kiln::train
