// Progress of a training run on stderr: on a terminal, one line redrawn in place (a bar
// with step, loss, accuracy, samples/s, data wait and ETA), at most ten times a second; otherwise
// (a log file, CI) a plain line every `log_every` steps. Messages (evaluations, warnings)
// print on their own lines without breaking the bar. Silent prints nothing (tests, --quiet).
// Printing is best effort: a full or closed stderr loses the progress, never the run.
//
// A run is never silent for long: when nothing was printed or finished for
// `stall_notice` (a step of minutes on a large convolution, the first step's compilation,
// an evaluation of a large test set), a thread of the Progress prints what is in flight
// and for how long, then again each time as long again has passed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

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

inline constexpr std::chrono::seconds kStallNotice{30};

class Progress {
 public:
  enum class Mode { kBar, kLines, kSilent };
  Progress(Mode mode, int64_t log_every, std::FILE* out = stderr,
           std::chrono::steady_clock::duration stall_notice = kStallNotice);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The steps done before this process's first (a resumed run's) and the run's total, for
  // the stall notice before the first update.
  void starting_at(int64_t steps_done, int64_t total_steps);
  void update(const StepProgress& progress);
  void message(const std::string& line);
  // What the run does now, for the stall notice ("evaluating epoch 2 on the test set");
  // "" goes back to "step N of M", N the step after the last that update() reported.
  void working_on(std::string what);
  // Ends the bar's line (if one is drawn). The stall notice stays off until the next
  // update, message or working_on.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void clear_bar();      // mutex_ held
  void mark_activity();  // mutex_ held
  void watch_for_stalls();
  void print_stall_notice(Clock::duration quiet_for);  // mutex_ held

  Mode mode_;
  int64_t log_every_;
  std::FILE* out_;
  Clock::duration stall_notice_;

  std::mutex mutex_;
  bool bar_drawn_ = false;
  Clock::time_point last_draw_{};
  Clock::time_point last_activity_;
  Clock::time_point next_notice_;
  bool watching_ = true;  // false after finish(), until the next activity
  int64_t last_step_ = 0;
  int64_t total_steps_ = 0;
  bool stepped_ = false;  // update() was called: the program is compiled
  std::string working_on_;
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread watcher_;  // none in kSilent mode
};

// Writes `text` to `stream` and flushes it, ignoring failures (a full device, a closed
// pipe): what a run prints is a courtesy, its record is the run directory.
void print_best_effort(std::FILE* stream, std::string_view text);

// "1:05" / "1:02:03": durations for ETAs and summaries.
std::string format_duration(double seconds);

}  // namespace kiln::train
