// write_file_atomically: the destination is replaced whole or not at all, and a failed
// write (missing directory, a producer that throws) leaves no file and no temporary.
#include "io/atomic_file.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <stdexcept>

#include "io/scratch_files.h"
#include "support/errors.h"

namespace kiln::io {
namespace {

using ::kiln::testing::error_of;
using ::kiln::testing::read_string;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_string;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(AtomicFile, WritesAndReplaces) {
  ScratchDir dir;
  write_file_atomically(dir / "run.json", std::string_view("first"));
  EXPECT_EQ(read_string(dir / "run.json"), "first");
  write_file_atomically(dir / "run.json", std::string("second, longer"));
  EXPECT_EQ(read_string(dir / "run.json"), "second, longer");
  EXPECT_THAT(dir.listing(), ElementsAre("run.json"));  // no temporary left behind
}

TEST(AtomicFile, StreamsFromAProducer) {
  ScratchDir dir;
  write_file_atomically(dir / "data", [](const ByteSink& sink) {
    for (int i = 0; i < 3; ++i) {
      std::string piece = fmt::format("<{}>", i);
      sink(std::as_bytes(std::span(piece.data(), piece.size())));
    }
  });
  EXPECT_EQ(read_string(dir / "data"), "<0><1><2>");
  std::string empty;
  write_file_atomically(dir / "empty", std::as_bytes(std::span(empty.data(), empty.size())));
  EXPECT_EQ(read_string(dir / "empty"), "");
}

TEST(AtomicFile, ThrowingProducerLeavesOldContentAndNoTemporary) {
  ScratchDir dir;
  write_string(dir / "model.safetensors", "old");
  EXPECT_THROW(write_file_atomically(dir / "model.safetensors",
                                     [](const ByteSink& sink) {
                                       std::string half = "half of the new content";
                                       sink(std::as_bytes(std::span(half.data(), half.size())));
                                       throw std::runtime_error("computation failed");
                                     }),
               std::runtime_error);
  EXPECT_EQ(read_string(dir / "model.safetensors"), "old");
  EXPECT_THAT(dir.listing(), ElementsAre("model.safetensors"));
  EXPECT_THROW(write_file_atomically(dir / "new", [](const ByteSink&) { throw 42; }), int);
  EXPECT_THAT(dir.listing(), ElementsAre("model.safetensors"));
}

TEST(AtomicFile, MissingDirectoryIsAnErrorAndCreatesNothing) {
  ScratchDir dir;
  std::string message =
      error_of([&] { write_file_atomically(dir / "no/such/dir/file", std::string_view("x")); });
  EXPECT_THAT(message, HasSubstr("write_file_atomically: cannot create '"));
  EXPECT_THAT(message, HasSubstr("no/such/dir/.file.tmp."));
  EXPECT_THAT(message, HasSubstr("No such file or directory"));
  EXPECT_THAT(dir.listing(), IsEmpty());
}

TEST(AtomicFile, DestinationThatIsADirectory) {
  ScratchDir dir;
  std::filesystem::create_directory(dir / "taken");
  std::string message =
      error_of([&] { write_file_atomically(dir / "taken", std::string_view("x")); });
  EXPECT_THAT(message, HasSubstr("cannot rename"));
  EXPECT_THAT(dir.listing(), ElementsAre("taken"));
  EXPECT_THAT(error_of([&] { write_file_atomically(dir.path() / "", std::string_view("x")); }),
              HasSubstr("names a directory, not a file"));
}

// A full disk used to be reported as "cannot write '.run.json.tmp.123.4'", a name the user
// never chose; the error names the destination (and the temporary only in passing).
TEST(AtomicFile, AWriteErrorNamesTheDestinationAndLeavesNoTemporary) {
  ScratchDir dir;
  write_string(dir / "run.json", "old");
  set_write_fault_for_testing(
      [](const std::filesystem::path& path) { return path.filename() == "run.json" ? ENOSPC : 0; });
  std::string message =
      error_of([&] { write_file_atomically(dir / "run.json", std::string_view("new")); });
  set_write_fault_for_testing(nullptr);
  EXPECT_THAT(message, HasSubstr(fmt::format("cannot write '{}': No space left on device",
                                             (dir / "run.json").string())));
  EXPECT_EQ(read_string(dir / "run.json"), "old");
  EXPECT_THAT(dir.listing(), ElementsAre("run.json"));
}

TEST(AtomicFile, OverwriteInPlaceReplacesTheContent) {
  ScratchDir dir;
  write_string(dir / "run.json", "a longer first version");
  overwrite_file_in_place(dir / "run.json", "short");
  EXPECT_EQ(read_string(dir / "run.json"), "short");
  EXPECT_THAT(error_of([&] { overwrite_file_in_place(dir / "missing", "x"); }),
              HasSubstr("cannot open"));
}

}  // namespace
}  // namespace kiln::io
