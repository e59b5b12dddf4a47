// Temporary file + fsync + rename + directory fsync; see atomic_file.h. POSIX only.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::io {
namespace {

namespace fs = std::filesystem;

std::mutex fault_mutex;
WriteFault& fault_hook() {
  static auto* hook = new WriteFault();
  return *hook;
}

// Errors name the file the caller asked for (run.json, params.safetensors), and the
// temporary only as the place where it happened: a user knows the first, not the second.
[[noreturn]] void fail_io(std::string_view action, const fs::path& destination,
                          const fs::path& temporary, int error) {
  fail(kUnknownSite,
       fmt::format(
           "write_file_atomically: cannot {} '{}': {}{}", action, destination.string(),
           std::strerror(error),
           temporary.empty() ? "" : fmt::format(" (its temporary '{}')", temporary.string())),
       error == ENOSPC || error == EDQUOT ? "free space on that file system" : "");
}

// Hidden, and unique per process and call, so concurrent writers (threads or processes)
// of the same destination never share a temporary; O_EXCL makes a clash an error rather
// than a shared file.
fs::path temporary_name(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  return path.parent_path() / fmt::format(".{}.tmp.{}.{}", path.filename().string(), ::getpid(),
                                          counter.fetch_add(1, std::memory_order_relaxed));
}

// write(2) of all of `bytes`, or the errno that stopped it (an injected fault first).
int write_all(int fd, const fs::path& destination, std::span<const std::byte> bytes) {
  if (int fault = injected_write_fault(destination); fault != 0) return fault;
  const std::byte* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t wrote = ::write(fd, data, left);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += wrote;
    left -= static_cast<size_t>(wrote);
  }
  return 0;
}

void fsync_directory(const fs::path& destination) {
  fs::path dir = destination.parent_path().empty() ? fs::path(".") : destination.parent_path();
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail_io("open the directory of", destination, {}, errno);
  int synced = ::fsync(dir_fd);
  int error = errno;
  ::close(dir_fd);
  if (synced != 0) fail_io("fsync the directory of", destination, {}, error);
}

class TemporaryFile {
 public:
  explicit TemporaryFile(fs::path destination)
      : destination_(std::move(destination)), path_(temporary_name(destination_)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) fail_io("create", destination_, path_, errno);
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write(std::span<const std::byte> bytes) {
    if (int error = write_all(fd_, destination_, bytes); error != 0) {
      fail_io("write", destination_, path_, error);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail_io("fsync", destination_, path_, errno);
    int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) fail_io("close", destination_, path_, errno);
    if (::rename(path_.c_str(), destination_.c_str()) != 0) {
      fail_io("rename", destination_, path_, errno);
    }
    committed_ = true;
    // The rename is durable only once the directory entry is on disk.
    fsync_directory(destination_);
  }

 private:
  fs::path destination_;
  fs::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void set_write_fault_for_testing(WriteFault fault) {
  std::lock_guard lock(fault_mutex);
  fault_hook() = std::move(fault);
}

int injected_write_fault(const fs::path& destination) {
  std::lock_guard lock(fault_mutex);
  const WriteFault& hook = fault_hook();
  return hook ? hook(destination) : 0;
}

void write_file_atomically(const fs::path& path,
                           const std::function<void(const ByteSink&)>& produce) {
  if (path.filename().empty()) {
    fail(kUnknownSite,
         fmt::format("write_file_atomically: '{}' names a directory, not a file", path.string()));
  }
  TemporaryFile file(path);
  produce([&](std::span<const std::byte> bytes) { file.write(bytes); });
  file.commit();
}

void write_file_atomically(const fs::path& path, std::span<const std::byte> bytes) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(bytes); });
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  write_file_atomically(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void overwrite_file_in_place(const fs::path& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail_io("open", path, {}, errno);
  // Room for all of the new text first: a write that ran out of space halfway would leave
  // neither the old record nor the new one.
  int error = ::posix_fallocate(fd, 0, static_cast<off_t>(text.size()));
  if (error == EOPNOTSUPP || error == EINVAL) error = 0;  // file systems without fallocate
  if (error != 0) {
    ::close(fd);
    fail_io("overwrite", path, {}, error);
  }
  auto bytes = std::as_bytes(std::span<const char>(text.data(), text.size()));
  error = write_all(fd, path, bytes);
  if (error == 0 && ::ftruncate(fd, static_cast<off_t>(text.size())) != 0) error = errno;
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  ::close(fd);
  if (error != 0) fail_io("overwrite", path, {}, error);
}

}  // namespace kiln::io
