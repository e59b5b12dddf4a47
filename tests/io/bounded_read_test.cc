// read_regular_file and parse_json: whatever is at the path, the read ends within its limit
// or fails naming the file (issue 43: a FIFO config hung, /dev/zero as a record filled the
// memory, run.json nested 100,000 deep crashed every reader).
#include "io/bounded_read.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include <nlohmann/json.hpp>

#include "io/scratch_files.h"
#include "support/errors.h"

namespace kiln::io {
namespace {

using ::kiln::testing::error_of;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_string;
using ::testing::HasSubstr;

std::string nested_arrays(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(BoundedRead, ReadsARegularFileWhole) {
  ScratchDir dir;
  std::string text(200000, 'x');  // more than one read's buffer
  write_string(dir / "metrics.jsonl", text);
  EXPECT_EQ(read_regular_file(dir / "metrics.jsonl", text.size()), text);
  EXPECT_EQ(read_regular_file_if_present(dir / "metrics.jsonl", text.size()), text);
  write_string(dir / "empty", "");
  EXPECT_EQ(read_regular_file(dir / "empty", 0), "");
}

TEST(BoundedRead, AMissingFileIsAnErrorOrNothing) {
  ScratchDir dir;
  EXPECT_EQ(error_of([&] { read_regular_file(dir / "run.json", 100); }),
            "cannot read " + (dir / "run.json").string() + ": no such file");
  EXPECT_EQ(read_regular_file_if_present(dir / "run.json", 100), std::nullopt);
}

TEST(BoundedRead, AFileOverTheLimitIsRefusedNamingIt) {
  ScratchDir dir;
  write_string(dir / "run.json", std::string(101, ' '));
  EXPECT_THAT(error_of([&] { read_regular_file(dir / "run.json", 100); }),
              HasSubstr((dir / "run.json").string() + ": it is larger than 100 bytes"));
  EXPECT_EQ(read_regular_file(dir / "run.json", 101).size(), 101u);
}

TEST(BoundedRead, WhatIsNotARegularFileIsRefusedBeforeAnyRead) {
  ScratchDir dir;
  // A FIFO with no writer: opening it for reading would wait for one forever.
  ASSERT_EQ(::mkfifo((dir / "config.toml").c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { read_regular_file(dir / "config.toml", 100); }),
              HasSubstr("config.toml: it is a FIFO, and kiln reads only regular files"));
  EXPECT_THAT(error_of([&] { read_regular_file_if_present(dir / "config.toml", 100); }),
              HasSubstr("it is a FIFO"));
  // /dev/zero never ends; a limit alone would read up to it.
  EXPECT_THAT(error_of([&] { read_regular_file("/dev/zero", size_t{1} << 30); }),
              HasSubstr("/dev/zero: it is a character device"));
  EXPECT_THAT(error_of([&] { read_regular_file(dir.path(), 100); }), HasSubstr("a directory"));
}

TEST(ParseJson, ParsesWhatKilnWrites) {
  nlohmann::json value = parse_json(R"({"status": "completed", "steps": [1, 2]})", "run.json");
  EXPECT_EQ(value["status"], "completed");
  EXPECT_EQ(parse_json(nested_arrays(kMaxJsonDepth), "deep.json").size(), 1u);
}

TEST(ParseJson, NestingPastTheLimitIsRefusedNotOverflowed) {
  for (int depth : {kMaxJsonDepth + 1, 100000}) {
    EXPECT_EQ(error_of([&] { parse_json(nested_arrays(depth), "runs/a/run.json"); }),
              "runs/a/run.json: not a record kiln wrote: JSON nested more than 64 levels deep");
    EXPECT_EQ(parse_json_if_valid(nested_arrays(depth)), std::nullopt);
  }
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_THAT(error_of([&] { parse_json(objects, "x"); }), HasSubstr("nested more than 64"));
  EXPECT_EQ(parse_json(nested_arrays(3), "x", /*max_depth=*/3).size(), 1u);
  EXPECT_THAT(error_of([&] { parse_json(nested_arrays(4), "x", 3); }),
              HasSubstr("more than 3 levels"));
}

TEST(ParseJson, TextThatIsNotJsonNamesTheSourceAndLine) {
  EXPECT_THAT(error_of([&] { parse_json("{\n\"a\": ", "run.json"); }),
              HasSubstr("run.json:2: not valid JSON"));
  // Invalid UTF-8 in a string: refused by the parser, named like any other error.
  EXPECT_THAT(error_of([&] { parse_json("{\"\xff\": 1}", "manifest.json"); }),
              HasSubstr("manifest.json:1: not valid JSON"));
  // A number beyond a double is nlohmann's out_of_range, not a parse_error: the savepoint
  // manifest fuzz target found it escaping as an uncaught exception.
  EXPECT_THAT(error_of([&] { parse_json("33e330", "manifest.json"); }),
              HasSubstr("manifest.json: not valid JSON"));
  EXPECT_EQ(parse_json_if_valid("[1e400]"), std::nullopt);
  EXPECT_EQ(parse_json_if_valid("{\"a\": "), std::nullopt);
  EXPECT_EQ(parse_json_if_valid("[1]")->size(), 1u);
}

TEST(PrintablePath, EscapesEachByteThatIsNotUtf8) {
  EXPECT_EQ(printable_path("runs/ok.toml"), "runs/ok.toml");
  EXPECT_EQ(printable_path("caf\xc3\xa9.toml"), "caf\xc3\xa9.toml");
  EXPECT_EQ(printable_path("wine\xff.toml"), "wine\\xff.toml");
  // Overlong forms and surrogates are not UTF-8 either (nlohmann would refuse them).
  EXPECT_EQ(printable_path("a\xc0\xaf"), "a\\xc0\\xaf");
  EXPECT_EQ(printable_path("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable_path("cut\xe2\x82"), "cut\\xe2\\x82");
  // Whatever it returns, JSON can hold and print it.
  nlohmann::json record = {{"config_file", printable_path("x\xfe\xff")}};
  EXPECT_EQ(record.dump(), R"({"config_file":"x\\xfe\\xff"})");
}

}  // namespace
}  // namespace kiln::io
