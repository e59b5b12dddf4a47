// The one process that owns a run directory. `kiln train` and `kiln resume` hold an
// advisory lock (flock) on <run>/run.lock for the run's whole life, taken before anything
// in the directory is read or written: two `kiln resume`s started together both read
// "interrupted" and both trained the same run (duplicated metrics, emptied savepoints).
// The kernel drops the lock when its process ends, however it ends (SIGKILL included), so
// it never goes stale.
#pragma once

#include <filesystem>
#include <string_view>

namespace kiln::train {

class RunLock {
 public:
  RunLock() = default;  // holds nothing (the ranks of a job that do not write)
  // Takes the lock of `run_dir`, or fails naming the process that holds it (its pid, from
  // /proc/locks); `doing` says
  // what was refused ("resume"). Nothing to lock (no such directory) is left to the
  // caller's own checks, and gives an empty lock.
  static RunLock acquire(const std::filesystem::path& run_dir, std::string_view doing);

  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  bool held() const { return fd_ >= 0; }

 private:
  explicit RunLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

inline constexpr std::string_view kRunLockName = "run.lock";

}  // namespace kiln::train
