// The bit-level, special-function and sorting ops end to end (shifts, bitcast_convert_type,
// erf, erf_inv, sort, sort_key_val, argsort) and the errors their rules raise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/ids/random.h"
#include "prims/ids/sort.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::fails_with;

TEST(ShiftOps, FollowXlaForLargeAndNegativeAmounts) {
  Array x = from_host<int32_t>({-8, 8, -8, 8, 1, -1}, {6});
  Array amount = from_host<int32_t>({1, 1, 32, 40, -1, 31}, {6});
  EXPECT_EQ(shift_left(x, amount).to_vector<int32_t>(),
            (std::vector<int32_t>{-16, 16, 0, 0, 0, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(shift_right_logical(x, amount).to_vector<int32_t>(),
            (std::vector<int32_t>{0x7ffffffc, 4, 0, 0, 0, 1}));
  EXPECT_EQ(shift_right_arithmetic(x, amount).to_vector<int32_t>(),
            (std::vector<int32_t>{-4, 4, -1, 0, 0, -1}));
  Array u = from_host<uint8_t>({0x81, 0x81, 0x81}, {3});
  Array by = from_host<uint8_t>({1, 7, 8}, {3});
  EXPECT_EQ(shift_right_arithmetic(u, by).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0xc0, 0xff, 0xff}));
  EXPECT_EQ(shift_left(u, by).to_vector<uint8_t>(), (std::vector<uint8_t>{0x02, 0x80, 0}));
  // Broadcasting and weak scalars, like any binary op.
  Array bits = from_host<uint32_t>({0xf0000000u, 1u}, {2});
  EXPECT_EQ(shift_right_logical(bits, scalar(28, DType::u32)).to_vector<uint32_t>(),
            (std::vector<uint32_t>{15, 0}));
}

TEST(ShiftOps, RejectFloatsAndBool) {
  Array f = from_host<float>({1, 2}, {2});
  EXPECT_TRUE(
      fails_with([&] { shift_left(f, f); },
                 {"shift_left: needs integer operands, got f32[2]", "bitcast_convert_type"}));
  Array b = from_host<bool>({true}, {1});
  EXPECT_TRUE(fails_with([&] { shift_right_logical(b, b); }, {"shift_right_logical", "bool[1]"}));
  Array i = from_host<int32_t>({1, 2, 3}, {3});
  EXPECT_TRUE(fails_with(
      [&] {
        shift_left(i, from_host<int32_t>({1, 2}, {2}));
      },
      {"shift_left", "cannot be broadcast"}));
}

TEST(BitcastOps, ReinterpretBitsOfTheSameWidth) {
  EXPECT_EQ(bitcast_convert_type(scalar(1.0), DType::u32).item<uint32_t>(), 0x3f800000u);
  EXPECT_EQ(bitcast_convert_type(scalar(-2.0, DType::f64), DType::i64).item<int64_t>(),
            std::bit_cast<int64_t>(-2.0));
  Array u = from_host<uint32_t>({0x40490fdbu, 0xffffffffu}, {2});
  std::vector<float> f = bitcast_convert_type(u, DType::f32).to_vector<float>();
  EXPECT_EQ(f[0], std::bit_cast<float>(0x40490fdbu));
  EXPECT_TRUE(std::isnan(f[1]));
  EXPECT_EQ(bitcast_convert_type(u, DType::i32).to_vector<int32_t>()[1], -1);
  Array h = bitcast_convert_type(astype(scalar(1.0), DType::f16), DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  // Round trips keep NaN payloads (the bytes are shared, not converted).
  Array back = bitcast_convert_type(bitcast_convert_type(u, DType::f32), DType::u32);
  EXPECT_EQ(back.to_vector<uint32_t>(), u.to_vector<uint32_t>());
}

TEST(BitcastOps, RejectDifferentWidthsAndBool) {
  Array f = from_host<float>({1, 2}, {2});
  EXPECT_TRUE(fails_with([&] { bitcast_convert_type(f, DType::f64); },
                         {"bitcast_convert_type: cannot reinterpret f32[2] (32 bits) as f64 (64 "
                          "bits)",
                          "HINT", "astype"}));
  EXPECT_TRUE(fails_with([&] { bitcast_convert_type(f, DType::u8); }, {"widths differ"}));
  Array u8 = from_host<uint8_t>({1}, {1});
  EXPECT_TRUE(fails_with([&] { bitcast_convert_type(u8, DType::bool_); }, {"bool"}));
}

TEST(SpecialOps, ErfAndErfInv) {
  Array x = from_host<double>({0.0, 0.5, -1.0, 1.0, 2.0, NAN}, {6});
  std::vector<double> y = erf_inv(x).to_vector<double>();
  EXPECT_EQ(y[0], 0.0);
  EXPECT_NEAR(y[1], 0.47693627620446987338, 1e-16);
  EXPECT_EQ(y[2], -INFINITY);
  EXPECT_EQ(y[3], INFINITY);
  EXPECT_TRUE(std::isnan(y[4]) && std::isnan(y[5]));
  std::vector<double> e = erf(from_host<double>({0.5, -3.0}, {2})).to_vector<double>();
  EXPECT_NEAR(e[0], 0.52049987781304653768, 1e-16);
  EXPECT_NEAR(e[1], -0.99997790950300141456, 1e-16);
  EXPECT_TRUE(fails_with([&] { erf_inv(from_host<int32_t>({1}, {1})); },
                         {"erf_inv: expects a floating-point operand, got i32[1]"}));
  EXPECT_TRUE(fails_with([&] { erf(from_host<uint32_t>({1}, {1})); }, {"erf:", "u32[1]"}));
}

TEST(SortOps, SortIsStableWithNaNLast) {
  Array x = from_host<float>({3, NAN, -0.0f, 1, 0.0f, -INFINITY}, {6});
  std::vector<float> sorted = sort(x).to_vector<float>();
  EXPECT_EQ(sorted[0], -INFINITY);
  EXPECT_TRUE(std::signbit(sorted[1]) && sorted[1] == 0);  // -0 stays before 0 (stable)
  EXPECT_TRUE(!std::signbit(sorted[2]) && sorted[2] == 0);
  EXPECT_EQ(sorted[3], 1);
  EXPECT_EQ(sorted[4], 3);
  EXPECT_TRUE(std::isnan(sorted[5]));
  EXPECT_EQ(argsort(x).to_vector<int32_t>(), (std::vector<int32_t>{5, 2, 4, 3, 0, 1}));
  Array keys = from_host<uint32_t>({2, 1, 2, 1}, {4});
  Array values = from_host<float>({10, 20, 30, 40}, {4});
  auto [k, v] = sort_key_val(keys, values);
  EXPECT_EQ(k.to_vector<uint32_t>(), (std::vector<uint32_t>{1, 1, 2, 2}));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{20, 40, 10, 30}));
  Array m = from_host<int32_t>({3, 1, 2, 9, 8, 7}, {2, 3});
  EXPECT_EQ(sort(m, 0).to_vector<int32_t>(), (std::vector<int32_t>{3, 1, 2, 9, 8, 7}));
  EXPECT_EQ(sort(m, 1).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 7, 8, 9}));
  // Two keys: the second breaks ties of the first.
  Array a = from_host<int32_t>({1, 0, 1, 0}, {4});
  Array b = from_host<int32_t>({5, 6, 4, 3}, {4});
  Array operands[] = {a, b, values};
  std::vector<Array> by_two = sort(operands, -1, 2);
  EXPECT_EQ(by_two[2].to_vector<float>(), (std::vector<float>{40, 20, 30, 10}));
}

TEST(SortOps, Errors) {
  Array x = from_host<float>({1, 2, 3}, {3});
  Array y = from_host<float>({1, 2}, {2});
  Array pair[] = {x, y};
  EXPECT_TRUE(fails_with([&] { sort(pair, 0); },
                         {"sort: operands must have one shape, got f32[3], f32[2]", "HINT"}));
  EXPECT_TRUE(fails_with([&] { sort(scalar(1.0)); }, {"sort: cannot sort a rank-0 array"}));
  EXPECT_TRUE(fails_with([&] { sort(x, 1); }, {"sort: axis 1 is out of range"}));
  Array same[] = {x, x};
  EXPECT_TRUE(fails_with([&] { sort(same, 0, 3); }, {"sort: num_keys is 3 but there are 2"}));
  EXPECT_TRUE(fails_with([&] { sort(std::span<const Array>(), 0); }, {"at least one operand"}));
  EXPECT_TRUE(fails_with([&] { argsort(x, 0, DType::f32); }, {"argsort", "integer"}));
  // The primitive's own checks (what a transformation would bind).
  AbstractValue f32_3{Shape{3}, DType::f32};
  AbstractValue scalar_f32{Shape{}, DType::f32};
  EXPECT_TRUE(fails_with(
      [&] {
        abstract_eval(prim::sort, std::span<const AbstractValue>(&scalar_f32, 1), SortParams{0, 1},
                      CallSite());
      },
      {"sort: cannot sort a rank-0 array"}));
  EXPECT_TRUE(fails_with(
      [&] {
        abstract_eval(prim::sort, std::span<const AbstractValue>(&f32_3, 1), SortParams{0, 0},
                      CallSite());
      },
      {"num_keys is 0"}));
  EXPECT_TRUE(fails_with(
      [&] {
        abstract_eval(prim::sort, std::span<const AbstractValue>(), SortParams{0, 1}, CallSite());
      },
      {"sort: needs at least one operand"}));
  AbstractValue u32_3{Shape{3}, DType::u32}, u32_3x1{Shape{3, 1}, DType::u32};
  AbstractValue mixed[] = {u32_3, u32_3, u32_3x1, u32_3};
  EXPECT_TRUE(fails_with([&] { abstract_eval(prim::threefry2x32, mixed, NoParams{}, CallSite()); },
                         {"threefry2x32: operands must have equal rank (or rank 0)"}));
}

}  // namespace
}  // namespace kiln
