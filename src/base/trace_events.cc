// The trace recorder (see trace_events.h). One mutex guards the event list: events come
// from a handful of threads at a rate of a few thousand per step, far from contention,
// and a lock keeps the recording's order simple to reason about (and TSan-clean).
#include "base/trace_events.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

namespace kiln::trace {

namespace internal {
std::atomic<bool> recording_on{false};
}

namespace {

struct Recorder {
  std::mutex mutex;
  Recording recording;
  int64_t max_events = 0;
  // Steady-clock nanoseconds at begin_recording; atomic because a span that outlives its
  // recording reads it while the next recording sets it.
  std::atomic<int64_t> origin_ns{0};
};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Recorder& recorder() {
  static Recorder* instance = new Recorder();  // never destroyed: threads may record late
  return *instance;
}

thread_local Track this_thread_track = Track::kTrainingLoop;

}  // namespace

Track device_track(int device_id) {
  return static_cast<Track>(static_cast<int32_t>(Track::kDevice0) + device_id);
}

Track data_loader_track(int worker) {
  return static_cast<Track>(static_cast<int32_t>(Track::kDataLoader0) + std::min(worker, 89));
}

Track kernel_worker_track(int worker) {
  return static_cast<Track>(static_cast<int32_t>(Track::kKernelWorker0) + worker);
}

std::string track_name(Track track) {
  auto id = static_cast<int32_t>(track);
  if (track == Track::kTrainingLoop) return "training loop";
  if (track == Track::kSavepointWriter) return "savepoint writer";
  if (track == Track::kBlockCopier) return "kernel block copier";
  if (id >= static_cast<int32_t>(Track::kKernelWorker0)) {
    return fmt::format("kernel worker {}", id - static_cast<int32_t>(Track::kKernelWorker0));
  }
  if (id >= static_cast<int32_t>(Track::kDevice0)) {
    return fmt::format("device cpu:{}", id - static_cast<int32_t>(Track::kDevice0));
  }
  return fmt::format("data loader {}", id - static_cast<int32_t>(Track::kDataLoader0));
}

void begin_recording(int64_t max_events) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.recording = Recording{};
  r.max_events = max_events;
  r.origin_ns.store(steady_ns(), std::memory_order_relaxed);
  internal::recording_on.store(true, std::memory_order_relaxed);
}

Recording end_recording() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  internal::recording_on.store(false, std::memory_order_relaxed);
  r.recording.duration_ns = now_ns();
  return std::exchange(r.recording, Recording{});
}

int64_t now_ns() {
  return steady_ns() - recorder().origin_ns.load(std::memory_order_relaxed);
}

void set_thread_track(Track track) {
  this_thread_track = track;
}

Track thread_track() {
  return this_thread_track;
}

void record(Event event) {
  if (!recording()) return;
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  // Checked again under the lock: end_recording may have run since the first check.
  if (!recording()) return;
  if (static_cast<int64_t>(r.recording.events.size()) >= r.max_events) {
    ++r.recording.dropped;
    return;
  }
  r.recording.events.push_back(std::move(event));
}

void record_counter(Track track, std::string_view name, std::string_view series, double value) {
  if (!recording()) return;
  Event event;
  event.phase = Event::Phase::kCounter;
  event.track = track;
  event.start_ns = now_ns();
  event.name = std::string(name);
  event.category = "memory";
  event.args.emplace_back(std::string(series), value);
  record(std::move(event));
}

void Span::begin(std::string_view category, std::string_view name, Track track) {
  event_.track = track;
  event_.category = std::string(category);
  event_.name = std::string(name);
  event_.start_ns = now_ns();
}

void Span::end() {
  event_.duration_ns = now_ns() - event_.start_ns;
  record(std::move(event_));
}

}  // namespace kiln::trace
