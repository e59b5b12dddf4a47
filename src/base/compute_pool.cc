// Implementation of the shared compute pool (see compute_pool.h).
#include "base/compute_pool.h"

#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "base/float_control.h"
#include "base/spin_wait.h"
#include "kiln/error.h"

namespace kiln {

struct ComputePool::Job {
  const std::function<void(int64_t)>* fn;
  int64_t num_chunks;
  uint32_t float_control;  // the caller's: every chunk runs under it
  std::atomic<int64_t> next{0};
  // Written under the pool's mutex_ (so condition-variable waits see them), read without
  // it by a caller that spins before sleeping.
  std::atomic<int64_t> finished{0};
  std::atomic<int> active_workers{0};
  std::exception_ptr error;  // guarded by the pool's mutex_
};

ComputePool::ComputePool(int threads) : threads_(threads < 1 ? 1 : threads) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ComputePool::~ComputePool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ComputePool::run_chunks(Job& job) {
  ScopedFloatControl float_mode(job.float_control);
  int64_t done = 0;
  std::exception_ptr error;
  for (;;) {
    int64_t chunk = job.next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.num_chunks) break;
    try {
      (*job.fn)(chunk);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    ++done;
  }
  std::lock_guard lock(mutex_);
  job.finished += done;
  if (error && !job.error) job.error = error;
}

void ComputePool::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (jobs_.empty() && !stopping_) {
      lock.unlock();
      spin_until([this] { return queued_jobs_.load(std::memory_order_acquire) > 0; });
      lock.lock();
    }
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    Job* job = jobs_.front();
    // A job leaves the queue once all its chunks are claimed; until then every worker
    // that wakes helps with the oldest job first. Registering as active under the lock
    // keeps the job alive until this worker lets go of it.
    if (job->next.load(std::memory_order_relaxed) >= job->num_chunks) {
      jobs_.pop_front();
      queued_jobs_.fetch_sub(1, std::memory_order_release);
      continue;
    }
    ++job->active_workers;
    lock.unlock();
    run_chunks(*job);
    lock.lock();
    if (--job->active_workers == 0) job_done_.notify_all();
  }
}

void ComputePool::parallel_for(int64_t num_chunks, const std::function<void(int64_t)>& fn) {
  if (num_chunks <= 0) return;
  if (num_chunks == 1 || workers_.empty()) {
    for (int64_t chunk = 0; chunk < num_chunks; ++chunk) fn(chunk);
    return;
  }
  Job job;
  job.fn = &fn;
  job.num_chunks = num_chunks;
  job.float_control = float_control();
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(&job);
    queued_jobs_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(job);
  auto done = [&] { return job.finished == num_chunks && job.active_workers == 0; };
  spin_until(done);
  std::unique_lock lock(mutex_);
  job_done_.wait(lock, done);
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    if (*it == &job) {
      jobs_.erase(it);
      queued_jobs_.fetch_sub(1, std::memory_order_release);
      break;
    }
  }
  if (job.error) std::rethrow_exception(job.error);
}

int default_compute_threads() {
  if (const char* text = std::getenv("KILN_COMPUTE_THREADS")) {
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 1024) {
      fail(kUnknownSite,
           fmt::format("KILN_COMPUTE_THREADS='{}' is not a thread count between 1 and 1024", text),
           "unset it to use one thread per core");
    }
    return static_cast<int>(value);
  }
  unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

ComputePool& compute_pool() {
  // Never destroyed, like the runtime whose device threads use it: at exit a device may
  // still be running a kernel that was queued but never waited for.
  static ComputePool* pool = new ComputePool(default_compute_threads());
  return *pool;
}

int64_t chunk_count(int64_t total, int64_t min_chunk, int64_t max_chunks) {
  if (total <= 0) return 0;
  if (min_chunk < 1) min_chunk = 1;
  int64_t chunks = total / min_chunk;
  if (chunks < 1) chunks = 1;
  return chunks < max_chunks ? chunks : max_chunks;
}

}  // namespace kiln
