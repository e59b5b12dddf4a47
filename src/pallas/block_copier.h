// Double buffering for compiled kernels (CallOptions::double_buffer): while a worker computes
// on the blocks of one grid point, the blocks of its next point are copied into a second set
// of buffers. A TPU or GPU kernel hands those copies to a DMA engine; a CPU has none, so one
// thread, the block copier, stands in for it.
//
// A copy the copier has not started when the worker needs its blocks is taken back and run
// by the worker itself: on a machine whose cores are all computing, the copier gets no core
// of its own, and waiting for it would stall the worker for a scheduler time slice. So a
// copy runs exactly once, by whichever thread starts it first, and the worker never waits
// for a copy that has not begun.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "base/trace_events.h"

namespace kiln::pallas::detail {

class BlockCopy {
 public:
  // `copy` moves the bytes; `name` labels the copy's trace event.
  BlockCopy(std::function<void()> copy, std::string name)
      : copy_(std::move(copy)), name_(std::move(name)) {}

  // Runs the copy unless another thread has started it; true when this thread ran it.
  bool try_run(trace::Track track);
  // Returns once the copy is done: run here when nobody has started it, else waited for.
  // True when the worker ran it itself.
  bool finish(trace::Track track);

 private:
  enum State : int { kPending, kRunning, kDone };
  std::atomic<int> state_{kPending};
  std::function<void()> copy_;
  std::string name_;
};

// Hands `copy` to the copier thread (started on first use, shared by every kernel and
// worker) and returns it, for the worker to finish() before it reads the blocks.
std::shared_ptr<BlockCopy> copy_ahead(std::function<void()> copy, std::string name);

// The copies each thread ran since the process started, for tests: by the copier, and
// taken back by a worker.
struct BlockCopyCounts {
  int64_t by_copier = 0;
  int64_t taken_back = 0;
};
BlockCopyCounts block_copy_counts();

}  // namespace kiln::pallas::detail
