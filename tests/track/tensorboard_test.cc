// TensorBoard event files: the CRC, the exact bytes of TensorBoard's own writer, the file
// read back field by field, failures reported and not thrown, and TensorBoard's real reader.
#include "track/tensorboard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/wall_clock.h"
#include "io/atomic_file.h"
#include "support/scratch_dir.h"
#include "support/source_tree.h"

namespace kiln::track {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

std::string hex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t little_endian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    value |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return value;
}

// ---- an independent reader: TFRecord framing and the few protobuf fields kiln writes ----

// Splits a file into its records' data, checking every length and CRC on the way.
std::vector<std::string> read_records(std::string_view file) {
  std::vector<std::string> records;
  while (!file.empty()) {
    EXPECT_GE(file.size(), 12u) << "a truncated record header";
    if (file.size() < 12) break;
    uint64_t length = little_endian(file.substr(0, 8));
    EXPECT_EQ(little_endian(file.substr(8, 4)), detail::masked_crc32c(file.substr(0, 8)));
    EXPECT_GE(file.size(), 12 + length + 4) << "a truncated record";
    if (file.size() < 12 + length + 4) break;
    std::string_view data = file.substr(12, length);
    EXPECT_EQ(little_endian(file.substr(12 + length, 4)), detail::masked_crc32c(data));
    records.emplace_back(data);
    file.remove_prefix(12 + length + 4);
  }
  return records;
}

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t scalar = 0;  // varint, fixed64 or fixed32 payload
  std::string bytes;    // length-delimited payload
};

uint64_t read_varint(std::string_view& in) {
  uint64_t value = 0;
  for (int shift = 0; !in.empty(); shift += 7) {
    auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return value;
  }
  ADD_FAILURE() << "a varint runs past the end of its message";
  return value;
}

std::vector<Field> read_fields(std::string_view in) {
  std::vector<Field> fields;
  while (!in.empty()) {
    uint64_t key = read_varint(in);
    Field field{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
    if (field.wire_type == 0) {
      field.scalar = read_varint(in);
    } else if (field.wire_type == 1 || field.wire_type == 5) {
      size_t size = field.wire_type == 1 ? 8 : 4;
      if (in.size() < size) break;
      field.scalar = little_endian(in.substr(0, size));
      in.remove_prefix(size);
    } else if (field.wire_type == 2) {
      uint64_t size = read_varint(in);
      if (in.size() < size) break;
      field.bytes = in.substr(0, size);
      in.remove_prefix(size);
    } else {
      ADD_FAILURE() << "unexpected wire type " << field.wire_type;
      break;
    }
    fields.push_back(field);
  }
  return fields;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::optional<std::string> file_version;
  std::optional<std::string> tag;
  std::optional<uint32_t> simple_value_bits;
};

Event read_event(std::string_view data) {
  Event event;
  for (const Field& field : read_fields(data)) {
    if (field.number == 1) event.wall_time = std::bit_cast<double>(field.scalar);
    if (field.number == 2) event.step = static_cast<int64_t>(field.scalar);
    if (field.number == 3) event.file_version = field.bytes;
    if (field.number != 5) continue;
    std::vector<Field> values = read_fields(field.bytes);
    EXPECT_THAT(values, SizeIs(1)) << "one Summary.Value per event";
    for (const Field& value : read_fields(values.at(0).bytes)) {
      if (value.number == 1) event.tag = value.bytes;
      if (value.number == 2) event.simple_value_bits = static_cast<uint32_t>(value.scalar);
    }
  }
  return event;
}

std::vector<Event> read_events(const fs::path& path) {
  std::vector<Event> events;
  for (const std::string& record : read_records(read_bytes(path))) {
    events.push_back(read_event(record));
  }
  return events;
}

// The one event file a writer made in `dir`.
fs::path event_file_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  EXPECT_THAT(files, SizeIs(1));
  return files.empty() ? fs::path() : files.front();
}

std::unique_ptr<TensorBoardWriter> open_writer(const fs::path& dir) {
  std::string problem;
  auto writer = TensorBoardWriter::open(dir, &problem);
  EXPECT_NE(writer, nullptr) << problem;
  return writer;
}

// Fails every write of an event file with `error` while it lives.
class EventFileFault {
 public:
  explicit EventFileFault(int error) {
    io::set_write_fault_for_testing([error](const fs::path& path) {
      return path.filename().string().find("tfevents") != std::string::npos ? error : 0;
    });
  }
  ~EventFileFault() { io::set_write_fault_for_testing(nullptr); }
};

// ---- the encoding ---------------------------------------------------------------------

TEST(TensorBoardCrc, KnownAnswers) {
  EXPECT_EQ(detail::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(detail::masked_crc32c("123456789"), 0xC78AB0E5u);
  EXPECT_EQ(detail::masked_crc32c(std::string(8, '\0')), 0x07980329u);
}

// The records TensorBoard 2.21's own RecordWriter writes for event_pb2.Event messages
// (computed with the tracking environment's tensorboard and protobuf).
TEST(TensorBoardEncoding, MatchesTensorBoardsOwnWriterByteForByte) {
  EXPECT_EQ(hex(detail::tfrecord(detail::file_version_event(1700000000.0))),
            "1800000000000000a37f4b220900000040fc54d9411a0d627261696e2e4576656e743a32eced8f9d");
  EXPECT_EQ(hex(detail::tfrecord(detail::scalar_event("loss", 3, 0.25f, 1700000000.5))),
            "1a00000000000000129bd82d0900002040fc54d94110032a0d0a0b0a046c6f7373150000803ebcf29b"
            "54");
  // Step 0 is left out, as proto3 does; a zero value is not (it is a oneof member).
  EXPECT_EQ(hex(detail::tfrecord(detail::scalar_event("loss", 0, 0.0f, 1700000000.5))),
            "1800000000000000a37f4b220900002040fc54d9412a0d0a0b0a046c6f73731500000000e825ec1e");
  // A negative step is a ten-byte varint.
  EXPECT_EQ(hex(detail::tfrecord(detail::scalar_event(
                "loss", -1, std::numeric_limits<float>::quiet_NaN(), 1700000000.5))),
            "2300000000000000b09f77430900002040fc54d94110ffffffffffffffffff012a0d0a0b0a046c6f73"
            "73150000c07f0e460d98");
}

// ---- the writer -----------------------------------------------------------------------

TEST(TensorBoardWriter, WritesTheFileVersionThenTheScalars) {
  kiln::testing::ScratchDir scratch;
  fs::path dir = scratch / "runs/a/tensorboard";  // parents are created too
  double before = unix_seconds_now();
  fs::path path;
  {
    auto writer = open_writer(dir);
    ASSERT_NE(writer, nullptr);
    path = writer->path();
    writer->add_scalar("train/loss", 1, 2.5f, 1700000001.25);
    writer->add_scalar("train/lr", 2, 1e-3f, 1700000002.5);
    writer->add_scalar("eval/test_accuracy", 1234567890123, 0.875f, 1700000003.0);
    EXPECT_TRUE(writer->ok());
    EXPECT_EQ(writer->problem(), "");
  }
  EXPECT_EQ(event_file_in(dir), path);
  EXPECT_THAT(
      path.filename().string(),
      MatchesRegex(fmt::format(R"(events\.out\.tfevents\.[0-9]{{10}}\..+\.{}\.kiln)", ::getpid())));

  std::vector<Event> events = read_events(path);
  ASSERT_THAT(events, SizeIs(4));
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GE(events[0].wall_time, before - 1);
  EXPECT_LE(events[0].wall_time, unix_seconds_now() + 1);
  // The file name's seconds are the first record's.
  EXPECT_THAT(path.filename().string(),
              HasSubstr(fmt::format(".{:010d}.", static_cast<int64_t>(events[0].wall_time))));
  EXPECT_EQ(events[0].tag, std::nullopt);

  struct Expected {
    std::string tag;
    int64_t step;
    float value;
    double wall_time;
  };
  std::vector<Expected> expected = {{"train/loss", 1, 2.5f, 1700000001.25},
                                    {"train/lr", 2, 1e-3f, 1700000002.5},
                                    {"eval/test_accuracy", 1234567890123, 0.875f, 1700000003.0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].tag);
    const Event& event = events[i + 1];
    EXPECT_EQ(event.file_version, std::nullopt);
    EXPECT_EQ(event.tag, expected[i].tag);
    EXPECT_EQ(event.step, expected[i].step);
    EXPECT_EQ(event.simple_value_bits, std::bit_cast<uint32_t>(expected[i].value));
    EXPECT_EQ(event.wall_time, expected[i].wall_time);
  }
}

TEST(TensorBoardWriter, NanAndInfinitiesAreWrittenAsTheyAre) {
  kiln::testing::ScratchDir scratch;
  std::vector<float> values = {
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
      std::bit_cast<float>(0x7fc01234u),  // a NaN with a payload
      std::numeric_limits<float>::infinity(),  -std::numeric_limits<float>::infinity(),  -0.0f};
  fs::path path;
  {
    auto writer = open_writer(scratch.path());
    ASSERT_NE(writer, nullptr);
    path = writer->path();
    for (size_t i = 0; i < values.size(); ++i) {
      writer->add_scalar("train/loss", static_cast<int64_t>(i) + 1, values[i], 1.0);
    }
    EXPECT_TRUE(writer->ok()) << writer->problem();
  }
  std::vector<Event> events = read_events(path);
  ASSERT_THAT(events, SizeIs(values.size() + 1));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(events[i + 1].simple_value_bits, std::bit_cast<uint32_t>(values[i])) << i;
  }
}

TEST(TensorBoardWriter, FlushWritesWhatIsBuffered) {
  kiln::testing::ScratchDir scratch;
  auto writer = open_writer(scratch.path());
  ASSERT_NE(writer, nullptr);
  // The first record is on disk at once: open() has proved the file writable.
  EXPECT_THAT(read_events(writer->path()), SizeIs(1));
  writer->add_scalar("train/loss", 1, 0.5f, 2.0);
  writer->flush();
  EXPECT_THAT(read_events(writer->path()), SizeIs(2));
}

TEST(TensorBoardWriter, ManyScalarsSpanSeveralBufferFills) {
  kiln::testing::ScratchDir scratch;
  constexpr int kSteps = 5000;  // about 200 KB, several times the buffer
  fs::path path;
  {
    auto writer = open_writer(scratch.path());
    ASSERT_NE(writer, nullptr);
    path = writer->path();
    for (int step = 0; step < kSteps; ++step) {
      writer->add_scalar("train/loss", step, static_cast<float>(step) / 8, 1.0 + step);
    }
  }
  std::vector<Event> events = read_events(path);
  ASSERT_THAT(events, SizeIs(kSteps + 1));
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_EQ(events[step + 1].step, step);
    ASSERT_EQ(events[step + 1].simple_value_bits,
              std::bit_cast<uint32_t>(static_cast<float>(step) / 8));
  }
}

TEST(TensorBoardWriter, TwoWritersInOneDirectoryGetTwoFilesInOrder) {
  kiln::testing::ScratchDir scratch;
  auto first = open_writer(scratch.path());
  auto second = open_writer(scratch.path());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->path(), second->path());
  // TensorBoard reads a run's files in name order, and these are in the order opened
  // (within one second the second is the first's name plus a counter).
  EXPECT_LT(first->path().filename().string(), second->path().filename().string());
  EXPECT_THAT(scratch.listing(), SizeIs(2));
}

TEST(TensorBoardWriter, ADirectoryUnderARegularFileIsAProblemNamingIt) {
  kiln::testing::ScratchDir scratch;
  std::ofstream(scratch / "plain") << "not a directory";
  fs::path dir = scratch / "plain/tensorboard";
  std::string problem;
  EXPECT_EQ(TensorBoardWriter::open(dir, &problem), nullptr);
  EXPECT_THAT(problem, HasSubstr("cannot create the TensorBoard directory"));
  EXPECT_THAT(problem, HasSubstr(dir.string()));
  EXPECT_THAT(problem, HasSubstr(std::strerror(ENOTDIR)));
}

TEST(TensorBoardWriter, ADirectoryThatIsARegularFileIsAProblemNamingIt) {
  kiln::testing::ScratchDir scratch;
  std::ofstream(scratch / "plain") << "not a directory";
  std::string problem;
  EXPECT_EQ(TensorBoardWriter::open(scratch / "plain", &problem), nullptr);
  EXPECT_THAT(problem, HasSubstr((scratch / "plain").string()));
}

TEST(TensorBoardWriter, AFailedFirstWriteIsAProblemAndLeavesNoFile) {
  kiln::testing::ScratchDir scratch;
  EventFileFault full(ENOSPC);
  std::string problem;
  EXPECT_EQ(TensorBoardWriter::open(scratch.path(), &problem), nullptr);
  EXPECT_THAT(problem, HasSubstr("cannot write the TensorBoard event file"));
  EXPECT_THAT(problem, HasSubstr(scratch.path().string() + "/events.out.tfevents."));
  EXPECT_THAT(problem, HasSubstr(std::strerror(ENOSPC)));
  EXPECT_THAT(scratch.listing(), SizeIs(0));
}

TEST(TensorBoardWriter, AFailedWriteIsRecordedAndStopsTheWriterWithoutThrowing) {
  kiln::testing::ScratchDir scratch;
  auto writer = open_writer(scratch.path());
  ASSERT_NE(writer, nullptr);
  writer->add_scalar("train/loss", 1, 0.5f, 2.0);
  writer->flush();
  {
    EventFileFault failing(EIO);
    writer->add_scalar("train/loss", 2, 0.25f, 3.0);
    EXPECT_NO_THROW(writer->flush());
  }
  EXPECT_FALSE(writer->ok());
  EXPECT_THAT(writer->problem(), HasSubstr(writer->path().string()));
  EXPECT_THAT(writer->problem(), HasSubstr(std::strerror(EIO)));
  std::string first_problem = writer->problem();

  // The disk works again, but a file after a failed write may end in a partial record:
  // nothing more goes into it, and the first failure stays the one reported.
  writer->add_scalar("train/loss", 3, 0.125f, 4.0);
  writer->flush();
  EXPECT_EQ(writer->problem(), first_problem);
  std::vector<Event> events = read_events(writer->path());
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_EQ(events[1].step, 1);
}

// ---- TensorBoard's own reader (the tracking environment, scripts/setup) -----------------

TEST(TensorBoard, RealReaderReadsTheEvents) {
  const fs::path python = kiln::testing::source_dir() / ".venv/tracking/bin/python";
  ASSERT_TRUE(fs::exists(python))
      << python.string()
      << " does not exist: run scripts/setup, which creates the tracking environment "
         "(TensorBoard, MLflow) from requirements/tracking.txt";
  kiln::testing::ScratchDir scratch;
  fs::path dir = scratch / "run";
  nlohmann::json expected = nlohmann::json::array();
  fs::path path;
  {
    auto writer = open_writer(dir);
    ASSERT_NE(writer, nullptr);
    path = writer->path();
    auto add = [&](std::string tag, int64_t step, float value, double wall_time) {
      writer->add_scalar(tag, step, value, wall_time);
      // Strings keep "nan" and "inf", which JSON numbers cannot hold.
      expected.push_back({{"tag", tag},
                          {"step", step},
                          {"value", fmt::format("{}", value)},
                          {"wall_time", wall_time}});
    };
    add("train/loss", 0, 2.25f, 1700000000.125);
    add("train/accuracy", 0, 0.1f, 1700000000.125);
    add("train/loss", 10, 1.5f, 1700000001.5);
    add("train/loss", 20, std::numeric_limits<float>::quiet_NaN(), 1700000002.75);
    add("train/lr", 20, 3e-4f, 1700000002.75);
    add("eval/test_loss", 20, std::numeric_limits<float>::infinity(), 1700000003.0);
    add("eval/test_accuracy", 20, -std::numeric_limits<float>::infinity(), 1700000003.0);
    add("train/step_ms", 1 << 20, 0.0f, 1700000004.0);
  }
  std::ofstream(scratch / "expected.json") << nlohmann::json{{"scalars", expected}}.dump();

  std::string command =
      fmt::format("'{}' '{}/tests/tools/tensorboard_readback.py' '{}' '{}' > '{}' 2>&1",
                  python.string(), kiln::testing::source_dir().string(), path.string(),
                  (scratch / "expected.json").string(), (scratch / "out").string());
  int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << command << "\n" << read_bytes(scratch / "out");
}

}  // namespace
}  // namespace kiln::track
