// read_npy on files built byte by byte: the three format versions, NumPy's current header
// (with its growth padding) and the older one without, every dtype kiln reads, scalar and
// empty shapes, and every malformed case named in the error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "data/idx_files.h"
#include "data/npy.h"
#include "data/npy_files.h"
#include "support/errors.h"

namespace kiln::data {
namespace {

using ::kiln::testing::Bytes;
using ::kiln::testing::bytes_of;
using ::kiln::testing::fails_with;
using ::kiln::testing::npy_bytes;
using ::kiln::testing::npy_dict;
using ::kiln::testing::ScratchDir;
using ::kiln::testing::write_bytes;
using ::testing::ElementsAre;

TEST(ReadNpy, ReadsNumpysCurrentHeaderExactly) {
  ScratchDir dir;
  std::vector<float> values = {1, 2, 3, 4, 5, 6.5f};
  // NumPy 2 pads this header to 128 bytes in all (HEADER_LEN 0x76, docs/data.md).
  Bytes bytes = npy_bytes(npy_dict("<f4", "(2, 3)"), bytes_of(values), 1, 21);
  ASSERT_EQ(bytes[8], 0x76);
  ASSERT_EQ(bytes.size(), 128u + 24u);
  write_bytes(dir / "a.npy", bytes);
  RawArray array = read_npy(dir / "a.npy");
  EXPECT_EQ(array.dtype, DType::f32);
  EXPECT_THAT(array.shape, ElementsAre(2, 3));
  EXPECT_EQ(array.element(5), 6.5);
  EXPECT_EQ(array.record_size(), 3);
}

TEST(ReadNpy, ReadsOlderHeadersAndVersionsTwoAndThree) {
  ScratchDir dir;
  std::vector<int64_t> values = {-7, 9};
  for (int major : {1, 2, 3}) {
    write_bytes(dir / "b.npy", npy_bytes(npy_dict("<i8", "(2,)"), bytes_of(values), major));
    RawArray array = read_npy(dir / "b.npy");
    EXPECT_EQ(array.dtype, DType::i64);
    EXPECT_THAT(array.shape, ElementsAre(2));
    EXPECT_EQ(array.element(0), -7) << "version " << major;
  }
  // Keys in another order, double quotes: a reader must not depend on the writer's order.
  write_bytes(dir / "c.npy",
              npy_bytes("{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"<i8\"}",
                        bytes_of(values)));
  EXPECT_THAT(read_npy(dir / "c.npy").shape, ElementsAre(1, 2));
}

TEST(ReadNpy, ReadsEveryKilnDtypeNumpyHas) {
  ScratchDir dir;
  struct Case {
    std::string descr;
    DType dtype;
    Bytes data;
    double first;
  };
  std::vector<Case> cases = {
      {"|b1", DType::bool_, {1, 0}, 1},
      {"|u1", DType::u8, {200, 3}, 200},
      {"<i4", DType::i32, bytes_of(std::vector<int32_t>{-5, 1}), -5},
      {"<i8", DType::i64, bytes_of(std::vector<int64_t>{-6, 1}), -6},
      {"<u4", DType::u32, bytes_of(std::vector<uint32_t>{4000000000u, 1}), 4000000000.0},
      {"<f2", DType::f16, bytes_of(std::vector<uint16_t>{0x3C00, 0}), 1.0},  // 1.0 in f16
      {"<f4", DType::f32, bytes_of(std::vector<float>{0.25f, 1}), 0.25},
      {"<f8", DType::f64, bytes_of(std::vector<double>{-0.125, 1}), -0.125},
  };
  for (const Case& c : cases) {
    write_bytes(dir / "d.npy", npy_bytes(npy_dict(c.descr, "(2,)"), c.data));
    RawArray array = read_npy(dir / "d.npy");
    EXPECT_EQ(array.dtype, c.dtype) << c.descr;
    EXPECT_EQ(array.element(0), c.first) << c.descr;
  }
}

TEST(ReadNpy, ScalarAndEmptyShapes) {
  ScratchDir dir;
  write_bytes(dir / "s.npy", npy_bytes(npy_dict("<f8", "()"), bytes_of(std::vector<double>{2.5})));
  RawArray scalar = read_npy(dir / "s.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.element(0), 2.5);
  write_bytes(dir / "e.npy", npy_bytes(npy_dict("<f4", "(0, 3)"), {}));
  EXPECT_THAT(read_npy(dir / "e.npy").shape, ElementsAre(0, 3));
}

TEST(ReadNpy, NamesEveryMalformedFile) {
  ScratchDir dir;
  Bytes six = bytes_of(std::vector<float>{1, 2, 3, 4, 5, 6});
  struct Case {
    std::string name;
    Bytes bytes;
    std::vector<std::string_view> message;
  };
  Bytes long_header = npy_bytes(npy_dict("<f4", "(2, 3)"), six, 2, 10001);
  Bytes bad_version = npy_bytes(npy_dict("<f4", "(2, 3)"), six);
  bad_version[6] = 4;
  std::vector<Case> cases = {
      {"magic.npy", {'P', 'K', 3, 4, 0, 0, 0, 0}, {"not an .npy file"}},
      {"short.npy", {0x93, 'N'}, {"not an .npy file"}},
      {"version.npy", bad_version, {"format version 4.0"}},
      {"long.npy", long_header, {"longer than 10000"}},
      {"keys.npy",
       npy_bytes("{'descr': '<f4', 'shape': (2, 3), 'x': 1}", six),
       {"unexpected key 'x'"}},
      {"nokey.npy", npy_bytes("{'descr': '<f4', 'shape': (2, 3)}", six), {"no 'fortran_order'"}},
      {"notdict.npy", npy_bytes("[1, 2]", six), {"bad header", "expected '{'"}},
      {"fortran.npy", npy_bytes(npy_dict("<f4", "(2, 3)", true), six), {"Fortran order"}},
      {"bigendian.npy", npy_bytes(npy_dict(">f4", "(2, 3)"), six), {"dtype '>f4'"}},
      {"object.npy", npy_bytes(npy_dict("|O", "(2, 3)"), six), {"dtype '|O'"}},
      {"int16.npy", npy_bytes(npy_dict("<i2", "(2, 3)"), six), {"dtype '<i2'"}},
      {"truncated.npy",
       npy_bytes(npy_dict("<f4", "(2, 4)"), six),
       {"truncated", "[2,4]", "8 elements of 4 bytes", "the file has 24"}},
      {"trailing.npy",
       npy_bytes(npy_dict("<f4", "(2, 2)"), six),
       {"trailing bytes", "needs 4 elements", "has 24"}},
      {"overflow.npy",
       npy_bytes(npy_dict("<f4", "(4294967296, 4294967296, 4294967296)"), six),
       {"more elements than fit in 64 bits"}},
      {"empty_but_overflowing_strides.npy",
       npy_bytes(npy_dict("<f4", "(0, 4294967296, 4294967296)"), Bytes{}),
       {"[0,4294967296,4294967296]", "strides that do not fit in 64 bits"}},
      {"bigdim.npy",
       npy_bytes(npy_dict("<f4", "(99999999999999999999,)"), six),
       {"dimension overflows"}},
  };
  for (const Case& c : cases) {
    write_bytes(dir / c.name, c.bytes);
    std::vector<std::string_view> parts = c.message;
    parts.push_back(c.name);
    std::string message = ::kiln::testing::error_of([&] { read_npy(dir / c.name); });
    for (std::string_view part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << c.name << ": " << message;
    }
  }
  EXPECT_TRUE(
      fails_with([&] { read_npy(dir / "missing.npy"); }, {"missing.npy", "does not exist"}));
}

}  // namespace
}  // namespace kiln::data

namespace kiln::data {
namespace {

// write_npy writes what read_npy (and NumPy) read back: every dtype, rank 0 to 3, and an
// empty array; a dtype NumPy lacks is refused by name.
TEST(WriteNpy, WritesWhatReadsBackInEveryDtype) {
  ::kiln::testing::ScratchDir dir;
  for (DType dtype : {DType::bool_, DType::u8, DType::i32, DType::i64, DType::u32, DType::f16,
                      DType::f32, DType::f64}) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{}, {3}, {2, 3}, {2, 1, 4}, {0, 5}}) {
      RawArray array;
      array.dtype = dtype;
      array.shape = shape;
      int64_t count = 1;
      for (int64_t dim : shape) count *= dim;
      array.bytes.resize(static_cast<size_t>(count * dtype_size(dtype)));
      for (size_t i = 0; i < array.bytes.size(); ++i) array.bytes[i] = static_cast<uint8_t>(i % 2);
      std::filesystem::path path = dir / "out.npy";
      write_npy(path, array);
      RawArray back = read_npy(path);
      EXPECT_EQ(back.dtype, dtype) << dtype_name(dtype);
      EXPECT_EQ(back.shape, shape) << dtype_name(dtype);
      EXPECT_EQ(back.bytes, array.bytes) << dtype_name(dtype);
      EXPECT_EQ(std::filesystem::file_size(path) % 64, array.bytes.size() % 64)
          << "the header ends on a multiple of 64 bytes";
    }
  }
  RawArray bf16;
  bf16.dtype = DType::bf16;
  bf16.shape = {1};
  bf16.bytes.resize(2);
  EXPECT_TRUE(::kiln::testing::fails_with([&] { write_npy(dir / "bf16.npy", bf16); },
                                          {"NumPy has no dtype for bf16"}));
}

}  // namespace
}  // namespace kiln::data
