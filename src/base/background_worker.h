// One thread that handles a queue of items in batches, for the writers that must not make
// the training loop wait (metrics.jsonl, the run catalog, savepoints): producers only queue,
// and the thread hands the handler everything queued at once, so that one write, one
// transaction or one request covers many items. What the owners need besides the queue:
// - a batching window: the first item waits that long for company (a timer-driven writer);
//   hurry() ends it for an item that should not wait (a run to open on a server);
// - flush(): returns once everything queued before it is handled (a reader needs the file);
// - a bounded queue: push() waits while `capacity` items are queued or in the handler's
//   hands (a savepoint writer holds at most one extra copy of the model's state);
// - errors: what the handler throws is rethrown, once, by the next push() or flush(), on
//   the producer's thread, where a synchronous write would have raised it;
// - partial progress: a handler that got only part of its batch done (a locked database, a
//   server that is down) says how much, and the rest is handed over again, still ahead of
//   newer items, after the delay it asks for;
// - drain(deadline): on shutdown, handles what is left while the deadline allows, then stops
//   and gives back what was not handled, for the owner to report; an owner whose handler
//   can be cut short (a request in flight) says how, so as not to wait for it.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace kiln {

struct BackgroundWorkerOptions {
  // How long the first queued item waits for others before the handler gets them. flush(),
  // drain() and a queue of `batch_ready` items end the wait early.
  std::chrono::milliseconds batch_window{0};
  size_t batch_ready = SIZE_MAX;
  // Items queued or being handled at most: push() waits for room.
  size_t capacity = SIZE_MAX;
};

// What a handler made of its batch: the first `handled` items are done. The others, which
// it must leave as they were, come back ahead of any newer items after `retry_after` (and
// the batching window); a handler that handled nothing should ask for a delay.
struct BatchProgress {
  size_t handled = 0;
  std::chrono::milliseconds retry_after{0};
};

template <typename Item>
class BackgroundWorker {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the worker's thread only, one batch at a time, each in queue order. A handler
  // that throws loses its whole batch: it alone knows what a failure left done.
  using Handler = std::function<BatchProgress(std::vector<Item>& batch)>;

  explicit BackgroundWorker(Handler handler, BackgroundWorkerOptions options = {})
      : handler_(std::move(handler)), options_(options), thread_([this] { work(); }) {}
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;
  // drain()s without a deadline unless drain() was called.
  ~BackgroundWorker() {
    if (thread_.joinable()) drain();
  }

  // Queues `item` once there is room; throws a handler's error not yet thrown (without
  // queueing). Returns false, dropping the item, once drain() has stopped the worker.
  bool push(Item item) {
    bool wake = false;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock,
                    [&] { return stopping_ || queue_.size() + in_flight_ < options_.capacity; });
      if (stopping_) return false;
      rethrow_failure();
      // A worker in its batching window waits for the window, not for each item: waking it
      // per item would cost a context switch per training step.
      wake = queue_.empty() || queue_.size() + 1 >= options_.batch_ready;
      queue_.push_back(std::move(item));
    }
    if (wake) wake_.notify_one();
    return true;
  }

  // Returns once the queue is empty and no batch is in hand (or the worker has stopped);
  // throws a handler's error not yet thrown.
  void flush() {
    std::unique_lock lock(mutex_);
    ++flushes_waiting_;
    wake_.notify_one();
    changed_.wait(lock, [&] { return stopping_ || idle(); });
    --flushes_waiting_;
    rethrow_failure();
  }

  // Ends the batching window under way, or else the next one: what is queued goes to the
  // handler as soon as it is free. Never waits; the handler may call it too, so that the
  // batch it leaves for a retry waits for the delay alone, not for company as well.
  void hurry() {
    {
      std::lock_guard lock(mutex_);
      hurried_ = true;
    }
    wake_.notify_one();
  }

  // Whether anything is queued or being handled.
  bool busy() const {
    std::lock_guard lock(mutex_);
    return !idle();
  }

  // Ends the batching windows, waits until everything queued is handled or `deadline` has
  // passed, and stops the thread once its batch in hand (if any) is done. Returns what was
  // not handled, in order; later pushes are dropped. Unthrown errors are dropped too: an
  // owner that cares flush()es first. If the deadline passes first, `interrupt` (when
  // given) is called, without the worker's lock, before waiting for the batch in hand: it
  // tells the handler to give up (a request cancelled), so that drain() need not wait out
  // a handler that may take long.
  std::vector<Item> drain(std::optional<Clock::time_point> deadline = std::nullopt,
                          const std::function<void()>& interrupt = {}) {
    if (!thread_.joinable()) return {};
    std::unique_lock lock(mutex_);
    draining_ = true;
    wake_.notify_one();
    bool done = true;
    if (deadline) {
      done = changed_.wait_until(lock, *deadline, [&] { return idle(); });
    } else {
      changed_.wait(lock, [&] { return idle(); });
    }
    stopping_ = true;
    lock.unlock();
    wake_.notify_one();
    changed_.notify_all();  // producers waiting for room
    if (!done && interrupt) interrupt();
    thread_.join();
    lock.lock();
    std::vector<Item> left(std::make_move_iterator(queue_.begin()),
                           std::make_move_iterator(queue_.end()));
    queue_.clear();
    failure_ = nullptr;
    return left;
  }

 private:
  bool idle() const { return queue_.empty() && in_flight_ == 0; }

  void rethrow_failure() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  void work() {
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // drain() takes what is left
      if (options_.batch_window.count() > 0) {
        wake_.wait_for(lock, options_.batch_window, [&] {
          return stopping_ || draining_ || hurried_ || flushes_waiting_ > 0 ||
                 queue_.size() >= options_.batch_ready;
        });
        if (stopping_) return;
      }
      hurried_ = false;
      std::vector<Item> batch(std::make_move_iterator(queue_.begin()),
                              std::make_move_iterator(queue_.end()));
      queue_.clear();
      in_flight_ = batch.size();
      lock.unlock();
      BatchProgress progress;
      std::exception_ptr failure;
      try {
        progress = handler_(batch);
      } catch (...) {
        failure = std::current_exception();
        progress.handled = batch.size();
      }
      // The handled items go before anyone hears they are done: their memory (a copy of the
      // model's state) is what a producer waiting for room is waiting for.
      batch.erase(batch.begin(), batch.begin() + std::min(progress.handled, batch.size()));
      lock.lock();
      queue_.insert(queue_.begin(), std::make_move_iterator(batch.begin()),
                    std::make_move_iterator(batch.end()));
      in_flight_ = 0;
      // The first error is kept: a later one is more likely its consequence than news.
      if (failure && !failure_) failure_ = failure;
      changed_.notify_all();
      if (!batch.empty() && progress.retry_after.count() > 0) {
        wake_.wait_for(lock, progress.retry_after, [&] { return stopping_; });
      }
    }
  }

  Handler handler_;
  const BackgroundWorkerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;     // the worker: items queued, a flush wanted, stopping
  std::condition_variable changed_;  // producers: a batch was handled, room, stopping
  std::deque<Item> queue_;
  size_t in_flight_ = 0;        // the items of the batch in the handler's hands
  std::exception_ptr failure_;  // the handler's error, not yet thrown
  int flushes_waiting_ = 0;
  bool hurried_ = false;  // the next batch skips its window
  bool draining_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members it uses exist
};

}  // namespace kiln
