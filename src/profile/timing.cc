// Timing summaries for kiln::profile (see include/kiln/profile.h).
#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "kiln/profile.h"

namespace kiln::profile {
namespace {

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(fraction * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

std::string format_seconds(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.2f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.3f} ms", seconds * 1e3);
  return fmt::format("{:.3f} s", seconds);
}

}  // namespace

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Timing summarize(double first_call_s, std::vector<double> samples) {
  Timing timing;
  timing.first_call_s = first_call_s;
  timing.samples_s = samples;
  std::sort(samples.begin(), samples.end());
  timing.median_s = percentile(samples, 0.5);
  timing.p10_s = percentile(samples, 0.1);
  timing.p90_s = percentile(samples, 0.9);
  timing.mean_s = samples.empty() ? 0
                                  : std::accumulate(samples.begin(), samples.end(), 0.0) /
                                        static_cast<double>(samples.size());
  return timing;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

std::vector<double> Alternation::ratios() const {
  std::vector<double> result;
  for (size_t i = 0; i < a_s.size() && i < b_s.size(); ++i) result.push_back(b_s[i] / a_s[i]);
  return result;
}

std::string format_ratios(const std::vector<double>& values) {
  std::string text;
  for (double value : values) text += fmt::format("{}{:.2f}", text.empty() ? "" : " ", value);
  return text;
}

void pause_for(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

std::string Timing::to_string() const {
  return fmt::format("first {}; median {} (p10 {}, p90 {}) over {}", format_seconds(first_call_s),
                     format_seconds(median_s), format_seconds(p10_s), format_seconds(p90_s),
                     samples_s.size());
}

}  // namespace kiln::profile
