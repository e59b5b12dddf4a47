// Profiling a window of train steps: the trace (`kiln train --trace-steps A-B`), the
// roofline and the memory report. Before step A it waits for the device to be idle, resets
// the allocator's peak and starts a trace recording; after step B it waits again, stops,
// and turns what was recorded into run.json's "roofline" and "memory" and, when asked,
// <run dir>/trace.json (docs/profiling.md).
//
// Without --trace-steps a run still profiles a short window of steady steps (kAutoFirst to
// kAutoLast, within the run) for its roofline and memory report, without a trace file: two
// device synchronizations and a few microseconds per kernel, once per run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kiln/device.h"
#include "train/train_step.h"

namespace kiln::train {

struct StepRange {
  int64_t first = 0;  // 1-based train steps, inclusive
  int64_t last = 0;
  friend bool operator==(const StepRange&, const StepRange&) = default;
};

// "A-B" or "A" (one step); a malformed or empty range is an Error naming the text.
StepRange parse_step_range(const std::string& text);

class StepProfiler {
 public:
  static constexpr int64_t kAutoFirst = 3;  // after the first step's compilation and warm-up
  static constexpr int64_t kAutoLast = 7;

  // `requested`: --trace-steps, checked against the steps this process runs,
  // (first_step, last_step]; an Error names both when it falls outside. Without it the
  // auto window, clipped to the run (none when the run is too short for one).
  StepProfiler(std::optional<StepRange> requested, int64_t first_step, int64_t last_step);
  // A run that ends inside its window (a failure, an interruption) stops the recording.
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;
  // Where the trace goes (with --trace-steps): <run dir>/trace.json.
  void set_trace_path(std::filesystem::path path) { trace_path_ = std::move(path); }

  // Around dispatching train step `step_number` (1-based).
  void before_step(int64_t step_number);
  // `compiled`: what the step ran (TrainStep::compiled), read only after the window's
  // last step.
  void after_step(int64_t step_number, const TrainState& state,
                  const std::function<Compiled()>& compiled);

  bool done() const { return !sections_.empty(); }
  // run.json's sections "roofline", "memory" and "trace" (each as JSON text) once the
  // window has run, else none.
  const std::map<std::string, std::string>& sections() const { return sections_; }
  // Whether the window's trace was written (to the trace path).
  bool trace_written() const { return trace_written_; }
  std::optional<StepRange> window() const { return window_; }

 private:
  std::optional<StepRange> window_;
  bool write_trace_;
  std::filesystem::path trace_path_;
  bool recording_ = false;  // this profiler began the recording that is on
  double window_start_s_ = 0;
  MemoryStats stats_at_start_;
  int64_t dispatch_start_ns_ = 0;
  std::map<std::string, std::string> sections_;
  bool trace_written_ = false;
};

}  // namespace kiln::train
