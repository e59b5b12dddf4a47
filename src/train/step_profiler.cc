// Profiling a window of train steps (see step_profiler.h).
#include "train/step_profiler.h"

#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/trace_events.h"
#include "io/json_text.h"
#include "jit/compiled_shard_map.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/profile.h"
#include "profile/chrome_trace.h"
#include "profile/memory_report.h"
#include "profile/roofline.h"

namespace kiln::train {
namespace {

int64_t tree_bytes(const Tree& tree) {
  int64_t bytes = 0;
  for (const Array& leaf : tree.leaves()) bytes += leaf.size_bytes();
  return bytes;
}

std::optional<int64_t> parse_step(std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

StepRange parse_step_range(const std::string& text) {
  size_t dash = text.find('-');
  std::optional<int64_t> first = parse_step(std::string_view(text).substr(0, dash));
  std::optional<int64_t> last =
      dash == std::string::npos ? first : parse_step(std::string_view(text).substr(dash + 1));
  if (!first || !last || *first < 1 || *last < *first) {
    fail(kUnknownSite,
         fmt::format("--trace-steps '{}': expected A-B with 1 <= A <= B (train steps, "
                     "counted from 1), or one step A",
                     text),
         "for example --trace-steps 10-12");
  }
  return StepRange{*first, *last};
}

StepProfiler::StepProfiler(std::optional<StepRange> requested, int64_t first_step,
                           int64_t last_step)
    : write_trace_(requested.has_value()) {
  if (requested) {
    if (requested->first <= first_step || requested->last > last_step) {
      fail(kUnknownSite,
           fmt::format("--trace-steps {}-{} is outside the steps this run takes, {}-{}",
                       requested->first, requested->last, first_step + 1, last_step),
           "choose steps within the run (its total is train.epochs x batches per epoch)");
    }
    window_ = requested;
    return;
  }
  int64_t first = std::max(first_step + kAutoFirst, first_step + 1);
  int64_t last = std::min(first_step + kAutoLast, last_step);
  if (first <= last) window_ = StepRange{first, last};
}

StepProfiler::~StepProfiler() {
  if (recording_) trace::end_recording();
}

void StepProfiler::before_step(int64_t step_number) {
  if (!window_ || done()) return;
  if (step_number == window_->first) {
    // The window's steps alone: what earlier steps queued runs before the recording.
    synchronize_all();
    default_device().reset_peak_memory();
    stats_at_start_ = default_device().memory_stats();
    trace::begin_recording();
    recording_ = true;
    window_start_s_ = profile::now_seconds();
  }
  if (trace::recording()) dispatch_start_ns_ = trace::now_ns();
}

void StepProfiler::after_step(int64_t step_number, const TrainState& state,
                              const std::function<Compiled()>& compiled) {
  if (!window_ || done() || step_number < window_->first) return;
  if (trace::recording()) {
    trace::Event dispatch;
    dispatch.track = trace::Track::kTrainingLoop;
    dispatch.category = "step";
    dispatch.name = fmt::format("dispatch train step {}", step_number);
    dispatch.start_ns = dispatch_start_ns_;
    dispatch.duration_ns = trace::now_ns() - dispatch.start_ns;
    dispatch.args = {{"step", static_cast<double>(step_number)}};
    trace::record(std::move(dispatch));
  }
  if (step_number != window_->last) return;
  synchronize_all();
  const double wall_s = profile::now_seconds() - window_start_s_;
  trace::Recording recording = trace::end_recording();
  recording_ = false;
  const int64_t steps = window_->last - window_->first + 1;
  const MemoryStats stats = default_device().memory_stats();
  const int64_t observed_peak = stats.peak_bytes;
  profile::AllocatorActivity allocator{
      steps, stats.system_allocations - stats_at_start_.system_allocations,
      stats.cache_evictions - stats_at_start_.cache_evictions, stats.reserved_bytes};

  Compiled program = compiled();
  const detail::Executable& executable = *program.executable();
  profile::MachinePeaks peaks = profile::machine_peaks();
  // With a mesh, the kernels run in the shard_map's segments, executables of their own.
  std::vector<std::shared_ptr<const detail::Executable>> segments =
      detail::shard_map_segment_executables(executable.program());
  std::vector<const detail::Executable*> executables = {&executable};
  for (const auto& segment : segments) executables.push_back(segment.get());
  profile::Roofline roofline = profile::measure_roofline(
      executables, recording, steps, wall_s / static_cast<double>(steps), peaks);
  profile::MemoryEstimate estimate =
      profile::estimate_memory(executable, tree_bytes(state.params) + tree_bytes(state.model_state),
                               tree_bytes(state.opt_state));
  nlohmann::json trace_json = {{"steps", {window_->first, window_->last}},
                               {"events", recording.events.size()},
                               {"dropped_events", recording.dropped},
                               {"file", nullptr}};
  if (write_trace_) {
    profile::write_chrome_trace(
        trace_path_, recording,
        {{"kiln_trace_steps", {window_->first, window_->last}}, {"executable", executable.name()}},
        "kiln train");
    trace_json["file"] = trace_path_.filename().string();
    trace_written_ = true;
  }
  sections_ = {
      {"roofline", io::json_text(roofline.to_json())},
      {"memory", io::json_text(profile::memory_report_json(estimate, observed_peak, allocator))},
      {"trace", io::json_text(trace_json)}};
}

}  // namespace kiln::train
