// The block copier (block_copier.h): one thread, a queue of copies, and a claim per copy so
// that the copier and the worker that needs the blocks never both run it.
#include "pallas/block_copier.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace kiln::pallas::detail {

namespace {

std::atomic<int64_t> copies_by_copier{0};
std::atomic<int64_t> copies_taken_back{0};

class Copier {
 public:
  Copier() : thread_([this] { serve(); }) {
    // The copier lives as long as the process: a copy queued as it exits is never needed.
    thread_.detach();
  }

  void submit(std::shared_ptr<BlockCopy> copy) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(copy));
    }
    ready_.notify_one();
  }

 private:
  void serve() {
    trace::set_thread_track(trace::Track::kBlockCopier);
    while (true) {
      std::shared_ptr<BlockCopy> copy;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return !queue_.empty(); });
        copy = std::move(queue_.front());
        queue_.pop_front();
      }
      // A copy its worker already took back is skipped here.
      if (copy->try_run(trace::Track::kBlockCopier)) copies_by_copier.fetch_add(1);
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<BlockCopy>> queue_;
  std::thread thread_;
};

Copier& copier() {
  static Copier* instance = new Copier();  // never destroyed: its thread outlives main
  return *instance;
}

}  // namespace

bool BlockCopy::try_run(trace::Track track) {
  int expected = kPending;
  if (!state_.compare_exchange_strong(expected, kRunning, std::memory_order_acquire)) {
    return false;
  }
  {
    trace::Span span("pallas", name_, track);
    copy_();
  }
  state_.store(kDone, std::memory_order_release);
  state_.notify_all();
  return true;
}

bool BlockCopy::finish(trace::Track track) {
  if (try_run(track)) {
    copies_taken_back.fetch_add(1);
    return true;
  }
  int state = state_.load(std::memory_order_acquire);
  while (state != kDone) {
    state_.wait(state, std::memory_order_acquire);
    state = state_.load(std::memory_order_acquire);
  }
  return false;
}

std::shared_ptr<BlockCopy> copy_ahead(std::function<void()> copy, std::string name) {
  auto block_copy = std::make_shared<BlockCopy>(std::move(copy), std::move(name));
  copier().submit(block_copy);
  return block_copy;
}

BlockCopyCounts block_copy_counts() {
  return {copies_by_copier.load(), copies_taken_back.load()};
}

}  // namespace kiln::pallas::detail
