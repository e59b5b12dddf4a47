// Tests of the creation ops (src/ops/creation.cc): full/zeros/ones and their *_like forms,
// iota, arange and linspace with numpy's conventions, and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::fails_with;

TEST(Full, FillsAnyShapeAndDtype) {
  Array x = full({2, 3}, 2.5);
  EXPECT_EQ(x.aval(), (AbstractValue{Shape{2, 3}, DType::f32}));
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(6, 2.5f));
  EXPECT_EQ(full({}, 7, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{7}));
  EXPECT_EQ(full({0, 4}, 1).size(), 0);
  EXPECT_EQ(zeros({3}, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(ones({2}, DType::u8).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(ones({2}, DType::bool_).to_vector<bool>(), (std::vector<bool>{true, true}));
  Array h = ones({2}, DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.astype(DType::f32).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(full({2}, 1, DType::f32, &default_device()).device().id(), default_device().id());
}

TEST(Full, RejectsNegativeSizes) {
  EXPECT_TRUE(fails_with([] { full({2, -1}, 0); }, {"full:", "[2,-1]", "HINT:"}));
  EXPECT_TRUE(fails_with([] { zeros({-1}); }, {"zeros:", "negative"}));
  EXPECT_TRUE(fails_with([] { ones({-1}); }, {"ones:", "negative"}));
  EXPECT_TRUE(fails_with([] { zeros({int64_t{1} << 40, int64_t{1} << 40}); }, {"zeros:", "int64"}));
  EXPECT_TRUE(fails_with([] { zeros({0, int64_t{1} << 40, int64_t{1} << 40}); }, {"zeros:"}));
}

TEST(FullLike, KeepsShapeDtypeAndWeakType) {
  Array x = from_host<int32_t>({1, 2, 3, 4}, {2, 2});
  Array z = zeros_like(x);
  EXPECT_EQ(z.aval(), x.aval());
  EXPECT_EQ(z.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(ones_like(x).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1, 1}));
  float two = 2;
  Array weak = from_host_bytes(&two, AbstractValue{Shape{}, DType::f32, true}, nullptr, {});
  EXPECT_TRUE(weak.weak_type());
  EXPECT_TRUE(ones_like(weak).weak_type());
  EXPECT_EQ(ones_like(weak).item<float>(), 1.0f);
  EXPECT_TRUE(fails_with([] { zeros_like(Array()); }, {"zeros_like:"}));
}

TEST(Iota, CountsAlongOneAxis) {
  EXPECT_EQ(iota({4}, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(iota({2, 3}, DType::f32, 1).to_vector<float>(), (std::vector<float>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(iota({2, 3}, DType::i64, -2).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(iota({0}, DType::u8).size(), 0);
  EXPECT_TRUE(fails_with([] { iota({3}, DType::i32, 1); }, {"iota:", "axis 1", "HINT:"}));
  EXPECT_TRUE(fails_with([] { iota({}, DType::i32); }, {"iota:", "HINT:"}));
  EXPECT_TRUE(fails_with([] { iota({3}, DType::bool_); }, {"iota:", "bool", "HINT:"}));
  EXPECT_TRUE(fails_with([] { iota({-3}, DType::i32); }, {"iota:", "negative"}));
}

TEST(Arange, FollowsNumpy) {
  EXPECT_EQ(arange(5).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(int64_t{-3}).size(), 0);
  EXPECT_EQ(arange(3, DType::f32).to_vector<float>(), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(arange(2.0, 8.0, 3.0).to_vector<int32_t>(), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(arange(5.0, 1.0, -1.0).to_vector<int32_t>(), (std::vector<int32_t>{5, 4, 3, 2}));
  EXPECT_EQ(arange(3.0, 1.0).size(), 0);
  EXPECT_EQ(arange(0.0, 1.0, 0.25, DType::f32).to_vector<float>(),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  // ceil((stop - start) / step) values: 1.0 is not reached.
  EXPECT_EQ(arange(0.0, 1.0, 0.3, DType::f64).to_vector<double>(),
            (std::vector<double>{0, 0.3, 0.6, 0.3 * 3}));
  EXPECT_EQ(arange(-1.0, 1.0, 0.5, DType::i64).dtype(), DType::i64);
}

TEST(Arange, RejectsZeroStepAndNonFiniteBounds) {
  EXPECT_TRUE(fails_with([] { arange(0.0, 1.0, 0.0); }, {"arange:", "step", "HINT:"}));
  EXPECT_TRUE(fails_with([] { arange(0.0, INFINITY, 1.0); }, {"arange:", "finite"}));
  EXPECT_TRUE(fails_with([] { arange(NAN, 1.0, 1.0); }, {"arange:", "finite"}));
  EXPECT_TRUE(fails_with([] { arange(5, DType::bool_); }, {"arange:", "bool", "HINT:"}));
  EXPECT_TRUE(fails_with([] { arange(0.0, 1e300, 1e-300); }, {"arange:", "values"}));
}

TEST(Linspace, IncludesBothEndsExactly) {
  EXPECT_EQ(linspace(0, 1, 5).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(linspace(0, 1, 1).to_vector<float>(), (std::vector<float>{0}));
  EXPECT_EQ(linspace(0, 1, 0).shape(), (Shape{0}));
  EXPECT_EQ(linspace(1, 0, 3, DType::f64).to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
  EXPECT_EQ(linspace(2, 2, 3).to_vector<float>(), (std::vector<float>{2, 2, 2}));
  // numpy: start + i * step, then the last value set to stop.
  std::vector<double> values = linspace(0.1, 0.7, 7, DType::f64).to_vector<double>();
  ASSERT_EQ(values.size(), 7u);
  double step = (0.7 - 0.1) / 6;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    EXPECT_EQ(values[i], static_cast<double>(i) * step + 0.1) << i;
  }
  EXPECT_EQ(values.back(), 0.7);
  EXPECT_EQ(linspace(0, 10, 4, DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 3, 6, 10}));
}

TEST(Linspace, RejectsNegativeCounts) {
  EXPECT_TRUE(fails_with([] { linspace(0, 1, -1); }, {"linspace:", "num", "-1", "HINT:"}));
}

}  // namespace
}  // namespace kiln
