// Operators between an array and a C++ number of any arithmetic type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kiln/ops.h"
#include "support/errors.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ScalarOperators, EveryArithmeticTypeStandsBesideAnArray) {
  Array x = from_host<float>({1, 2, 3}, {3});
  int64_t n64 = 2;
  size_t size = 3;
  uint8_t small = 4;
  unsigned u = 5;
  short s = 6;
  float f = 0.5f;
  long double ld = 2.0L;
  EXPECT_THAT((x * n64).to_vector<float>(), ElementsAre(2, 4, 6));
  EXPECT_THAT((x + size).to_vector<float>(), ElementsAre(4, 5, 6));
  EXPECT_THAT((small - x).to_vector<float>(), ElementsAre(3, 2, 1));
  EXPECT_THAT((x * u).to_vector<float>(), ElementsAre(5, 10, 15));
  EXPECT_THAT((s / x).to_vector<float>(), ElementsAre(6, 3, 2));
  EXPECT_THAT((x * f).to_vector<float>(), ElementsAre(0.5, 1, 1.5));
  EXPECT_THAT((x / ld).to_vector<float>(), ElementsAre(0.5, 1, 1.5));
  EXPECT_THAT((x > n64).to_vector<bool>(), ElementsAre(false, false, true));
}

TEST(ScalarOperators, NumbersAreWeaklyTyped) {
  Array bf = from_host<float>({1, 2}, {2}).astype(DType::bf16);
  EXPECT_EQ((bf * int64_t{3}).dtype(), DType::bf16);
  EXPECT_EQ((size_t{3} * bf).dtype(), DType::bf16);
  EXPECT_EQ((bf * 0.5f).dtype(), DType::bf16);
  Array u8 = from_host<uint8_t>({1, 2}, {2});
  EXPECT_EQ((u8 + int64_t{1}).dtype(), DType::u8);
  // A floating-point number beside integers promotes them, as in JAX.
  EXPECT_EQ((u8 * 0.5).dtype(), DType::f32);
}

TEST(ScalarOperators, IntegersBeyondWhatADoubleHoldsAreAnError) {
  Array x = from_host<int64_t>({1}, {1});
  int64_t big = (int64_t{1} << 53) + 1;
  std::string text = testing::error_of([&] { (void)(x + big); });
  EXPECT_THAT(text, HasSubstr("operator+: the integer beside the array is 9007199254740992"));
  EXPECT_THAT(text, HasSubstr("2^53"));
  EXPECT_THAT(testing::error_of([&] { (void)(std::numeric_limits<uint64_t>::max() * x); }),
              HasSubstr("operator*"));
  // 2^53 itself, and the extreme int64 -2^63, are exact.
  EXPECT_EQ((x * (int64_t{1} << 53)).to_vector<int64_t>()[0], int64_t{1} << 53);
  EXPECT_NO_THROW((void)(x + std::numeric_limits<int64_t>::min()));
}

TEST(StackAndConcatenate, TakeTheSameArguments) {
  Array a = from_host<float>({1, 2}, {2}), b = from_host<float>({3, 4}, {2});
  EXPECT_THAT(stack({a, b}).to_vector<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(stack({a, b}, 1).shape(), (Shape{2, 2}));
  EXPECT_EQ(concatenate({a, b}).shape(), (Shape{4}));
}

}  // namespace
}  // namespace kiln
