// Progress of a training run on stderr: on a terminal, one line redrawn in place (a bar
// with step, loss, accuracy, samples/s, data wait and ETA), at most ten times a second; otherwise
// (a log file, CI) a plain line every `log_every` steps. Messages (evaluations, warnings)
// print on their own lines without breaking the bar. Silent prints nothing (tests, --quiet).
// Printing is best effort: a full or closed stderr loses the progress, never the run.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln::train {

struct StepProgress {
  int64_t step = 0;  // steps completed, 1-based
  int64_t total_steps = 0;
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  double loss = 0;      // mean over the epoch so far
  double accuracy = 0;  // over the epoch so far, in [0, 1]
  double samples_per_second = 0;
  double eta_seconds = 0;
  double data_wait_ms = 0;  // how long the step waited for its batch
};

class Progress {
 public:
  enum class Mode { kBar, kLines, kSilent };
  Progress(Mode mode, int64_t log_every);
  void update(const StepProgress& progress);
  void message(const std::string& line);
  // Ends the bar's line (if one is drawn).
  void finish();

 private:
  void clear_bar();
  Mode mode_;
  int64_t log_every_;
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

// Writes `text` to `stream` and flushes it, ignoring failures (a full device, a closed
// pipe): what a run prints is a courtesy, its record is the run directory.
void print_best_effort(std::FILE* stream, std::string_view text);

// "1:05" / "1:02:03": durations for ETAs and summaries.
std::string format_duration(double seconds);

}  // namespace kiln::train
