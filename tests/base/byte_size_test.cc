// Sizes as people write them: both unit systems, fractions of a unit, and what is not a size.
#include "base/byte_size.h"

#include <gtest/gtest.h>

#include <optional>

namespace kiln {
namespace {

TEST(ByteSize, ReadsBothUnitSystemsAndPlainBytes) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("0"), 0);
  EXPECT_EQ(parse_byte_size("512B"), 512);
  EXPECT_EQ(parse_byte_size("2KiB"), 2048);
  EXPECT_EQ(parse_byte_size("2 GiB"), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size(" 1.5GiB "), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("800MiB"), int64_t{800} << 20);
  EXPECT_EQ(parse_byte_size("1.5 GB"), 1500000000);
  EXPECT_EQ(parse_byte_size("3kB"), 3000);
  EXPECT_EQ(parse_byte_size("3KB"), 3000);
  EXPECT_EQ(parse_byte_size("1TiB"), int64_t{1} << 40);
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* text : {"", " ", "GiB", "abc", "-1", "-1GiB", "1.5", "2 gib", "2mb", "2 GiBs",
                           "1e3", "1..5GiB", "2 Gi B", "9000000TiB", "99999999999999999999"}) {
    EXPECT_EQ(parse_byte_size(text), std::nullopt) << "'" << text << "'";
  }
}

TEST(ByteSize, PrintsInPowersOf1024) {
  EXPECT_EQ(format_byte_size(0), "0 B");
  EXPECT_EQ(format_byte_size(1023), "1023 B");
  EXPECT_EQ(format_byte_size(1536), "1.50 KiB");
  EXPECT_EQ(format_byte_size(int64_t{20} << 20), "20.0 MiB");
  EXPECT_EQ(format_byte_size(int64_t{300} << 20), "300 MiB");
  EXPECT_EQ(format_byte_size(int64_t{2} << 30), "2.00 GiB");
}

}  // namespace
}  // namespace kiln
