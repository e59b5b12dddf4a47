// The process-wide compute pool that every kernel shares, sized to the machine's cores.
// Work is split into chunks whose boundaries the caller derives from the problem size
// alone, never from the thread count, so results do not depend on how many threads run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ComputePool {
 public:
  // `threads` counts the calling thread, which always takes part: a pool of 1 runs
  // everything on the caller.
  explicit ComputePool(int threads);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  int num_threads() const { return threads_; }

  // Calls fn(chunk) once for each chunk in [0, num_chunks) and returns when all are done.
  // Safe to call from several threads at once and from inside a chunk (the caller works
  // on its own job, so nesting cannot deadlock). The first exception thrown by a chunk is
  // rethrown here after the remaining chunks finish.
  void parallel_for(int64_t num_chunks, const std::function<void(int64_t)>& fn);

 private:
  struct Job;
  void worker_loop();
  void run_chunks(Job& job);

  int threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable job_done_;
  std::deque<Job*> jobs_;
  std::atomic<int> queued_jobs_{0};  // jobs_.size(), readable by spinning workers
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Threads the process-wide pool uses: KILN_COMPUTE_THREADS if set, else the core count.
int default_compute_threads();

// The process-wide pool, created on first use.
ComputePool& compute_pool();

// Splits `total` items into chunks of at least `min_chunk` items and at most `max_chunks`
// chunks. Depends only on its arguments, so it is safe for deterministic partitioning.
int64_t chunk_count(int64_t total, int64_t min_chunk, int64_t max_chunks = 256);

}  // namespace kiln
