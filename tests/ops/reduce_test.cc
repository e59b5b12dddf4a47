// Tests of the user-facing reductions and scans (src/ops/reduce.cc) through the eager
// runtime, and of the reduce primitives' abstract-evaluation rules
// (src/prims/reduce_rules.cc): every bad input fails with an error naming the op, the
// types and the call site.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ops.h"
#include "ops/rule_errors.h"
#include "prims/bind.h"
#include "prims/ids/reduce.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::counting;
using ::kiln::testing::rule_fails;

using ::kiln::testing::floats;

using testing::error_of;
using testing::fails_with;

// 0, 1, 2, ... as f32 in `shape`.

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ----- sum, prod ------------------------------------------------------------------------

TEST(Sum, ReducesAllAxesOrTheGivenOnes) {
  Array x = counting({2, 3});  // [[0 1 2] [3 4 5]]
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(sum(x).item<float>(), 15.0f);
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum(x, {1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum(x, {-1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum(x, {1, 0}).item<float>(), 15.0f);
  EXPECT_EQ(x.sum().item<float>(), 15.0f);
  EXPECT_EQ(x.sum({0}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
}

TEST(Sum, KeepdimsLeavesSizeOneAxes) {
  Array x = counting({2, 3, 4});
  Array y = sum(x, {0, 2}, true);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(sum(x, {}, true).shape(), (Shape{1, 1, 1}));
}

TEST(Sum, DTypesAndEdgeCases) {
  Array flags = from_host<bool>({true, false, true, true}, {4});
  Array count = sum(flags);
  EXPECT_EQ(count.dtype(), DType::i32);
  EXPECT_EQ(count.item<int>(), 3);
  // Integers wrap in their own width, as in XLA.
  Array bytes = from_host<uint8_t>({200, 100}, {2});
  EXPECT_EQ(sum(bytes).dtype(), DType::u8);
  EXPECT_EQ(sum(bytes).item<int>(), 44);
  // A rank-0 array reduces to itself; an empty reduction gives 0.
  EXPECT_EQ(sum(scalar(2.5)).item<float>(), 2.5f);
  EXPECT_EQ(sum(floats({}, {0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(sum(floats({1, kNaN}, {2})).item<float>()));
}

TEST(Prod, MultipliesAndCountsBoolInI32) {
  Array x = counting({2, 3});
  EXPECT_EQ(prod(x, {1}).to_vector<float>(), (std::vector<float>{0, 60}));
  EXPECT_EQ(prod(floats({}, {0})).item<float>(), 1.0f);
  EXPECT_EQ(prod(from_host<bool>({true, true}, {2})).dtype(), DType::i32);
}

TEST(Sum, RejectsBadAxes) {
  Array x = counting({2, 3});
  EXPECT_TRUE(
      fails_with([&] { sum(x, {2}); },
                 {"sum: axis 2 is out of range for an array of rank 2", "HINT", "reduce_test.cc"}));
  EXPECT_TRUE(fails_with([&] { sum(x, {-3}); }, {"sum: axis -3 is out of range"}));
  EXPECT_TRUE(fails_with([&] { max(x, {1, -1}); }, {"max: axis 1 is listed twice"}));
  EXPECT_TRUE(fails_with([&] { sum(scalar(1.0), {0}); }, {"rank-0"}));
  EXPECT_TRUE(fails_with([&] { sum(Array()); }, {"sum", "empty Array"}));
}

// ----- mean -----------------------------------------------------------------------------

TEST(Mean, AveragesWithNumpyDTypes) {
  Array x = counting({2, 3});
  EXPECT_EQ(mean(x).item<float>(), 2.5f);
  EXPECT_EQ(mean(x, {0}).to_vector<float>(), (std::vector<float>{1.5, 2.5, 3.5}));
  EXPECT_EQ(mean(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(x.mean().item<float>(), 2.5f);
  Array ints = from_host<int32_t>({1, 2}, {2});
  EXPECT_EQ(mean(ints).dtype(), DType::f32);
  EXPECT_EQ(mean(ints).item<float>(), 1.5f);
  EXPECT_EQ(mean(from_host<bool>({true, false, false, false}, {4})).item<float>(), 0.25f);
  Array doubles = from_host<double>({1, 2, 4}, {3});
  EXPECT_EQ(mean(doubles).dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(mean(doubles).item<double>(), 7.0 / 3.0);
}

TEST(Mean, SixteenBitFloatsSumInF32) {
  // 4 x 60000 overflows f16 (max 65504) but the mean does not.
  Array x = astype(floats({60000, 60000, 60000, 60000}, {4}), DType::f16);
  Array m = mean(x);
  EXPECT_EQ(m.dtype(), DType::f16);
  EXPECT_EQ(m.item<float>(), 60000.0f);
}

TEST(Mean, OfAnEmptyReductionIsNaN) {
  EXPECT_TRUE(std::isnan(mean(floats({}, {0})).item<float>()));
  Array m = mean(floats({}, {2, 0}), {1});
  EXPECT_EQ(m.shape(), Shape{2});
  for (float v : m.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
}

// ----- max, min -------------------------------------------------------------------------

TEST(MaxMin, PropagateNaNAndGiveTheIdentityWhenEmpty) {
  Array x = floats({3, -1, 7, 2, kNaN, 0}, {2, 3});
  std::vector<float> rows = max(x, {1}).to_vector<float>();
  EXPECT_EQ(rows[0], 7.0f);
  EXPECT_TRUE(std::isnan(rows[1]));
  EXPECT_EQ(min(x, {1}).to_vector<float>()[0], -1.0f);
  EXPECT_EQ(max(floats({}, {0})).item<float>(), -kInf);
  EXPECT_EQ(min(floats({}, {0})).item<float>(), kInf);
  EXPECT_EQ(max(from_host<int32_t>({}, {0})).item<int64_t>(), INT32_MIN);
  EXPECT_EQ(max(x, {0}, true).shape(), (Shape{1, 3}));
}

TEST(MaxMin, AcceptBool) {
  Array flags = from_host<bool>({false, true, false}, {3});
  EXPECT_EQ(max(flags).dtype(), DType::bool_);
  EXPECT_TRUE(max(flags).item<bool>());
  EXPECT_FALSE(min(flags).item<bool>());
}

// ----- argmax, argmin -------------------------------------------------------------------

TEST(ArgMax, FirstOccurrenceWinsAndNaNCountsAsTheExtreme) {
  Array x = floats({1, 5, 5, 0, kNaN, 2, kNaN, 9}, {2, 4});
  EXPECT_EQ(argmax(x, 1).to_vector<int32_t>(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(argmin(x, 1).to_vector<int32_t>(), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(argmax(x, -1).to_vector<int32_t>(), (std::vector<int32_t>{1, 0}));
  Array y = floats({2, 1, 3, 3, kNaN, 4}, {3, 2});
  EXPECT_EQ(argmax(y, 0, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(argmax(y, 0, DType::i64).dtype(), DType::i64);
  EXPECT_EQ(argmin(from_host<int32_t>({4, -2, -2}, {3}), 0).item<int>(), 1);
}

TEST(ArgMax, RejectsEmptyAxesAndBadParams) {
  Array empty = floats({}, {2, 0});
  EXPECT_TRUE(fails_with([&] { argmax(empty, 1); },
                         {"argmax: axis 1 of f32[2,0] has size 0", "reduce_test.cc"}));
  EXPECT_TRUE(fails_with([&] { argmin(empty, -1); }, {"argmin", "size 0"}));
  // Reducing the other axis is fine: there is a row of 2 for each of 0 columns.
  EXPECT_EQ(argmax(empty, 0).shape(), Shape{0});
  EXPECT_TRUE(fails_with([&] { argmax(counting({3}), 1); }, {"argmax: axis 1 is out of range"}));
  EXPECT_TRUE(fails_with([&] { argmax(counting({3}), 0, DType::f32); },
                         {"argmax: index_dtype must be i32 or i64, got f32"}));
  EXPECT_TRUE(fails_with([&] { argmax(scalar(1.0), 0); }, {"rank-0"}));
}

// ----- cumsum ---------------------------------------------------------------------------

TEST(Cumsum, ScansForwardOrBackward) {
  Array x = counting({2, 3});
  EXPECT_EQ(cumsum(x, 1).to_vector<float>(), (std::vector<float>{0, 1, 3, 3, 7, 12}));
  EXPECT_EQ(cumsum(x, 0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 5, 7}));
  EXPECT_EQ(cumsum(x, -1, true).to_vector<float>(), (std::vector<float>{3, 3, 2, 12, 9, 5}));
  Array flags = from_host<bool>({true, false, true}, {3});
  EXPECT_EQ(cumsum(flags, 0).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 2}));
  EXPECT_TRUE(fails_with([&] { cumsum(x, 2); }, {"cumsum: axis 2 is out of range"}));
}

// ----- primitive rules ------------------------------------------------------------------

TEST(ReduceRules, RejectBadAxesAndDTypes) {
  AbstractValue x{Shape{2, 3, 4}, DType::f32};
  EXPECT_TRUE(rule_fails(prim::reduce_sum, {x}, ReduceParams{{2, 1}},
                         {"reduce_sum: axes [2,1] must be sorted and unique"}));
  EXPECT_TRUE(rule_fails(prim::reduce_max, {x}, ReduceParams{{1, 1}}, {"sorted and unique"}));
  EXPECT_TRUE(rule_fails(prim::reduce_min, {x}, ReduceParams{{-1}},
                         {"reduce_min: axis -1 is out of range", "normalised"}));
  EXPECT_TRUE(rule_fails(prim::reduce_prod, {x}, ReduceParams{{3}}, {"axis 3 is out of range"}));
  AbstractValue flags{Shape{3}, DType::bool_};
  EXPECT_TRUE(rule_fails(prim::reduce_sum, {flags}, ReduceParams{{0}},
                         {"reduce_sum: does not accept bool operands, got bool[3]", "HINT"}));
  EXPECT_TRUE(rule_fails(prim::reduce_prod, {flags}, ReduceParams{{0}}, {"bool"}));
  EXPECT_TRUE(rule_fails(prim::cumsum, {flags}, CumsumParams{0, false}, {"cumsum", "bool"}));
  EXPECT_TRUE(rule_fails(prim::cumsum, {x}, CumsumParams{3, false}, {"cumsum: axis 3"}));
  EXPECT_TRUE(rule_fails(prim::argmax, {x}, ArgReduceParams{-1, DType::i32},
                         {"argmax: axis -1 is out of range"}));
  EXPECT_TRUE(rule_fails(prim::argmin, {x}, ArgReduceParams{0, DType::u8},
                         {"argmin: index_dtype must be i32 or i64, got u8"}));
  EXPECT_TRUE(rule_fails(prim::argmax, {AbstractValue{Shape{0, 2}, DType::f32}},
                         ArgReduceParams{0, DType::i32},
                         {"argmax: cannot take the maximum of an empty axis"}));
  EXPECT_TRUE(rule_fails(prim::reduce_sum, {x, x}, ReduceParams{{0}}, {"expects 1 operand"}));
}

TEST(ReduceRules, ComputeOutputTypes) {
  AbstractValue x{Shape{2, 3, 4}, DType::bf16};
  std::vector<AbstractValue> in{x};
  auto out = abstract_eval(prim::reduce_sum, in, ReduceParams{{0, 2}}, CallSite());
  EXPECT_EQ(out[0], (AbstractValue{Shape{3}, DType::bf16}));
  out = abstract_eval(prim::reduce_max, in, ReduceParams{{}}, CallSite());
  EXPECT_EQ(out[0], x);
  out = abstract_eval(prim::argmin, in, ArgReduceParams{1, DType::i64}, CallSite());
  EXPECT_EQ(out[0], (AbstractValue{Shape{2, 4}, DType::i64}));
  out = abstract_eval(prim::cumsum, in, CumsumParams{2, true}, CallSite());
  EXPECT_EQ(out[0], x);
}

}  // namespace
}  // namespace kiln
