// `kiln train`: a whole training run from a resolved config: load the data, build the
// model and optimizer, create the run directory, run the jitted steps epoch by epoch with
// an evaluation after each, and save the final weights. Returns a summary; a run that
// fails (non-finite loss or gradient with on_nonfinite = "stop", or any error after the
// run directory exists) is recorded as failed in run.json and reported by exception.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "train/config.h"

namespace kiln::train {

struct TrainOptions {
  bool interactive = false;              // draw a progress bar (stderr is a terminal)
  bool quiet = false;                    // no progress lines and no config echo (tests)
  double process_start_age_seconds = 0;  // how long the process ran before train() began
};

struct TrainSummary {
  std::filesystem::path run_dir;
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  double train_loss = 0;  // mean over the last epoch
  double seconds = 0;
  double first_step_seconds = 0;  // process start to the first step's result
  double median_step_ms = 0;
  std::string params_sha256;
};

// Raised when the run stops on a non-finite loss or gradient; the run directory holds the
// record.
class NonFiniteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

TrainSummary train(const TrainConfig& config, const TrainOptions& options = {});

}  // namespace kiln::train
