#include "io/bounded_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/error.h"

namespace kiln::io {
namespace {

// Owns a file descriptor: closed on every way out. -1 for none.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(Descriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Thrown by the parser callback to stop at the nesting limit.
struct TooDeep {};

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void refuse(const std::filesystem::path& path, std::string_view why) {
  fail(kUnknownSite, fmt::format("cannot read {}: {}", printable_path(path), why));
}

// The file opened for reading, or no descriptor (-1) when nothing is at `path`.
Descriptor open_regular(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
  // (it is refused below by its type); O_NOCTTY: a terminal never becomes ours.
  Descriptor file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (file.get() < 0) {
    if (errno == ENOENT) return file;
    refuse(path, std::strerror(errno));
  }
  struct stat status {};
  if (::fstat(file.get(), &status) != 0) refuse(path, std::strerror(errno));
  if (!S_ISREG(status.st_mode)) {
    refuse(path,
           fmt::format("it is {}, and kiln reads only regular files", kind_of(status.st_mode)));
  }
  // A regular file never blocks: plain reads from here on.
  int flags = ::fcntl(file.get(), F_GETFL);
  if (flags < 0 || ::fcntl(file.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    refuse(path, std::strerror(errno));
  }
  return file;
}

std::string read_all(const std::filesystem::path& path, const Descriptor& file, size_t max_bytes) {
  std::string text;
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(file.get(), buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      refuse(path, std::strerror(errno));
    }
    if (got == 0) break;
    if (text.size() + static_cast<size_t>(got) > max_bytes) {
      refuse(path, fmt::format("it is larger than {} bytes, the limit for this file; is it the "
                               "file kiln wrote?",
                               max_bytes));
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  return text;
}

int64_t line_of(std::string_view text, size_t byte) {
  size_t end = std::min(byte, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n');
}

// The length of the well-formed UTF-8 sequence that starts at text[at] (the Unicode
// standard's table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or 0.
size_t utf8_length(std::string_view text, size_t at) {
  auto byte = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0; };
  auto in = [](unsigned char b, unsigned char low, unsigned char high) {
    return b >= low && b <= high;
  };
  unsigned char lead = byte(at), second = byte(at + 1);
  if (lead < 0x80) return 1;
  if (in(lead, 0xC2, 0xDF)) return in(second, 0x80, 0xBF) ? 2 : 0;
  bool second_ok = lead == 0xE0   ? in(second, 0xA0, 0xBF)
                   : lead == 0xED ? in(second, 0x80, 0x9F)
                   : lead == 0xF0 ? in(second, 0x90, 0xBF)
                   : lead == 0xF4 ? in(second, 0x80, 0x8F)
                                  : in(second, 0x80, 0xBF);
  if (in(lead, 0xE0, 0xEF)) return second_ok && in(byte(at + 2), 0x80, 0xBF) ? 3 : 0;
  if (in(lead, 0xF0, 0xF4)) {
    return second_ok && in(byte(at + 2), 0x80, 0xBF) && in(byte(at + 3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string read_regular_file(const std::filesystem::path& path, size_t max_bytes) {
  Descriptor file = open_regular(path);
  if (file.get() < 0) refuse(path, "no such file");
  return read_all(path, file, max_bytes);
}

std::optional<std::string> read_regular_file_if_present(const std::filesystem::path& path,
                                                        size_t max_bytes) {
  Descriptor file = open_regular(path);
  if (file.get() < 0) return std::nullopt;
  return read_all(path, file, max_bytes);
}

namespace {

// The parser keeps its own stack; the callback stops it at the first value deeper than the
// limit, before a deep value exists to be printed or destroyed.
nlohmann::json parse_with_depth_limit(std::string_view text, int max_depth) {
  using nlohmann::json;
  auto limit_depth = [max_depth](int depth, json::parse_event_t event, json&) {
    bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= max_depth) throw TooDeep{};
    return true;
  };
  return json::parse(text, limit_depth);
}

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view source, int max_depth) {
  try {
    return parse_with_depth_limit(text, max_depth);
  } catch (const TooDeep&) {
    fail(kUnknownSite, fmt::format("{}: not a record kiln wrote: JSON nested more than {} levels "
                                   "deep",
                                   source, max_depth));
  } catch (const nlohmann::json::parse_error& error) {
    // The byte nlohmann reports is one past the offending character.
    fail(kUnknownSite, fmt::format("{}:{}: not valid JSON ({})", source,
                                   line_of(text, error.byte ? error.byte - 1 : 0), error.what()));
  } catch (const nlohmann::json::exception& error) {
    // Not a syntax error: a number too large for a double (1e400) is out_of_range.
    fail(kUnknownSite, fmt::format("{}: not valid JSON ({})", source, error.what()));
  }
}

std::optional<nlohmann::json> parse_json_if_valid(std::string_view text, int max_depth) {
  try {
    return parse_with_depth_limit(text, max_depth);
  } catch (const TooDeep&) {
    return std::nullopt;
  } catch (const nlohmann::json::exception&) {  // a syntax error, or a number out of range
    return std::nullopt;
  }
}

std::string printable_path(const std::filesystem::path& path) {
  const std::string& bytes = path.native();
  std::string text;
  text.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    size_t length = utf8_length(bytes, at);
    if (length == 0) {
      text += fmt::format("\\x{:02x}", static_cast<unsigned char>(bytes[at]));
      ++at;
    } else {
      text.append(bytes, at, length);
      at += length;
    }
  }
  return text;
}

}  // namespace kiln::io
