// finfo and iinfo against the formats' bit patterns and std::numeric_limits, their bad
// arguments, and (DTypeInfo.MatchesJax) against jnp.finfo / jnp.iinfo.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "kiln/dtype_info.h"
#include "support/peer_check.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

template <typename T>
void expect_matches_numeric_limits(DType dtype) {
  const FloatInfo info = finfo(dtype);
  using Limits = std::numeric_limits<T>;
  EXPECT_EQ(info.bits, static_cast<int>(sizeof(T) * 8));
  EXPECT_EQ(info.nmant, Limits::digits - 1);
  EXPECT_EQ(info.eps, Limits::epsilon());
  EXPECT_EQ(info.max, Limits::max());
  EXPECT_EQ(info.min, Limits::lowest());
  EXPECT_EQ(info.tiny, Limits::min());
  EXPECT_EQ(info.smallest_subnormal, Limits::denorm_min());
  EXPECT_EQ(info.maxexp, Limits::max_exponent);
  EXPECT_EQ(info.minexp, Limits::min_exponent - 1);
  EXPECT_EQ(info.precision, Limits::digits10);
  // epsneg: 1 minus the next value below 1.
  EXPECT_EQ(info.epsneg, T{1} - std::nextafter(T{1}, T{0}));
}

TEST(DTypeInfo, F32AndF64AreTheCxxLimits) {
  expect_matches_numeric_limits<float>(DType::f32);
  expect_matches_numeric_limits<double>(DType::f64);
}

// The 16-bit formats from their bit patterns, decoded by kiln's own conversions.
TEST(DTypeInfo, SixteenBitFormatsAreTheirBitPatterns) {
  const FloatInfo half = finfo(DType::f16);
  EXPECT_EQ(half.max, f16::from_bits(0x7bff).to_float());   // largest finite
  EXPECT_EQ(half.tiny, f16::from_bits(0x0400).to_float());  // smallest normal
  EXPECT_EQ(half.smallest_subnormal, f16::from_bits(0x0001).to_float());
  EXPECT_EQ(half.eps, f16::from_bits(0x3c01).to_float() - 1.0);  // next after 1
  EXPECT_EQ(half.epsneg, 1.0 - f16::from_bits(0x3bff).to_float());
  EXPECT_EQ(half.max, 65504.0);
  EXPECT_EQ(half.precision, 3);
  EXPECT_EQ(half.resolution, f16::from_float(1e-3f).to_float());

  const FloatInfo brain = finfo(DType::bf16);
  EXPECT_EQ(brain.max, bf16::from_bits(0x7f7f).to_float());
  EXPECT_EQ(brain.tiny, bf16::from_bits(0x0080).to_float());
  EXPECT_EQ(brain.smallest_subnormal, bf16::from_bits(0x0001).to_float());
  EXPECT_EQ(brain.eps, bf16::from_bits(0x3f81).to_float() - 1.0);
  EXPECT_EQ(brain.epsneg, 1.0 - bf16::from_bits(0x3f7f).to_float());
  EXPECT_EQ(brain.tiny, finfo(DType::f32).tiny);  // float32's exponent range
  EXPECT_EQ(brain.bits, 16);
  EXPECT_EQ(brain.nexp, 8);
  EXPECT_EQ(brain.precision, 2);
}

TEST(DTypeInfo, IntegerRanges) {
  EXPECT_EQ(iinfo(DType::u8).max, 255);
  EXPECT_EQ(iinfo(DType::u8).min, 0);
  EXPECT_EQ(iinfo(DType::u32).max, int64_t{4294967295});
  EXPECT_EQ(iinfo(DType::i32).min, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(iinfo(DType::i64).max, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(iinfo(DType::i64).bits, 64);
}

TEST(DTypeInfo, WrongKindsAreErrorsNamingTheDtype) {
  try {
    finfo(DType::i32);
    FAIL() << "finfo(i32) returned";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), HasSubstr("finfo: i32 is not a floating dtype"));
    EXPECT_THAT(error.hint(), HasSubstr("iinfo"));
  }
  try {
    iinfo(DType::bool_);
    FAIL() << "iinfo(bool) returned";
  } catch (const Error& error) {
    EXPECT_THAT(error.message(), HasSubstr("iinfo: bool is not an integer dtype"));
  }
  EXPECT_THROW(iinfo(DType::f32), Error);
  EXPECT_THROW(finfo(DType::bool_), Error);
}

TEST(DTypeInfo, MatchesJax) {
  nlohmann::json record = nlohmann::json::object();
  for (DType dtype : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    const FloatInfo info = finfo(dtype);
    record["finfo"][std::string(dtype_name(dtype))] = {
        {"bits", info.bits},
        {"nmant", info.nmant},
        {"nexp", info.nexp},
        {"minexp", info.minexp},
        {"maxexp", info.maxexp},
        {"precision", info.precision},
        {"eps", info.eps},
        {"epsneg", info.epsneg},
        {"max", info.max},
        {"min", info.min},
        {"tiny", info.tiny},
        {"resolution", info.resolution},
        {"smallest_subnormal", info.smallest_subnormal}};
  }
  for (DType dtype : {DType::u8, DType::u32, DType::i32, DType::i64}) {
    const IntInfo info = iinfo(dtype);
    record["iinfo"][std::string(dtype_name(dtype))] = {
        {"bits", info.bits}, {"min", info.min}, {"max", info.max}};
  }
  testing::PeerReport report = testing::run_peer_check("dtype_info_check.py", record);
  EXPECT_EQ(report.status, 0) << report.text;
}

}  // namespace
}  // namespace kiln
