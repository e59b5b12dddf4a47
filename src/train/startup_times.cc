// The startup breakdown (startup_times.h).
#include "train/startup_times.h"

#include <fmt/format.h>

namespace kiln::train {

StartupTimes::StartupTimes(double before_train_seconds, double config_seconds) {
  phases_.emplace_back("process_start", before_train_seconds - config_seconds);
  phases_.emplace_back("config", config_seconds);
}

void StartupTimes::end_phase(std::string name) {
  Clock::time_point now = Clock::now();
  double seconds = std::chrono::duration<double>(now - phase_start_).count();
  phases_.emplace_back(std::move(name), seconds - parts_of_current_);
  parts_of_current_ = 0;
  phase_start_ = now;
}

void StartupTimes::add_part(std::string name, double seconds) {
  phases_.emplace_back(std::move(name), seconds);
  parts_of_current_ += seconds;
}

double StartupTimes::total_seconds() const {
  double total = 0;
  for (const auto& [name, seconds] : phases_) total += seconds;
  return total;
}

std::string StartupTimes::line() const {
  std::string text;
  for (const auto& [name, seconds] : phases_) {
    text += fmt::format("{}{} {:.3f}", text.empty() ? "" : " + ", name, seconds);
  }
  return fmt::format("{} = {:.3f} s", text, total_seconds());
}

}  // namespace kiln::train
