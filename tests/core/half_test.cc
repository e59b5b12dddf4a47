// Bit-exact checks of the f32 -> f16/bf16 conversions against fixtures computed by an
// independent exact-arithmetic implementation (tests/tools/make_half_fixtures.py, itself
// cross-checked against numpy for f16), plus the special values and round trips.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "kiln/dtype.h"
#include "support/source_tree.h"

namespace kiln {
namespace {

TEST(Half, MatchesExactRoundingFixtures) {
  std::ifstream in(kiln::testing::source_dir() / "tests/core/half_fixtures.txt");
  ASSERT_TRUE(in.good()) << "missing tests/core/half_fixtures.txt";
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    uint32_t f32_bits = 0, f16_bits = 0, bf16_bits = 0;
    fields >> std::hex >> f32_bits >> f16_bits >> bf16_bits;
    float value = std::bit_cast<float>(f32_bits);
    EXPECT_EQ(f16::from_float(value).bits, f16_bits) << std::hex << "f32 bits " << f32_bits;
    EXPECT_EQ(bf16::from_float(value).bits, bf16_bits) << std::hex << "f32 bits " << f32_bits;
    ++checked;
  }
  EXPECT_GT(checked, 3000);
}

TEST(Half, InfinityAndNaN) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f16::from_float(inf).bits, 0x7c00);
  EXPECT_EQ(f16::from_float(-inf).bits, 0xfc00);
  EXPECT_EQ(bf16::from_float(inf).bits, 0x7f80);
  EXPECT_EQ(bf16::from_float(-inf).bits, 0xff80);
  // NaN stays NaN, quiet, with its sign, even when its payload sits only in low bits that
  // the narrowing drops (a plain shift would turn it into infinity).
  for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u}) {
    float nan = std::bit_cast<float>(nan_bits);
    EXPECT_TRUE(std::isnan(f16::from_float(nan).to_float())) << std::hex << nan_bits;
    EXPECT_TRUE(std::isnan(bf16::from_float(nan).to_float())) << std::hex << nan_bits;
    EXPECT_EQ(f16::from_float(nan).bits >> 15, nan_bits >> 31);
    EXPECT_EQ(bf16::from_float(nan).bits >> 15, nan_bits >> 31);
  }
}

TEST(Half, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    f16 h = f16::from_bits(static_cast<uint16_t>(bits));
    bf16 b = bf16::from_bits(static_cast<uint16_t>(bits));
    float hf = h.to_float(), bfv = b.to_float();
    if (std::isnan(hf)) {
      EXPECT_TRUE(std::isnan(f16::from_float(hf).to_float()));
    } else {
      EXPECT_EQ(f16::from_float(hf).bits, bits) << std::hex << bits;
    }
    if (std::isnan(bfv)) {
      EXPECT_TRUE(std::isnan(bf16::from_float(bfv).to_float()));
    } else {
      EXPECT_EQ(bf16::from_float(bfv).bits, bits) << std::hex << bits;
    }
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(f16::from_float(1.0f).bits, 0x3c00);
  EXPECT_EQ(f16::from_float(65504.0f).bits, 0x7bff);
  EXPECT_EQ(f16::from_float(65520.0f).bits, 0x7c00);  // ties to even rounds up to infinity
  EXPECT_EQ(f16::from_float(0x1p-24f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(f16::from_float(0x1p-25f).bits, 0x0000);  // tie with zero rounds to even (zero)
  EXPECT_EQ(f16::from_bits(0x0001).to_float(), 0x1p-24f);
  EXPECT_EQ(bf16::from_float(1.0f + 0x1p-8f).bits, 0x3f80);  // tie rounds to even
  EXPECT_EQ(bf16::from_float(1.0f + 3 * 0x1p-8f).bits, 0x3f82);
  EXPECT_EQ(bf16::from_float(std::numeric_limits<float>::max()).bits, 0x7f80);
}

}  // namespace
}  // namespace kiln
