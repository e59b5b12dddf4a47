// read_idx: plain and gzip IDX files written byte by byte, every malformed case named in
// the error (missing, empty, not gzip, corrupt gzip, bad magic, unsupported type, rank 0,
// truncated header or data, trailing bytes, overflowing dims), reading only the first rows,
// and garbage that must give a kiln::Error rather than a crash or a huge allocation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "data/idx.h"
#include "data/idx_files.h"
#include "support/errors.h"

namespace kiln::data {
namespace {

using ::kiln::testing::Bytes;
using ::kiln::testing::error_of;
using ::kiln::testing::gzip_bytes;
using ::kiln::testing::idx_bytes;
using ::kiln::testing::iota_bytes;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_bytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ReadIdx, PlainImages) {
  ScratchDir dir;
  Bytes values = iota_bytes(3 * 4 * 5);
  write_bytes(dir / "images-idx3-ubyte", idx_bytes({3, 4, 5}, values));
  IdxArray array = read_idx(dir / "images-idx3-ubyte");
  EXPECT_THAT(array.dims, ElementsAre(3, 4, 5));
  EXPECT_EQ(array.values, values);
}

TEST(ReadIdx, GzipLabels) {
  ScratchDir dir;
  Bytes values = iota_bytes(1000, 10);
  write_bytes(dir / "labels.gz", gzip_bytes(idx_bytes({1000}, values)));
  IdxArray array = read_idx(dir / "labels.gz");
  EXPECT_THAT(array.dims, ElementsAre(1000));
  EXPECT_EQ(array.values, values);
}

TEST(ReadIdx, LargeDimsInBigEndian) {
  ScratchDir dir;
  // 0x00010203 = 66051 elements: every byte of the size matters.
  Bytes values = iota_bytes(66051);
  write_bytes(dir / "a.gz", gzip_bytes(idx_bytes({0x00010203}, values)));
  IdxArray array = read_idx(dir / "a.gz");
  EXPECT_THAT(array.dims, ElementsAre(66051));
  EXPECT_EQ(array.values, values);
}

TEST(ReadIdx, ConcatenatedGzipMembersAreOneStream) {
  ScratchDir dir;
  Bytes whole = idx_bytes({6}, {1, 2, 3, 4, 5, 6});
  Bytes first = gzip_bytes(Bytes(whole.begin(), whole.begin() + 7));
  Bytes second = gzip_bytes(Bytes(whole.begin() + 7, whole.end()));
  first.insert(first.end(), second.begin(), second.end());
  write_bytes(dir / "a.gz", first);
  EXPECT_THAT(read_idx(dir / "a.gz").values, ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ReadIdx, ZeroSizedArray) {
  ScratchDir dir;
  write_bytes(dir / "a", idx_bytes({0, 28, 28}, {}));
  IdxArray array = read_idx(dir / "a");
  EXPECT_THAT(array.dims, ElementsAre(0, 28, 28));
  EXPECT_TRUE(array.values.empty());
}

TEST(ReadIdx, MissingFileAndDirectory) {
  ScratchDir dir;
  std::string message = error_of([&] { read_idx(dir / "nope.gz"); });
  EXPECT_THAT(message, HasSubstr("read_idx"));
  EXPECT_THAT(message, HasSubstr("nope.gz"));
  EXPECT_THAT(message, HasSubstr("no such file"));
  EXPECT_THAT(error_of([&] { read_idx(dir.path()); }), HasSubstr("is not a regular file"));
}

TEST(ReadIdx, EmptyFile) {
  ScratchDir dir;
  write_bytes(dir / "a", {});
  write_bytes(dir / "b.gz", {});
  EXPECT_THAT(error_of([&] { read_idx(dir / "a"); }), HasSubstr("is empty"));
  EXPECT_THAT(error_of([&] { read_idx(dir / "b.gz"); }), HasSubstr("is empty"));
  // A gzip stream that decompresses to nothing.
  write_bytes(dir / "c.gz", gzip_bytes({}));
  EXPECT_THAT(error_of([&] { read_idx(dir / "c.gz"); }),
              HasSubstr("truncated header: expected 4 bytes of magic number, found 0"));
}

TEST(ReadIdx, TruncatedHeader) {
  ScratchDir dir;
  write_bytes(dir / "a", {0, 0, 8});
  EXPECT_THAT(error_of([&] { read_idx(dir / "a"); }),
              HasSubstr("truncated header: expected 4 bytes of magic number, found 3"));
  write_bytes(dir / "b", {0, 0, 8, 3, 0, 0, 0, 1, 0, 0});
  std::string message = error_of([&] { read_idx(dir / "b"); });
  EXPECT_THAT(message, HasSubstr("expected 12 bytes of dims for rank 3, found 6"));
  write_bytes(dir / "c.gz", gzip_bytes({0, 0, 8, 3, 0, 0, 0, 1, 0, 0}));
  EXPECT_THAT(error_of([&] { read_idx(dir / "c.gz"); }),
              HasSubstr("expected 12 bytes of dims for rank 3, found 6"));
}

TEST(ReadIdx, BadMagic) {
  ScratchDir dir;
  write_bytes(dir / "a", {1, 0, 8, 1, 0, 0, 0, 0});
  std::string message = error_of([&] { read_idx(dir / "a"); });
  EXPECT_THAT(message, HasSubstr("bad magic number 01 00 08 01"));
  EXPECT_THAT(message, HasSubstr("'" + (dir / "a").string() + "'"));
}

TEST(ReadIdx, UnsupportedAndUnknownTypeCodes) {
  ScratchDir dir;
  write_bytes(dir / "f32", idx_bytes({1}, {0, 0, 0, 0}, 0x0D));
  EXPECT_THAT(error_of([&] { read_idx(dir / "f32"); }),
              HasSubstr("IDX type code 0x0d (f32) is not supported; only 0x08 (u8) is"));
  write_bytes(dir / "odd", idx_bytes({1}, {0}, 0x42));
  EXPECT_THAT(error_of([&] { read_idx(dir / "odd"); }), HasSubstr("unknown IDX type code 0x42"));
}

TEST(ReadIdx, RankZero) {
  ScratchDir dir;
  write_bytes(dir / "a", {0, 0, 8, 0, 7});
  EXPECT_THAT(error_of([&] { read_idx(dir / "a"); }), HasSubstr("rank 0"));
}

TEST(ReadIdx, TruncatedData) {
  ScratchDir dir;
  Bytes bytes = idx_bytes({1000}, iota_bytes(10));
  write_bytes(dir / "a", bytes);
  write_bytes(dir / "a.gz", gzip_bytes(bytes));
  for (const char* name : {"a", "a.gz"}) {
    std::string message = error_of([&] { read_idx(dir / name); });
    EXPECT_THAT(message,
                HasSubstr("truncated: expected 1000 bytes of data for dims [1000], found 10"))
        << name;
  }
}

TEST(ReadIdx, HeaderClaimingHugeDimsIsTruncatedNotAnAllocation) {
  ScratchDir dir;
  // 3e9 x 3e9 elements would be 9 EB; the reader must not try to allocate them.
  Bytes bytes = idx_bytes({0xB2D05E00u, 0xB2D05E00u}, iota_bytes(100));
  write_bytes(dir / "a", bytes);
  write_bytes(dir / "a.gz", gzip_bytes(bytes));
  for (const char* name : {"a", "a.gz"}) {
    EXPECT_THAT(error_of([&] { read_idx(dir / name); }),
                HasSubstr("bytes of data for dims [3000000000,3000000000], found 100"))
        << name;
  }
}

TEST(ReadIdx, OverflowingDims) {
  ScratchDir dir;
  write_bytes(dir / "a", idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
  EXPECT_THAT(error_of([&] { read_idx(dir / "a"); }), HasSubstr("have too many elements"));
  // Empty (a 0 size) but with strides past int64: found by the idx fuzz target.
  write_bytes(dir / "b", idx_bytes({0x10000u, 0xFFFFFFFFu, 0xFFFFFFFFu, 0u}, {}));
  EXPECT_THAT(error_of([&] { read_idx(dir / "b"); }),
              HasSubstr("dims [65536,4294967295,4294967295,0] have too many elements"));
}

TEST(ReadIdx, TrailingData) {
  ScratchDir dir;
  Bytes bytes = idx_bytes({4}, {1, 2, 3, 4, 5, 6, 7});
  write_bytes(dir / "a", bytes);
  write_bytes(dir / "a.gz", gzip_bytes(bytes));
  for (const char* name : {"a", "a.gz"}) {
    EXPECT_THAT(error_of([&] { read_idx(dir / name); }),
                HasSubstr("3 bytes of trailing data after the 4 bytes that dims [4] need"))
        << name;
  }
}

// A row limit reads only the first rows: the header's count is kept apart, a limit at or
// over the count reads (and checks) the whole file, and a truncation inside the rows asked
// for is still an error, while one after them goes unread.
TEST(ReadIdx, FirstRowsOnly) {
  ScratchDir dir;
  Bytes values = iota_bytes(3 * 4 * 5);
  Bytes bytes = idx_bytes({3, 4, 5}, values);
  write_bytes(dir / "a", bytes);
  write_bytes(dir / "a.gz", gzip_bytes(bytes));
  for (const char* name : {"a", "a.gz"}) {
    IdxArray two = read_idx(dir / name, 2);
    EXPECT_THAT(two.dims, ElementsAre(2, 4, 5)) << name;
    EXPECT_EQ(two.rows_in_file, 3) << name;
    EXPECT_EQ(two.values, Bytes(values.begin(), values.begin() + 40)) << name;
    EXPECT_THAT(read_idx(dir / name, 3).dims, ElementsAre(3, 4, 5)) << name;
    EXPECT_EQ(read_idx(dir / name, 50).values, values) << name;
  }
  // Rows 0-1 complete, row 2 cut short, then trailing bytes nobody asked for.
  Bytes cut = idx_bytes({3, 4, 5}, Bytes(values.begin(), values.begin() + 45));
  write_bytes(dir / "cut.gz", gzip_bytes(cut));
  EXPECT_EQ(read_idx(dir / "cut.gz", 2).values.size(), 40u);
  EXPECT_THAT(error_of([&] { read_idx(dir / "cut.gz", 3); }),
              HasSubstr("truncated: expected 60 bytes of data for dims [3,4,5], found 45"));
  Bytes long_file = idx_bytes({2}, {1, 2, 3});
  write_bytes(dir / "long", long_file);
  EXPECT_THAT(read_idx(dir / "long", 1).values, ElementsAre(1));
  EXPECT_THAT(error_of([&] { read_idx(dir / "long", 2); }), HasSubstr("1 bytes of trailing data"));
}

TEST(ReadIdx, GzipNameWithoutGzipAndTheReverse) {
  ScratchDir dir;
  Bytes bytes = idx_bytes({2}, {1, 2});
  write_bytes(dir / "plain.gz", bytes);
  EXPECT_THAT(error_of([&] { read_idx(dir / "plain.gz"); }),
              HasSubstr("is not gzip-compressed (no gzip header), but its name ends in .gz"));
  write_bytes(dir / "packed", gzip_bytes(bytes));
  EXPECT_THAT(error_of([&] { read_idx(dir / "packed"); }),
              HasSubstr("is gzip-compressed but its name does not end in .gz"));
}

TEST(ReadIdx, CorruptAndTruncatedGzip) {
  ScratchDir dir;
  Bytes packed = gzip_bytes(idx_bytes({2000}, iota_bytes(2000)));
  Bytes corrupt = packed;
  for (size_t i = 12; i < corrupt.size() - 8; ++i) corrupt[i] ^= 0x5A;
  write_bytes(dir / "corrupt.gz", corrupt);
  EXPECT_THAT(error_of([&] { read_idx(dir / "corrupt.gz"); }), HasSubstr("gzip data"));
  write_bytes(dir / "cut.gz", Bytes(packed.begin(), packed.begin() + packed.size() / 2));
  std::string message = error_of([&] { read_idx(dir / "cut.gz"); });
  EXPECT_THAT(message, HasSubstr("cut.gz"));
  EXPECT_THAT(message, HasSubstr("truncated"));
}

// Large enough that zlib would decompress it straight into the caller's buffer (past its
// 1 MiB internal buffer), where gzread stopped without reading the trailer: a file missing
// its last 1-8 bytes (all or part of the CRC-32 and size) loaded without an error.
Bytes large_gzip() {
  Bytes pixels(3000 * 784);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 7919) % 253);
  return gzip_bytes(idx_bytes({3000, 28, 28}, pixels));
}

TEST(ReadIdx, GzipMissingItsTrailerIsAnError) {
  ScratchDir dir;
  Bytes packed = large_gzip();
  for (size_t cut = 1; cut <= 8; ++cut) {
    write_bytes(dir / "cut.gz", Bytes(packed.begin(), packed.end() - static_cast<long>(cut)));
    std::string message = error_of([&] { read_idx(dir / "cut.gz"); });
    EXPECT_THAT(message, HasSubstr("cut.gz")) << cut;
    EXPECT_THAT(message, HasSubstr("truncated gzip data")) << cut;
  }
}

TEST(ReadIdx, GzipWhoseTrailerDisagreesWithTheDataIsAnError) {
  ScratchDir dir;
  Bytes packed = large_gzip();
  Bytes bad_crc = packed;
  bad_crc[bad_crc.size() - 8] ^= 0x01;  // first byte of the CRC-32
  write_bytes(dir / "crc.gz", bad_crc);
  std::string message = error_of([&] { read_idx(dir / "crc.gz"); });
  EXPECT_THAT(message, HasSubstr("crc.gz"));
  EXPECT_THAT(message, HasSubstr("CRC-32"));
  Bytes bad_size = packed;
  bad_size[bad_size.size() - 1] ^= 0x01;  // last byte of the size
  write_bytes(dir / "size.gz", bad_size);
  EXPECT_THAT(error_of([&] { read_idx(dir / "size.gz"); }), HasSubstr("decompressed size"));
  // Intact, the same bytes load.
  write_bytes(dir / "good.gz", packed);
  EXPECT_EQ(read_idx(dir / "good.gz").values.size(), size_t{3000 * 784});
}

// Random files and random corruptions of a valid file: each read either succeeds or throws
// a kiln::Error (any other exception, a crash or a sanitizer report fails the test).
TEST(ReadIdx, GarbageNeverCrashes) {
  ScratchDir dir;
  std::mt19937 random(12345);
  Bytes valid = idx_bytes({7, 3}, iota_bytes(21));
  Bytes valid_gz = gzip_bytes(valid);
  int errors = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Bytes bytes;
    switch (trial % 3) {
      case 0: {  // pure noise, sometimes starting like an IDX or gzip file
        bytes.resize(random() % 64);
        for (auto& byte : bytes) byte = static_cast<uint8_t>(random());
        if (bytes.size() >= 2 && trial % 2) bytes[0] = bytes[1] = 0;
        break;
      }
      case 1:
      case 2: {  // a few flipped bytes in a valid file
        bytes = trial % 3 == 1 ? valid : valid_gz;
        for (int flips = 1 + static_cast<int>(random() % 3); flips > 0; --flips) {
          bytes[random() % bytes.size()] ^= static_cast<uint8_t>(1 + random() % 255);
        }
        if (random() % 4 == 0) bytes.resize(random() % bytes.size());
        break;
      }
    }
    auto path = dir / (trial % 2 ? "garbage.gz" : "garbage");
    write_bytes(path, bytes);
    try {
      IdxArray array = read_idx(path);
      int64_t count = 1;
      for (int64_t dim : array.dims) count *= dim;
      EXPECT_EQ(static_cast<int64_t>(array.values.size()), count) << "trial " << trial;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 200);  // nearly all of them are malformed
}

}  // namespace
}  // namespace kiln::data
