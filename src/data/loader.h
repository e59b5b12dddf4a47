// The prefetching loader: worker threads assemble the batches that follow the one the
// training loop is using into a ring of host buffers, at most `prefetch` ahead. Batches
// come out in order and each is a pure function of (epoch, index), so what the loop sees
// does not depend on the number of workers or on timing. The time next() spends waiting is
// the step's data wait.
//   Loader loader(assembler, {.workers = 2, .prefetch = 4}, IteratorState{});
//   const HostBatch& batch = loader.next();   // epoch 0, batch 0
//   nlohmann::json saved = to_json(loader.state());   // {"epoch": 0, "position": 128}
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/sampler.h"

namespace kiln::data {

struct LoaderOptions {
  int workers = 2;   // threads assembling batches (>= 1)
  int prefetch = 4;  // batches held ready or in assembly (>= 1)
};

class Loader {
 public:
  // Starts at `start` ({epoch, position}; position a multiple of the batch size and at most
  // an epoch's length), which state() returned or a savepoint stored.
  Loader(const BatchAssembler& assembler, const LoaderOptions& options,
         const IteratorState& start = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, in order, over epochs without end. The reference stays valid until the
  // next call. An error while assembling is rethrown here.
  const HostBatch& next();
  // next(), state() and restore() are called from one thread (the training loop's).
  // Where the next call to next() continues: {epoch, position of its first example}.
  IteratorState state() const;
  // Continues from `state` (as if constructed with it): the queue is emptied and refilled.
  void restore(const IteratorState& state);
  // Seconds the last next() waited for its batch, and in total.
  double last_wait_seconds() const { return last_wait_seconds_; }
  double total_wait_seconds() const { return total_wait_seconds_; }
  // Calls of next() whose batch was not ready yet (the loader fell behind), against the
  // time a call spends even when it is (taking the lock, the scheduler).
  int64_t starved_calls() const { return starved_calls_; }

 private:
  struct Slot {
    // The ticket whose batch this slot holds, published by the worker that filled it.
    std::atomic<int64_t> ready_ticket{-1};
    HostBatch batch;
    std::exception_ptr error;
  };
  void start(const IteratorState& state);
  void stop();
  void work();
  // Returns the batch the caller held to the ring (its slot may be refilled).
  void hand_back();
  // (epoch, index) of the batch `ticket` batches after the start.
  std::pair<int64_t, int64_t> batch_of(int64_t ticket) const;

  const BatchAssembler& assembler_;
  LoaderOptions options_;
  int64_t batches_per_epoch_ = 0;
  int64_t start_epoch_ = 0;
  int64_t start_index_ = 0;

  // Workers wait on `changed_` for a free slot, the caller for a batch only when it is not
  // ready yet: a ready batch is taken without the mutex, so a worker that is descheduled
  // while holding it cannot delay the step.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  int64_t next_ticket_ = 0;              // the next batch a worker takes (under mutex_)
  std::atomic<int64_t> released_{0};     // batches before this one were handed back
  std::atomic<int> waiting_workers_{0};  // workers asleep on changed_
  bool stopping_ = false;                // under mutex_
  int64_t consumer_ticket_ = 0;          // the next batch next() returns (caller only)
  int64_t held_ticket_ = -1;             // the batch the caller holds (caller only)
  std::vector<std::thread> workers_;
  double last_wait_seconds_ = 0;
  double total_wait_seconds_ = 0;
  int64_t starved_calls_ = 0;
};

}  // namespace kiln::data
