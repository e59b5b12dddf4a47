// TensorBoard event files: protobuf wire format and TFRecord framing by hand (three tiny
// messages do not justify a protobuf dependency); see tensorboard.h.
#include "track/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include <fmt/format.h>
#include <boost/crc.hpp>

#include "base/host_name.h"
#include "base/wall_clock.h"
#include "io/atomic_file.h"

namespace kiln::track {
namespace {

namespace fs = std::filesystem;

// A scalar record is about 40 bytes: this holds some thousand steps between flushes while
// keeping what a crash can lose small.
constexpr size_t kBufferBytes = 64 * 1024;

// ---- protobuf wire format (https://protobuf.dev/programming-guides/encoding/) ----------

enum class WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Little-endian whatever the host's order, since that is what the formats specify.
void put_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Seven bits per byte, low group first; the high bit says another byte follows.
void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Every field starts with its number and how its payload is laid out.
void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (uint64_t{field} << 3) | static_cast<uint32_t>(type));
}

void put_double(std::string& out, uint32_t field, double value) {
  put_key(out, field, WireType::kFixed64);
  put_little_endian(out, std::bit_cast<uint64_t>(value), 8);
}

void put_float(std::string& out, uint32_t field, float value) {
  put_key(out, field, WireType::kFixed32);
  put_little_endian(out, std::bit_cast<uint32_t>(value), 4);
}

// int64 (not sint64) is a plain varint of the two's complement: a negative step takes ten
// bytes, as protobuf's own encoder writes it.
void put_int64(std::string& out, uint32_t field, int64_t value) {
  put_key(out, field, WireType::kVarint);
  put_varint(out, static_cast<uint64_t>(value));
}

// Strings and embedded messages alike: the byte length, then the bytes.
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, WireType::kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Field numbers of tensorboard/compat/proto/event.proto and summary.proto.
namespace event_field {
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5;
}
namespace summary_field {
constexpr uint32_t kValue = 1;
}
namespace value_field {
constexpr uint32_t kTag = 1, kSimpleValue = 2;
}

// ---- the file -------------------------------------------------------------------------

// TensorBoard's own naming (the seconds padded to ten digits), with kiln as the suffix. A
// second file of the same process and second (a run resumed in-process at once) gets a
// counter after the suffix, so that it sorts after the first: a live TensorBoard reads a
// directory's files in name order.
fs::path event_file_name(const fs::path& dir, int64_t seconds, int attempt) {
  std::string host = host_name();
  if (host.empty()) host = "localhost";
  std::string name = fmt::format("events.out.tfevents.{:010d}.{}.{}.kiln", seconds, host,
                                 static_cast<int64_t>(::getpid()));
  if (attempt > 0) name += fmt::format(".{}", attempt);
  return dir / name;
}

// O_EXCL: two writers appending to one file would interleave their records.
int create_event_file(const fs::path& dir, int64_t seconds, fs::path* path) {
  constexpr int kAttempts = 10;
  for (int attempt = 0;; ++attempt) {
    *path = event_file_name(dir, seconds, attempt);
    int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST || attempt + 1 == kAttempts) return fd;
  }
}

// write(2) of all of `bytes`, or the errno that stopped it.
int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<size_t>(wrote));
  }
  return 0;
}

}  // namespace

namespace detail {

uint32_t crc32c(std::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t masked_crc32c(std::string_view bytes) {
  uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_little_endian(record, data.size(), 8);
  put_little_endian(record, masked_crc32c(record), 4);
  record.append(data);
  put_little_endian(record, masked_crc32c(data), 4);
  return record;
}

std::string file_version_event(double wall_time_s) {
  std::string event;
  put_double(event, event_field::kWallTime, wall_time_s);
  put_bytes(event, event_field::kFileVersion, "brain.Event:2");
  return event;
}

std::string scalar_event(std::string_view tag, int64_t step, float value, double wall_time_s) {
  // simple_value is a member of a oneof, so unlike step it is written even when zero: a
  // Value without it would not be a scalar at all.
  std::string summary_value;
  put_bytes(summary_value, value_field::kTag, tag);
  put_float(summary_value, value_field::kSimpleValue, value);
  std::string summary;
  put_bytes(summary, summary_field::kValue, summary_value);

  std::string event;
  put_double(event, event_field::kWallTime, wall_time_s);
  // proto3 leaves a zero step out (readers default it), as TensorBoard's own writer does;
  // the files then match its byte for byte.
  if (step != 0) put_int64(event, event_field::kStep, step);
  put_bytes(event, event_field::kSummary, summary);
  return event;
}

}  // namespace detail

std::unique_ptr<TensorBoardWriter> TensorBoardWriter::open(const fs::path& dir,
                                                           std::string* problem) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (!error && !fs::is_directory(dir, error)) {
    error = std::make_error_code(std::errc::not_a_directory);
  }
  if (error) {
    *problem = fmt::format("cannot create the TensorBoard directory '{}': {}", dir.string(),
                           error.message());
    return nullptr;
  }
  double now = unix_seconds_now();
  fs::path path;
  int fd = create_event_file(dir, static_cast<int64_t>(now), &path);
  if (fd < 0) {
    *problem = fmt::format("cannot create the TensorBoard event file '{}': {}", path.string(),
                           std::strerror(errno));
    return nullptr;
  }
  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(path, fd));
  writer->buffer_ = detail::tfrecord(detail::file_version_event(now));
  writer->flush();
  if (!writer->ok()) {
    *problem = writer->problem();
    writer.reset();
    // Nothing useful is in it, and an empty event file is a run without data to TensorBoard.
    fs::remove(path, error);
    return nullptr;
  }
  return writer;
}

TensorBoardWriter::TensorBoardWriter(fs::path path, int fd) : path_(std::move(path)), fd_(fd) {}

TensorBoardWriter::~TensorBoardWriter() {
  flush();
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::add_scalar(std::string_view tag, int64_t step, float value,
                                   double wall_time_s) {
  if (!ok()) return;
  buffer_ += detail::tfrecord(detail::scalar_event(tag, step, value, wall_time_s));
  if (buffer_.size() >= kBufferBytes) write_buffer();
}

void TensorBoardWriter::flush() {
  write_buffer();
}

void TensorBoardWriter::write_buffer() {
  if (!ok() || buffer_.empty()) return;
  int error = io::injected_write_fault(path_);
  if (error == 0) error = write_all(fd_, buffer_);
  buffer_.clear();
  if (error != 0) record_failure(error);
}

// A partly written record is harmless (TensorBoard's reader stops at a truncated tail), but
// anything after it would be read as garbage, hence no retries.
void TensorBoardWriter::record_failure(int error) {
  problem_ = fmt::format(
      "cannot write the TensorBoard event file '{}': {}; later scalars are "
      "not written",
      path_.string(), std::strerror(error));
  ::close(fd_);
  fd_ = -1;
}

}  // namespace kiln::track
