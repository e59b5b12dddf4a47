// Drawing the progress bar and the plain progress lines.
#include "train/progress.h"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace kiln::train {

void print_best_effort(std::FILE* stream, std::string_view text) {
  // fwrite and fflush report failure by return value; fmt::print would throw instead.
  (void)std::fwrite(text.data(), 1, text.size(), stream);
  (void)std::fflush(stream);
  std::clearerr(stream);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto total = static_cast<int64_t>(std::llround(seconds));
  int64_t hours = total / 3600, minutes = total / 60 % 60, secs = total % 60;
  if (hours > 0) return fmt::format("{}:{:02}:{:02}", hours, minutes, secs);
  return fmt::format("{}:{:02}", minutes, secs);
}

Progress::Progress(Mode mode, int64_t log_every, std::FILE* out, Clock::duration stall_notice)
    : mode_(mode),
      log_every_(log_every > 0 ? log_every : 1),
      out_(out),
      stall_notice_(stall_notice) {
  mark_activity();
  if (mode_ != Mode::kSilent) watcher_ = std::thread([this] { watch_for_stalls(); });
}

Progress::~Progress() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void Progress::mark_activity() {
  last_activity_ = Clock::now();
  next_notice_ = last_activity_ + stall_notice_;
  watching_ = true;
}

void Progress::watch_for_stalls() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // Woken early only to stop: activity moves next_notice_ later, and the wait below
    // simply finds it not yet due.
    wake_.wait_until(lock, next_notice_, [this] { return stopping_; });
    if (stopping_) break;
    Clock::time_point now = Clock::now();
    if (!watching_ || now < next_notice_) {
      if (!watching_) next_notice_ = now + stall_notice_;
      continue;
    }
    print_stall_notice(now - last_activity_);
    next_notice_ = now + stall_notice_;
  }
}

void Progress::print_stall_notice(Clock::duration quiet_for) {
  std::string what = working_on_;
  if (what.empty()) {
    what = total_steps_ > 0 ? fmt::format("step {} of {}", last_step_ + 1, total_steps_)
                            : fmt::format("step {}", last_step_ + 1);
    if (!stepped_) what += " (the first step also compiles the program)";
  }
  double seconds = std::chrono::duration<double>(quiet_for).count();
  clear_bar();
  print_best_effort(out_, fmt::format("still working on {}: nothing finished for {}\n", what,
                                      format_duration(seconds)));
}

void Progress::starting_at(int64_t steps_done, int64_t total_steps) {
  std::lock_guard lock(mutex_);
  last_step_ = steps_done;
  total_steps_ = total_steps;
  mark_activity();
}

void Progress::working_on(std::string what) {
  std::lock_guard lock(mutex_);
  working_on_ = std::move(what);
  mark_activity();
}

void Progress::update(const StepProgress& p) {
  std::string figures = fmt::format(
      "loss {:.4f}  acc {:5.1f}%  {:.0f} samples/s  data wait {:.2f} ms  ETA {}", p.loss,
      100 * p.accuracy, p.samples_per_second, p.data_wait_ms, format_duration(p.eta_seconds));
  if (mode_ == Mode::kSilent) return;
  std::lock_guard lock(mutex_);
  last_step_ = p.step;
  total_steps_ = p.total_steps;
  stepped_ = true;
  mark_activity();
  if (mode_ == Mode::kLines) {
    if (p.step % log_every_ == 0 || p.step == p.total_steps) {
      print_best_effort(out_, fmt::format("step {}/{}  epoch {}/{}  {}\n", p.step, p.total_steps,
                                          p.epoch, p.epochs, figures));
    }
    return;
  }
  auto now = std::chrono::steady_clock::now();
  bool last = p.step == p.total_steps;
  if (!last && bar_drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 24;
  double fraction = p.total_steps > 0 ? static_cast<double>(p.step) / p.total_steps : 1.0;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  // \r and erase-to-end-of-line redraw in place.
  print_best_effort(out_, fmt::format("\r\033[Kepoch {}/{} [{}] step {}/{}  {}", p.epoch, p.epochs,
                                      bar, p.step, p.total_steps, figures));
  bar_drawn_ = true;
}

void Progress::clear_bar() {
  if (bar_drawn_) {
    print_best_effort(out_, "\r\033[K");
    bar_drawn_ = false;
  }
}

void Progress::message(const std::string& line) {
  if (mode_ == Mode::kSilent) return;
  std::lock_guard lock(mutex_);
  mark_activity();
  clear_bar();
  print_best_effort(out_, line + "\n");
}

void Progress::finish() {
  std::lock_guard lock(mutex_);
  watching_ = false;
  if (bar_drawn_) {
    print_best_effort(out_, "\n");
    bar_drawn_ = false;
  }
}

}  // namespace kiln::train
