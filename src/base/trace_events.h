// The process-wide trace recorder behind `kiln train --trace-steps A-B`: every layer that
// does work worth seeing (a device running a compiled step's kernels, the data loader, the
// savepoint writer, the training loop waiting on the host) records timed events here while
// a recording is on. Off, which is always except inside the traced steps, an instrumented
// spot costs one relaxed atomic load. profile/chrome_trace.h turns a recording into the
// Chrome trace event JSON that Perfetto opens; profile/roofline.h reads the device events.
//
// A recording is bounded (max_events): past the bound events are counted, not kept, so a
// trace of too many steps cannot exhaust memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::trace {

// Where an event is drawn: one Perfetto track per thread of work, in this order.
enum class Track : int32_t {
  kTrainingLoop = 1,  // the thread that dispatches steps and waits for their results
  kSavepointWriter = 2,
  kBlockCopier = 3,       // the copies of double-buffered kernels (src/pallas/block_copier.h)
  kDataLoader0 = 10,      // data loader worker N draws on kDataLoader0 + N (N < 90)
  kDevice0 = 100,         // device N draws on kDevice0 + N (N < 900)
  kKernelWorker0 = 1000,  // a compiled kernel's worker N draws on kKernelWorker0 + N
};
Track device_track(int device_id);
Track data_loader_track(int worker);
Track kernel_worker_track(int worker);
std::string track_name(Track track);

struct Event {
  enum class Phase : char { kComplete = 'X', kInstant = 'i', kCounter = 'C' };
  Phase phase = Phase::kComplete;
  Track track = Track::kTrainingLoop;
  int64_t start_ns = 0;     // since the recording began
  int64_t duration_ns = 0;  // complete events only
  std::string name;
  std::string category;  // "kernel", "data", "savepoint", "sync", "step", "memory"
  // Numeric arguments, in the order given (a counter's values are its series).
  std::vector<std::pair<std::string, double>> args;
};

struct Recording {
  std::vector<Event> events;  // in the order they were recorded (per track: by start)
  int64_t dropped = 0;        // events past max_events
  int64_t duration_ns = 0;    // from begin_recording to end_recording
};

namespace internal {
extern std::atomic<bool> recording_on;
}

inline bool recording() {
  return internal::recording_on.load(std::memory_order_relaxed);
}

// Starts a recording (discarding any earlier one that was not ended).
void begin_recording(int64_t max_events = 2'000'000);
// Stops it and hands over what it holds.
Recording end_recording();

// Nanoseconds on the recording's clock (steady; 0 at begin_recording).
int64_t now_ns();

// The track this thread records on by default (kTrainingLoop unless set): each long-lived
// worker thread names its own once when it starts.
void set_thread_track(Track track);
Track thread_track();

// Records an event if a recording is on (else does nothing).
void record(Event event);
void record_counter(Track track, std::string_view name, std::string_view series, double value);

// Records a complete event from construction to destruction on this thread's track, if a
// recording was on when it was constructed. `name` is copied only then.
class Span {
 public:
  Span(std::string_view category, std::string_view name) : on_(recording()) {
    if (on_) begin(category, name, thread_track());
  }
  // On `track` instead of this thread's: for work whose track is not its thread's (a compiled
  // kernel's workers run on pool threads, which draw on no track of their own).
  Span(std::string_view category, std::string_view name, Track track) : on_(recording()) {
    if (on_) begin(category, name, track);
  }
  ~Span() {
    if (on_) end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  void arg(std::string_view key, double value) {
    if (on_) event_.args.emplace_back(std::string(key), value);
  }

 private:
  void begin(std::string_view category, std::string_view name, Track track);
  void end();
  bool on_;
  Event event_;
};

}  // namespace kiln::trace
