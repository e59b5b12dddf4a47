// Shapes whose byte count overflows 64 bits are refused when the op is called, before any
// kernel is queued (a wrapped allocation size once let a kernel write out of bounds).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/errors.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();

TEST(HugeShapes, CreationOfAShapeBeyondA64BitByteCountIsAnError) {
  // 2^62 elements fit an int64 count; their 2^64 bytes of f32 do not.
  std::string text = testing::error_of([] { (void)iota({int64_t{1} << 62}, DType::f32); });
  EXPECT_THAT(text, HasSubstr("iota: the result would be f32[4611686018427387904], more than "
                              "2^63 bytes"));
  EXPECT_THAT(testing::error_of([] {
                (void)zeros({int64_t{1} << 31, int64_t{1} << 31});
              }),
              HasSubstr("more than 2^63 bytes"));
  // Element counts that overflow are caught by the creation ops themselves.
  EXPECT_THAT(testing::error_of([] {
                (void)zeros({3, 3, 1, kHuge});
              }),
              HasSubstr("has more elements than an int64 can count"));
  // An empty axis makes the array empty whatever the others say.
  EXPECT_EQ(zeros({0, kHuge}).size(), 0);
}

TEST(HugeShapes, ALayerWithHugeFeaturesFailsAtInitInsteadOfCrashing) {
  nn::Module conv = nn::Conv2D(kHuge, {3, 3});
  AbstractValue image(Shape{1, 28, 28, 1}, DType::f32);
  std::string text = testing::error_of([&] { (void)conv.init(random::key(0), image); });
  EXPECT_THAT(text, HasSubstr("more than 2^63 bytes"));
  // The device is still usable: nothing was queued after the failed check.
  EXPECT_EQ((ones({2}) + 1.0).to_vector<float>(), (std::vector<float>{2, 2}));
}

}  // namespace
}  // namespace kiln
