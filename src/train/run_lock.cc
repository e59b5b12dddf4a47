#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::train {
namespace {

// The pid of the process holding the flock on `fd`'s file, from the kernel's table of
// locks ("1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF"), or "" if not
// found. Nothing is written into the lock file itself: an empty file takes no space on a
// full disk, where run.json must still fit.
std::string holder_of(int fd) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) return "";
  std::string file =
      fmt::format("{:02x}:{:02x}:{}", major(status.st_dev), minor(status.st_dev), status.st_ino);
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, pid, where;
    fields >> number >> kind >> mode >> access >> pid >> where;
    if (kind == "FLOCK" && where == file) return pid;
  }
  return "";
}

}  // namespace

RunLock RunLock::acquire(const std::filesystem::path& run_dir, std::string_view doing) {
  std::error_code error;
  if (!std::filesystem::is_directory(run_dir, error)) return RunLock();
  std::filesystem::path path = run_dir / kRunLockName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    fail(kUnknownSite, fmt::format("cannot {} '{}': cannot open its lock {}: {}", doing,
                                   run_dir.string(), path.string(), std::strerror(errno)));
  }
  RunLock lock(fd);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      fail(kUnknownSite, fmt::format("cannot {} '{}': cannot lock {}: {}", doing, run_dir.string(),
                                     path.string(), std::strerror(errno)));
    }
    std::string holder = holder_of(fd);
    fail(kUnknownSite,
         fmt::format("cannot {} '{}': another kiln process{} is training or resuming it", doing,
                     run_dir.string(), holder.empty() ? "" : " (pid " + holder + ")"),
         "wait for that process to end, or stop it; one process owns a run directory at a time");
  }
  return lock;
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace kiln::train
