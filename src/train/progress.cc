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

Progress::Progress(Mode mode, int64_t log_every)
    : mode_(mode), log_every_(log_every > 0 ? log_every : 1) {}

void Progress::update(const StepProgress& p) {
  std::string figures = fmt::format(
      "loss {:.4f}  acc {:5.1f}%  {:.0f} samples/s  data wait {:.2f} ms  ETA {}", p.loss,
      100 * p.accuracy, p.samples_per_second, p.data_wait_ms, format_duration(p.eta_seconds));
  if (mode_ == Mode::kSilent) return;
  if (mode_ == Mode::kLines) {
    if (p.step % log_every_ == 0 || p.step == p.total_steps) {
      print_best_effort(stderr, fmt::format("step {}/{}  epoch {}/{}  {}\n", p.step, p.total_steps,
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
  print_best_effort(stderr, fmt::format("\r\033[Kepoch {}/{} [{}] step {}/{}  {}", p.epoch,
                                        p.epochs, bar, p.step, p.total_steps, figures));
  bar_drawn_ = true;
}

void Progress::clear_bar() {
  if (bar_drawn_) {
    print_best_effort(stderr, "\r\033[K");
    bar_drawn_ = false;
  }
}

void Progress::message(const std::string& line) {
  if (mode_ == Mode::kSilent) return;
  clear_bar();
  print_best_effort(stderr, line + "\n");
}

void Progress::finish() {
  if (bar_drawn_) {
    print_best_effort(stderr, "\n");
    bar_drawn_ = false;
  }
}

}  // namespace kiln::train
