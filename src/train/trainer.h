// `kiln train`: a whole training run from a resolved config: load the data, build the
// model and optimizer, check everything that can be checked (run_checks.h), create the run
// directory, run the jitted steps epoch by epoch with an evaluation after each, and save
// the final weights. Returns a summary; a run that fails (non-finite loss, gradient or
// evaluation, too many skipped steps, or any error after the run directory exists) is
// recorded as failed in run.json and reported by exception, and one asked to stop is
// recorded as interrupted (InterruptedError).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/step_profiler.h"

namespace kiln::train {

// A quality a run may stop at (kiln bench cost): test_accuracy at least `value`, or
// test_loss at most `value`, in an epoch's evaluation.
struct QualityTarget {
  std::string metric;  // "test_accuracy" or "test_loss"
  double value = 0;
  bool reached(double test_accuracy, double test_loss) const;
};

struct TrainOptions {
  bool interactive = false;              // draw a progress bar (stderr is a terminal)
  bool quiet = false;                    // no progress lines and no config echo (tests)
  double process_start_age_seconds = 0;  // how long the process ran before train() began
  double config_seconds = 0;             // of which loading the config (the startup breakdown)
  // Polled between steps: once non-zero (a signal handler stores the signal's number) the
  // run finishes the step in flight, records its metrics, marks itself "interrupted" and
  // throws InterruptedError. nullptr: never.
  const std::atomic<int>* stop_signal = nullptr;
  // --trace-steps: write <run dir>/trace.json for these steps (and take the roofline and
  // memory report from them instead of the default window; see step_profiler.h).
  std::optional<StepRange> trace_steps;
  // --debug-nonfinite: a step whose loss or gradient is not finite is run again one
  // primitive at a time, and the error (and metrics.jsonl) names the first equation that made
  // a NaN or an infinity, with its source line. Costs the step's donated buffers (its inputs
  // are kept until its results are read). One device only.
  bool debug_nonfinite = false;
  // Stop after the first epoch whose evaluation reaches this: the run completes there, with
  // fewer epochs than train.epochs (TrainSummary::target_epoch says which).
  std::optional<QualityTarget> stop_at;
};

// `kiln resume`: continue a run from its latest usable savepoint.
struct ResumeOptions {
  std::vector<std::string> overrides;  // --set on top of the run's config.toml
  // Proceed when the run identity (config, data, kiln version, kernels) differs from the
  // savepoint's; the differences are recorded in run.json.
  bool allow_changed = false;
};

struct TrainSummary {
  std::filesystem::path run_dir;
  // resume() of a run that had completed: nothing was done.
  bool already_completed = false;
  int64_t resumed_from_step = -1;  // -1: a fresh run
  std::vector<std::string> notes;  // resume: damaged savepoints skipped, accepted changes
  std::filesystem::path last_savepoint;
  int64_t steps = 0;
  int64_t skipped_steps = 0;    // loss-scale overflows included
  int64_t overflow_steps = 0;   // skipped by dynamic loss scaling (docs/precision.md)
  double final_loss_scale = 0;  // dynamic loss scaling: the scale at the end (0: none)
  double test_accuracy = 0;
  double test_loss = 0;
  double train_loss = 0;  // mean over the last epoch
  double seconds = 0;
  double first_step_seconds = 0;  // process start to the first step's result
  double median_step_ms = 0;
  // With TrainOptions::stop_at: the epoch whose evaluation reached the target (0: none did).
  int64_t target_epoch = 0;
  std::string params_sha256;
  // Runs of the same experiment found stale ("running" with their process gone) and
  // marked "crashed" when this run started.
  std::vector<std::filesystem::path> crashed_runs;
  // What the run catalog or another tracker could not record (the run directory has it
  // all); also in run.json as "tracking_problems".
  std::vector<std::string> tracking_problems;
};

// Raised when the run stops on a non-finite loss or gradient; the run directory holds the
// record. In an MPI job every rank sees the same loss and gradients, so every rank raises
// it after the same step.
class NonFiniteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised when TrainOptions::stop_signal asked the run to stop; run.json says
// "interrupted" with the signal and the steps taken.
class InterruptedError : public std::runtime_error {
 public:
  // every_rank: in an MPI job, the ranks agreed on the stop (a signal to any one of them
  // stops them all after the same step), so each raises this error at the same point.
  InterruptedError(int signal, int64_t steps, std::filesystem::path run_dir, std::string message,
                   bool every_rank)
      : std::runtime_error(std::move(message)),
        signal_(signal),
        steps_(steps),
        run_dir_(std::move(run_dir)),
        every_rank_(every_rank) {}
  int signal() const { return signal_; }
  int64_t steps() const { return steps_; }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  bool every_rank() const { return every_rank_; }

 private:
  int signal_;
  int64_t steps_;
  std::filesystem::path run_dir_;
  bool every_rank_;
};

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

TrainSummary train(const TrainConfig& config, const TrainOptions& options = {});

// Continues the run in `run_dir` (as `train` would have, bit for bit) from its newest
// savepoint that loads, falling back past damaged ones (listed in the summary's notes), or
// from the start when there is none. A completed run is left alone (already_completed).
// Refuses, with a kiln::Error listing every difference, when the run identity changed,
// unless resume.allow_changed; refuses a run whose process may still be running.
TrainSummary resume(const std::filesystem::path& run_dir, const ResumeOptions& resume,
                    const TrainOptions& options = {});

}  // namespace kiln::train
