// A CPU device: an in-order queue of kernels run by one thread, and a caching allocator.
// With KILN_CPU_DEVICES=N there are N of them; all share the process-wide compute pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/compute_pool.h"
#include "kiln/device.h"
#include "runtime/allocator.h"

namespace kiln {

class CpuDevice final : public Device {
 public:
  CpuDevice(int id, ComputePool& pool, size_t allocator_cache_bytes);
  ~CpuDevice() override;

  std::string_view kind() const override { return "cpu"; }
  MemoryStats memory_stats() const override { return allocator_.stats(); }
  void reset_peak_memory() override { allocator_.reset_peak(); }
  int compute_threads() const override { return pool_.num_threads(); }
  void synchronize() override;

  CachingAllocator& allocator() { return allocator_; }
  ComputePool& pool() { return pool_; }
  // Queues `task` to run after everything queued before it on this device.
  void enqueue(std::function<void()> task);

 private:
  void run_queue();

  ComputePool& pool_;
  CachingAllocator allocator_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::atomic<int64_t> queued_{0};  // queue_.size(), readable while spinning
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln
