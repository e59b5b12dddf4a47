// Temporary file + fsync + rename + directory fsync; see atomic_file.h. POSIX only.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::io {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_io(std::string_view action, const fs::path& path, int error) {
  fail(kUnknownSite, fmt::format("write_file_atomically: cannot {} '{}': {}", action, path.string(),
                                 std::strerror(error)));
}

// Hidden, and unique per process and call, so concurrent writers (threads or processes)
// of the same destination never share a temporary; O_EXCL makes a clash an error rather
// than a shared file.
fs::path temporary_name(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  return path.parent_path() / fmt::format(".{}.tmp.{}.{}", path.filename().string(), ::getpid(),
                                          counter.fetch_add(1, std::memory_order_relaxed));
}

class TemporaryFile {
 public:
  explicit TemporaryFile(fs::path path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) fail_io("create", path_, errno);
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write(std::span<const std::byte> bytes) {
    const std::byte* data = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      ssize_t wrote = ::write(fd_, data, left);
      if (wrote < 0) {
        if (errno == EINTR) continue;
        fail_io("write", path_, errno);
      }
      data += wrote;
      left -= static_cast<size_t>(wrote);
    }
  }

  void commit(const fs::path& destination) {
    if (::fsync(fd_) != 0) fail_io("fsync", path_, errno);
    int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) fail_io("close", path_, errno);
    if (::rename(path_.c_str(), destination.c_str()) != 0) fail_io("rename", destination, errno);
    committed_ = true;
    // The rename is durable only once the directory entry is on disk.
    fs::path dir = destination.parent_path().empty() ? fs::path(".") : destination.parent_path();
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) fail_io("open the directory", dir, errno);
    int synced = ::fsync(dir_fd);
    int error = errno;
    ::close(dir_fd);
    if (synced != 0) fail_io("fsync the directory", dir, error);
  }

 private:
  fs::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_file_atomically(const fs::path& path,
                           const std::function<void(const ByteSink&)>& produce) {
  if (path.filename().empty()) {
    fail(kUnknownSite,
         fmt::format("write_file_atomically: '{}' names a directory, not a file", path.string()));
  }
  TemporaryFile file(temporary_name(path));
  produce([&](std::span<const std::byte> bytes) { file.write(bytes); });
  file.commit(path);
}

void write_file_atomically(const fs::path& path, std::span<const std::byte> bytes) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(bytes); });
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  write_file_atomically(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

}  // namespace kiln::io
