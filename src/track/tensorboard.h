// TensorBoard scalar event files, written without TensorFlow or protobuf: each record is
// a hand-encoded `Event` message in TFRecord framing (docs/tracking.md, "TensorBoard").
// A tracking side channel must never stop training, so nothing here throws on an I/O
// error: opening reports through a string, and a failed write is remembered in problem()
// and turns the writer off.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::track {

// One event file in a directory that TensorBoard reads as one run. Not thread-safe: one
// thread (the training loop) adds and flushes.
class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) and in it a new file
  // `events.out.tfevents.<unix seconds>.<hostname>.<pid>.kiln`, whose first record, the
  // file version, is written at once so that an unwritable directory shows here. Returns
  // null and sets *problem (naming the path and the system's reason) when it cannot.
  static std::unique_ptr<TensorBoardWriter> open(const std::filesystem::path& dir,
                                                 std::string* problem);
  // Flushes what is still buffered.
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends Event{wall_time, step, summary{value{tag, simple_value}}}. The value is written
  // as it is, NaN and infinities included (TensorBoard plots them as such). Buffered: it
  // reaches the file on flush(), on destruction, or when the buffer fills.
  void add_scalar(std::string_view tag, int64_t step, float value, double wall_time_s);
  // Writes the buffered records to the file (no fsync: TensorBoard reads the page cache).
  void flush();

  // The event file's path.
  const std::filesystem::path& path() const { return path_; }
  bool ok() const { return problem_.empty(); }
  // Empty while every write succeeded; else the first failure (the file and the system's
  // reason), after which nothing more is written.
  const std::string& problem() const { return problem_; }

 private:
  TensorBoardWriter(std::filesystem::path path, int fd);
  void write_buffer();
  void record_failure(int error);

  std::filesystem::path path_;
  int fd_ = -1;
  std::string buffer_;
  std::string problem_;
};

// The encoding, exposed for tests: byte strings hold the file's exact bytes.
namespace detail {

// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(std::string_view bytes);
// TFRecord's masked CRC: a CRC stored beside data that itself holds CRCs is rotated and
// offset, so that a checksum of checksummed bytes is not trivially related to them.
uint32_t masked_crc32c(std::string_view bytes);
// One TFRecord: u64 length, masked CRC of those 8 bytes, the data, masked CRC of the data.
std::string tfrecord(std::string_view data);
// The serialized Event messages (protobuf wire format) for the two kinds of record.
std::string file_version_event(double wall_time_s);
std::string scalar_event(std::string_view tag, int64_t step, float value, double wall_time_s);

}  // namespace detail

}  // namespace kiln::track
