// CPU device queue (see cpu_device.h).
#include "runtime/cpu_device.h"

#include "base/spin_wait.h"
#include "base/trace_events.h"
#include "runtime/completion.h"

namespace kiln {

CpuDevice::CpuDevice(int id, ComputePool& pool, size_t allocator_cache_bytes)
    : Device(id), pool_(pool), allocator_(allocator_cache_bytes, id) {
  thread_ = std::thread([this] { run_queue(); });
}

CpuDevice::~CpuDevice() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CpuDevice::enqueue(std::function<void()> task) {
  bool was_empty;
  {
    std::lock_guard lock(mutex_);
    was_empty = queue_.empty();
    queue_.push_back(std::move(task));
    queued_.fetch_add(1, std::memory_order_release);
  }
  // The queue thread only sleeps when it found the queue empty.
  if (was_empty) wake_.notify_one();
}

void CpuDevice::run_queue() {
  trace::set_thread_track(trace::device_track(id()));
  std::unique_lock lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      // Poll briefly before sleeping: the next op usually follows within microseconds.
      lock.unlock();
      spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; });
      lock.lock();
    }
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    queued_.fetch_sub(1, std::memory_order_release);
    lock.unlock();
    task();          // tasks report their own failures through their Completion
    task = nullptr;  // release buffers before taking the lock again
    lock.lock();
  }
}

void CpuDevice::synchronize() {
  auto marker = std::make_shared<Completion>();
  enqueue([marker] { marker->set_done(); });
  marker->wait();
}

}  // namespace kiln
