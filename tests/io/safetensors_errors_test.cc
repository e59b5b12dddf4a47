// load_safetensors on malformed files built byte by byte: each problem gives a kiln::Error
// naming the file (and the tensor), never a crash or an attempt to allocate what the
// header claims. The checks follow the reference reader (research/formats.md §1.4), plus
// duplicate names, unknown fields and non-0/1 booleans, which kiln also rejects.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "io/scratch_files.h"
#include "kiln/ops.h"
#include "kiln/safetensors.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {

using ::kiln::testing::error_of;
using ::kiln::testing::read_string;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::values;
using ::kiln::testing::write_string;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string length_prefix(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(length >> (8 * i));
  return bytes;
}

// A file with `header` as its JSON header and `data` as its byte buffer.
std::string file_bytes(const std::string& header, const std::string& data) {
  return length_prefix(header.size()) + header + data;
}

class SafetensorsErrors : public ::testing::Test {
 protected:
  // The message of loading a file with these bytes.
  std::string load_error(const std::string& bytes) {
    write_string(path(), bytes);
    return error_of([&] { load_safetensors(path()); });
  }
  std::string load_error(const std::string& header, const std::string& data) {
    return load_error(file_bytes(header, data));
  }
  std::filesystem::path path() const { return dir_ / "bad.safetensors"; }
  std::string prefix() const { return "load_safetensors: '" + path().string() + "': "; }

  ScratchDir dir_;
};

const std::string kEightBytes(8, '\x01');

TEST_F(SafetensorsErrors, MissingFile) {
  EXPECT_THAT(error_of([&] { load_safetensors(dir_ / "absent"); }), HasSubstr("no such file"));
}

TEST_F(SafetensorsErrors, ShorterThanTheLength) {
  EXPECT_THAT(load_error(std::string("\x02\0\0", 3)),
              HasSubstr(prefix() + "the file has 3 bytes; a safetensors file starts with an "
                                   "8-byte header length"));
}

TEST_F(SafetensorsErrors, HeaderLengthTooLargeOrPastTheEnd) {
  EXPECT_THAT(load_error(length_prefix(0xFFFFFFFFFFFFFF00ull) + "{}"),
              HasSubstr("header length 18446744073709551360 is over the 100000000-byte limit"));
  EXPECT_THAT(load_error(length_prefix(100) + "{}"),
              HasSubstr("header length 100 runs past the end of the 10-byte file"));
}

TEST_F(SafetensorsErrors, InvalidJson) {
  EXPECT_THAT(load_error(R"({"a": )", ""), HasSubstr("the header is not valid JSON"));
  // NUL padding is not JSON whitespace.
  EXPECT_THAT(load_error(std::string("{}\0\0", 4), ""), HasSubstr("not valid JSON"));
  EXPECT_THAT(load_error(R"(["a"])", ""), HasSubstr("the header must be a JSON object, got array"));
  EXPECT_THAT(load_error("{\"\xff\":1}", ""), HasSubstr("not valid JSON"));
}

TEST_F(SafetensorsErrors, WhitespaceAroundTheHeaderIsAccepted) {
  std::string header = R"(  {"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}} )"
                       "\n\t";
  write_string(path(), file_bytes(header, "\x05\x06"));
  SafetensorsFile file = load_safetensors(path());
  ASSERT_EQ(file.arrays.size(), 1u);
  EXPECT_THAT(values(file.arrays[0].second), ElementsAre(5, 6));
}

TEST_F(SafetensorsErrors, MissingAndUnknownFields) {
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":[2]}})", kEightBytes),
              HasSubstr("tensor 'w' has no \"data_offsets\" field"));
  EXPECT_THAT(load_error(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("tensor 'w' has no \"dtype\" field"));
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}})",
                         kEightBytes),
              HasSubstr("tensor 'w' has an unknown field \"strides\""));
  EXPECT_THAT(load_error(R"({"w":[1,2]})", ""),
              HasSubstr("tensor 'w': expected an object with dtype, shape and data_offsets, got "
                        "array"));
}

TEST_F(SafetensorsErrors, UnknownAndUnsupportedDTypes) {
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("tensor 'w' has unknown dtype \"F33\"; kiln reads BOOL U8 I32 I64 U32 F16 "
                        "BF16 F32 F64"));
  EXPECT_THAT(load_error(R"({"w":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("tensor 'w' has safetensors dtype \"I16\"; kiln reads"));
  EXPECT_THAT(load_error(R"({"w":{"dtype":3,"shape":[2],"data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("\"dtype\" must be a string, got a non-negative integer"));
}

TEST_F(SafetensorsErrors, BadShapes) {
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("tensor 'w': \"shape\" must hold non-negative integers, got a negative "
                        "integer (-2)"));
  EXPECT_THAT(
      load_error(R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", kEightBytes),
      HasSubstr("got number (2.0)"));
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("\"shape\" must be an array of non-negative integers, got string"));
  EXPECT_THAT(
      load_error(R"({"w":{"dtype":"U8","shape":[2,18446744073709551614],"data_offsets":[0,8]}})",
                 kEightBytes),
      HasSubstr("tensor 'w': shape [2,18446744073709551614] has too many elements"));
  // Empty, but its strides would overflow: refused before anything computes them.
  EXPECT_THAT(
      load_error(R"({"w":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})",
                 ""),
      HasSubstr("tensor 'w': shape [0,4294967296,4294967296] has too many elements"));
}

TEST_F(SafetensorsErrors, OffsetsThatDoNotMatchTheShape) {
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kEightBytes),
              HasSubstr("tensor 'w' is f32[3], which takes 12 bytes, but its data_offsets [0, 8] "
                        "hold 8"));
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", kEightBytes),
              HasSubstr("data_offsets [8, 0] end before they begin"));
  EXPECT_THAT(
      load_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", kEightBytes),
      HasSubstr("\"data_offsets\" must be [begin, end], got [0,8,9]"));
}

TEST_F(SafetensorsErrors, OffsetsOutsideTheData) {
  // A file cut short: the tensor claims bytes that are not there.
  EXPECT_THAT(load_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", kEightBytes),
              HasSubstr("tensor 'w': data_offsets [0, 16] run past the end of the data section "
                        "(8 bytes; is the file truncated?)"));
}

TEST_F(SafetensorsErrors, OverlapsHolesAndTrailingBytes) {
  EXPECT_THAT(load_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                         kEightBytes),
              HasSubstr("tensors 'a' (bytes [0, 8]) and 'b' (bytes [4, 8]) overlap"));
  // Ten names for the same bytes (the reference's "JSON attack" test).
  std::string header = "{";
  for (int i = 0; i < 10; ++i) {
    header += fmt::format(R"({}"t{}":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                          i ? "," : "", i);
  }
  EXPECT_THAT(load_error(header + "}", kEightBytes), HasSubstr("overlap"));
  EXPECT_THAT(load_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", kEightBytes),
              HasSubstr("bytes [0, 4] of the data section belong to no tensor (before 'a')"));
  EXPECT_THAT(load_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", kEightBytes),
              HasSubstr("the data section has 8 bytes but the tensors use only 4: 4 trailing "
                        "bytes"));
}

TEST_F(SafetensorsErrors, DuplicateNames) {
  EXPECT_THAT(load_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                         kEightBytes),
              HasSubstr(prefix() + "the header names 'a' twice"));
}

TEST_F(SafetensorsErrors, MetadataMustMapStringsToStrings) {
  EXPECT_THAT(load_error(R"({"__metadata__":{"epoch":3}})", ""),
              HasSubstr("\"__metadata__\" values must be strings; 'epoch' is a non-negative "
                        "integer"));
  EXPECT_THAT(load_error(R"({"__metadata__":"pt"})", ""),
              HasSubstr("\"__metadata__\" must be an object of strings, got string"));
}

TEST_F(SafetensorsErrors, BooleansAreZeroOrOne) {
  EXPECT_THAT(load_error(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                         std::string("\x01\x00\x02", 3)),
              HasSubstr("BOOL tensor 'm' holds the byte 2 at element 2"));
}

// Random bytes, and random corruptions of a valid file: a kiln::Error or a successful load,
// never a crash (the sanitizer build runs this too).
TEST_F(SafetensorsErrors, GarbageNeverCrashes) {
  save_safetensors(dir_ / "good", NamedArrays{{"a", ones({3, 2})}, {"b", arange(5, DType::i64)}},
                   {{"format", "pt"}});
  std::string good = read_string(dir_ / "good");
  std::mt19937 random(2024);
  int errors = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes;
    if (trial % 2 == 0) {
      bytes.resize(random() % 80);
      for (char& byte : bytes) byte = static_cast<char>(random());
      if (bytes.size() >= 8 && trial % 4 == 0) bytes.replace(0, 8, length_prefix(bytes.size() - 8));
    } else {
      bytes = good;
      for (int flips = 1 + static_cast<int>(random() % 3); flips > 0; --flips) {
        bytes[random() % bytes.size()] ^= static_cast<char>(1 + random() % 255);
      }
      if (random() % 4 == 0) bytes.resize(random() % bytes.size());
    }
    write_string(path(), bytes);
    try {
      SafetensorsFile file = load_safetensors(path());
      for (const auto& [name, array] : file.arrays) array.block_until_ready();
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 150);
}

}  // namespace
}  // namespace kiln
