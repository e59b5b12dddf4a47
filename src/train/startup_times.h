// Where the time from the process's start to the first step's result goes, phase by phase
// (run.json's timing.startup, `kiln bench step`): the target is under half a
// second for the MLP example, and a total without its parts cannot say what to cut.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace kiln::train {

class StartupTimes {
 public:
  using Clock = std::chrono::steady_clock;

  // `before_train_seconds`: the process's age when train() began, of which
  // `config_seconds` loading the config.
  StartupTimes(double before_train_seconds, double config_seconds);

  // Ends the phase that ran since the previous call (or since construction) as `name`.
  void end_phase(std::string name);
  // A phase measured elsewhere, which ran inside the current one: its time is taken out of
  // the current phase (the dataset's reading inside "data").
  void add_part(std::string name, double seconds);

  // The phases in order, in seconds; they add up to the first step's time since the
  // process started.
  const std::vector<std::pair<std::string, double>>& phases() const { return phases_; }
  double total_seconds() const;
  // "exec 0.02 + config 0.01 + data_read 0.21 + ... = 0.46 s", for people.
  std::string line() const;

 private:
  std::vector<std::pair<std::string, double>> phases_;
  double parts_of_current_ = 0;
  Clock::time_point phase_start_ = Clock::now();
};

}  // namespace kiln::train
