// Tests of the user-facing layout ops (src/ops/layout.cc) through the eager runtime, and
// of the layout primitives' abstract-evaluation rules (src/prims/shape_rules*.cc): every
// bad input must fail with an error naming the op and the shapes, with a HINT where a
// common fix exists.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/ops.h"
#include "ops/rule_errors.h"
#include "prims/bind.h"
#include "prims/ids/shape.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::counting;
using ::kiln::testing::rule_fails;

using ::kiln::testing::floats;

using testing::error_of;
using testing::fails_with;

std::vector<float> iota_values(int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i);
  return values;
}

// ----- reshape, transpose ---------------------------------------------------------------

TEST(Reshape, InfersOneSizeAndSharesTheBuffer) {
  Array x = counting({2, 3});
  Array y = reshape(x, {-1, 2});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector<float>(), iota_values(6));
  EXPECT_EQ(reshape(x, {2, 3}).impl(), x.impl());
}

TEST(Reshape, RejectsBadShapes) {
  Array x = counting({2, 3});
  EXPECT_TRUE(fails_with([&] { reshape(x, {-1, -1}); }, {"reshape:", "only one size may be -1"}));
  EXPECT_TRUE(fails_with([&] { reshape(x, {-1, 4}); }, {"reshape:", "f32[2,3]", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { reshape(counting({0, 3}), {-1, 0}); }, {"cannot infer"}));
  EXPECT_TRUE(fails_with([&] { reshape(x, {4, 2}); }, {"reshape:", "f32[2,3]", "[4,2]", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { reshape(x, {-2, 3}); }, {"reshape:", "negative"}));
  EXPECT_TRUE(fails_with([&] { reshape(Array(), {1}); }, {"reshape:", "empty Array"}));
}

TEST(Transpose, ReversesAxesByDefault) {
  Array x = counting({2, 3});
  Array y = transpose(x);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.transpose().to_vector<float>(), y.to_vector<float>());
}

TEST(Transpose, PermutesAnyRankWithNegativeAxes) {
  Array x = counting({2, 3, 4});
  Array y = transpose(x, {-1, 0, 1});  // (2, 0, 1)
  EXPECT_EQ(y.shape(), (Shape{4, 2, 3}));
  std::vector<float> values = y.to_vector<float>();
  for (int64_t k = 0; k < 4; ++k) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(values[static_cast<size_t>((k * 2 + i) * 3 + j)],
                  static_cast<float>((i * 3 + j) * 4 + k));
      }
    }
  }
}

// The fast kernel's vector path for 4-byte elements (kernels/cpu/shape_transpose.cc): bands
// of 16 rows with scalar tails, and streaming stores for outputs of 8 MiB or more whose rows
// are 32-byte aligned. Each case is checked bit for bit against a plain loop, with NaN
// payloads and signed zeros among the values (a transpose moves bits, it never rounds).
void expect_transpose_moves_bits(int64_t rows, int64_t columns) {
  std::vector<uint32_t> bits(static_cast<size_t>(rows * columns));
  for (size_t k = 0; k < bits.size(); ++k) {
    bits[k] = static_cast<uint32_t>(k * 2654435761u);
    if (k % 97 == 0) bits[k] = 0x7fc00000u + static_cast<uint32_t>(k % 1000);  // NaN payloads
    if (k % 89 == 0) bits[k] = 0x80000000u;                                    // -0
  }
  Array x = from_host(bits, Shape{rows, columns});
  std::vector<uint32_t> out = transpose(x).to_vector<uint32_t>();
  ASSERT_EQ(out.size(), bits.size());
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) {
      wrong += out[static_cast<size_t>(c * rows + r)] != bits[static_cast<size_t>(r * columns + c)];
    }
  }
  EXPECT_EQ(wrong, 0) << rows << " x " << columns;
  // The same bits through f32, as the model's tables are.
  Array f = bitcast_convert_type(x, DType::f32);
  std::vector<uint32_t> through_float =
      bitcast_convert_type(transpose(f), DType::u32).to_vector<uint32_t>();
  EXPECT_EQ(through_float, out);
}

TEST(Transpose, VectorPathMatchesAPlainLoopWithTailsAndStreaming) {
  expect_transpose_moves_bits(16, 8);       // one band, one vector step
  expect_transpose_moves_bits(33, 19);      // a short last band and a column tail
  expect_transpose_moves_bits(40, 2100);    // several blocks along each band
  expect_transpose_moves_bits(1032, 2048);  // 8.1 MiB, aligned rows: streaming stores
  expect_transpose_moves_bits(2050, 1030);  // 8.1 MiB, rows not 32-byte aligned: plain stores
}

TEST(Transpose, IdentityIsFree) {
  Array x = counting({2, 3});
  EXPECT_EQ(transpose(x, {0, 1}).impl(), x.impl());
  Array s = scalar(4);
  EXPECT_EQ(transpose(s).impl(), s.impl());
}

TEST(Transpose, RejectsBadPermutations) {
  Array x = counting({2, 3});
  EXPECT_TRUE(fails_with([&] { transpose(x, {0}); }, {"transpose:", "[0]", "f32[2,3]", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { transpose(x, {0, 0}); }, {"transpose:", "twice", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { transpose(x, {0, 2}); }, {"transpose:", "axis 2", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { transpose(Array()); }, {"transpose:", "empty Array"}));
}

// ----- broadcasting, expand_dims, squeeze -------------------------------------------------

TEST(BroadcastTo, FollowsNumpyRules) {
  EXPECT_EQ(broadcast_to(floats({1, 2, 3}, {3}), {2, 3}).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(broadcast_to(floats({1, 2}, {2, 1}), {2, 3}).to_vector<float>(),
            (std::vector<float>{1, 1, 1, 2, 2, 2}));
  Array s = broadcast_to(scalar(7, DType::i32), {2, 2});
  EXPECT_EQ(s.to_vector<int32_t>(), (std::vector<int32_t>{7, 7, 7, 7}));
  EXPECT_EQ(broadcast_to(floats({1}, {1}), {0}).shape(), (Shape{0}));
  Array x = counting({2, 3});
  EXPECT_EQ(broadcast_to(x, {2, 3}).impl(), x.impl());
}

TEST(BroadcastTo, RejectsIncompatibleShapes) {
  Array x = counting({2, 3});
  EXPECT_TRUE(fails_with(
      [&] {
        broadcast_to(x, {4, 3});
      },
      {"broadcast_to:", "f32[2,3]", "[4,3]", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { broadcast_to(x, {3}); }, {"broadcast_to:", "lower-rank", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { broadcast_to(x, {-1, 3}); }, {"broadcast_to:", "negative"}));
}

TEST(BroadcastInDim, MapsOperandAxes) {
  Array y = broadcast_in_dim(floats({1, 2, 3}, {3}), {3, 2}, {0});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 3, 3}));
  Array x = counting({2, 3});
  EXPECT_EQ(broadcast_in_dim(x, {2, 3}, {0, 1}).impl(), x.impl());
  Array square = counting({3, 3});
  EXPECT_TRUE(fails_with(
      [&] {
        broadcast_in_dim(square, {3, 3}, {1, 0});
      },
      {"broadcast_in_dim:", "strictly increasing", "HINT:"}));
}

TEST(ExpandDims, CountsNegativeAxesInTheResult) {
  Array x = counting({2, 3});
  EXPECT_EQ(expand_dims(x, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(expand_dims(x, 1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(expand_dims(x, -1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(expand_dims(x, 2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(expand_dims(x, -3).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(expand_dims(scalar(1), 0).shape(), (Shape{1}));
  EXPECT_EQ(expand_dims(x, 1).to_vector<float>(), iota_values(6));
  EXPECT_TRUE(fails_with([&] { expand_dims(x, 3); }, {"expand_dims:", "axis 3", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { expand_dims(x, -4); }, {"expand_dims:", "axis -4"}));
}

TEST(Squeeze, RemovesSizeOneAxes) {
  Array x = counting({1, 3, 1});
  EXPECT_EQ(squeeze(x).shape(), (Shape{3}));
  EXPECT_EQ(squeeze(x, {0}).shape(), (Shape{3, 1}));
  EXPECT_EQ(squeeze(x, {-1}).shape(), (Shape{1, 3}));
  EXPECT_EQ(squeeze(counting({1, 1})).shape(), (Shape{}));
  Array y = counting({2, 3});
  EXPECT_EQ(squeeze(y).impl(), y.impl());
  EXPECT_TRUE(fails_with([&] { squeeze(x, {1}); }, {"squeeze:", "f32[1,3,1]", "size 3", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { squeeze(x, {3}); }, {"squeeze:", "axis 3"}));
  EXPECT_TRUE(fails_with([&] { squeeze(x, {0, 0}); }, {"squeeze:", "twice"}));
}

// ----- slicing --------------------------------------------------------------------------

TEST(Slice, TakesStridedWindows) {
  Array x = counting({3, 4});
  Array y = slice(x, {0, 1}, {3, 4}, {2, 2});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 3, 9, 11}));
  EXPECT_EQ(slice(x, {1, 0}, {2, 4}).to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(slice(x, {1, 1}, {1, 3}).shape(), (Shape{0, 2}));
  EXPECT_EQ(slice(x, {0, 0}, {3, 4}).impl(), x.impl());
}

TEST(Slice, RejectsOutOfBoundsAndBadParams) {
  Array x = counting({3, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        slice(x, {0, 0}, {3, 5});
      },
      {"slice:", "f32[3,4]", "axis 1", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { slice(x, {2, 0}, {1, 4}); }, {"slice:", "out of bounds"}));
  EXPECT_TRUE(fails_with([&] { slice(x, {-1, 0}, {3, 4}); }, {"slice:", "out of bounds"}));
  EXPECT_TRUE(fails_with([&] { slice(x, {0}, {3, 4}); }, {"slice:", "start_indices", "rank 2"}));
  EXPECT_TRUE(fails_with([&] { slice(x, {0, 0}, {3}); }, {"slice:", "limit_indices"}));
  EXPECT_TRUE(fails_with([&] { slice(x, {0, 0}, {3, 4}, {1}); }, {"slice:", "strides"}));
  EXPECT_TRUE(fails_with([&] { slice(x, {0, 0}, {3, 4}, {1, 0}); }, {"slice:", ">= 1", "HINT:"}));
}

Array starts(std::vector<int32_t> values) {
  auto n = static_cast<int64_t>(values.size());
  return from_host(values, Shape{n});
}

// As jax.lax.dynamic_slice: a negative start counts from the end of its axis, then the
// window is clamped into the array (issue 44: kiln only clamped, and gave [[0,1],[5,6]]
// for JAX's [[3,4],[8,9]] below).
TEST(DynamicSlice, CountsNegativeStartsFromTheEndThenClamps) {
  Array x = counting({3, 4});
  EXPECT_EQ(dynamic_slice(x, starts({1, 1}), {2, 2}).to_vector<float>(),
            (std::vector<float>{5, 6, 9, 10}));
  // Row 5 clamps to 1; column -3 is 4 - 3 = 1.
  EXPECT_EQ(dynamic_slice(x, starts({5, -3}), {2, 2}).to_vector<float>(),
            (std::vector<float>{5, 6, 9, 10}));
  // Column -9 is 4 - 9 = -5, clamped to 0.
  EXPECT_EQ(dynamic_slice(x, starts({0, -9}), {1, 2}).to_vector<float>(),
            (std::vector<float>{0, 1}));
  Array ten = counting({2, 5});
  EXPECT_EQ(dynamic_slice(ten, starts({0, -2}), {2, 2}).to_vector<float>(),
            (std::vector<float>{3, 4, 8, 9}));
  EXPECT_EQ(dynamic_slice(ten, from_host<int64_t>({0, -2}, {2}), {2, 2}).to_vector<float>(),
            (std::vector<float>{3, 4, 8, 9}));
  Array i64_starts = from_host<int64_t>({0, 3}, {2});
  EXPECT_EQ(dynamic_slice(x, i64_starts, {1, 1}).to_vector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(dynamic_slice(x, starts({2, 2}), {3, 4}).impl(), x.impl());
}

TEST(DynamicSlice, RejectsBadStartsAndSizes) {
  Array x = counting({3, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_slice(x, floats({0, 0}, {2}), {1, 1});
      },
      {"dynamic_slice:", "integer vector", "f32[2]", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_slice(x, starts({0}), {1, 1});
      },
      {"dynamic_slice:", "i32[1]", "f32[3,4]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_slice(x, starts({0, 0}), {4, 1});
      },
      {"dynamic_slice:", "slice_sizes", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_slice(x, starts({0, 0}), {1});
      },
      {"dynamic_slice:", "slice_sizes"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_slice(x, starts({0, 0}), {-1, 1});
      },
      {"dynamic_slice:", "slice_sizes"}));
  Array flags = from_host<bool>({false, true}, {2});
  EXPECT_TRUE(fails_with([&] { dynamic_slice(x, flags, {1, 1}); }, {"dynamic_slice:", "bool[2]"}));
}

TEST(DynamicUpdateSlice, WritesAClampedWindowCountingNegativeStartsFromTheEnd) {
  Array x = counting({2, 3});
  Array update = floats({-1, -2}, {1, 2});
  EXPECT_EQ(dynamic_update_slice(x, update, starts({1, 0})).to_vector<float>(),
            (std::vector<float>{0, 1, 2, -1, -2, 5}));
  EXPECT_EQ(dynamic_update_slice(x, update, starts({9, 9})).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 3, -1, -2}));
  // As jax.lax.dynamic_update_slice: column -2 is 3 - 2 = 1.
  EXPECT_EQ(dynamic_update_slice(x, update, starts({0, -2})).to_vector<float>(),
            (std::vector<float>{0, -1, -2, 3, 4, 5}));
  EXPECT_EQ(x.to_vector<float>(), iota_values(6));  // the operand is unchanged
  Array whole = counting({2, 3});
  EXPECT_EQ(dynamic_update_slice(x, whole, starts({1, 1})).impl(), whole.impl());
}

TEST(DynamicUpdateSlice, RejectsMismatchedUpdates) {
  Array x = counting({2, 3});
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_update_slice(x, from_host<int32_t>({1}, {1, 1}), starts({0, 0}));
      },
      {"dynamic_update_slice:", "f32[2,3]", "i32[1,1]", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_update_slice(x, counting({3, 1}), starts({0, 0}));
      },
      {"dynamic_update_slice:", "f32[3,1]", "fit", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_update_slice(x, counting({2}), starts({0, 0}));
      },
      {"dynamic_update_slice:", "rank"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dynamic_update_slice(x, counting({1, 1}), starts({0}));
      },
      {"dynamic_update_slice:", "start indices"}));
}

// ----- concatenate, stack, pad ------------------------------------------------------------

TEST(Concatenate, JoinsAlongAnAxis) {
  Array a = counting({2, 2});
  Array b = floats({9, 8}, {2, 1});
  EXPECT_EQ(concatenate({a, b}, 1).to_vector<float>(), (std::vector<float>{0, 1, 9, 2, 3, 8}));
  EXPECT_EQ(concatenate({a, b}, -1).shape(), (Shape{2, 3}));
  EXPECT_EQ(concatenate({a, a}, 0).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}));
  std::vector<Array> list{a, counting({0, 2}), a};
  EXPECT_EQ(concatenate(list, 0).shape(), (Shape{4, 2}));
  EXPECT_EQ(concatenate({a}, 0).impl(), a.impl());
}

TEST(Concatenate, RejectsMismatches) {
  Array a = counting({2, 2});
  EXPECT_TRUE(fails_with([&] { concatenate(std::span<const Array>{}, 0); },
                         {"concatenate:", "at least one", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        concatenate({a, counting({2, 3})}, 0);
      },
      {"concatenate:", "f32[2,2]", "f32[2,3]", "axis 0"}));
  EXPECT_TRUE(fails_with([&] { concatenate({a, counting({4})}, 0); }, {"concatenate:", "f32[4]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        concatenate({a, from_host<int32_t>({1, 2}, {1, 2})}, 0);
      },
      {"concatenate:", "one dtype", "i32[1,2]", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        concatenate({scalar(1), scalar(2)}, 0);
      },
      {"concatenate:", "rank-0", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { concatenate({a, a}, 2); }, {"concatenate:", "axis 2", "HINT:"}));
}

TEST(Stack, AddsANewAxis) {
  Array a = floats({1, 2}, {2});
  Array b = floats({3, 4}, {2});
  std::vector<Array> list{a, b};
  EXPECT_EQ(stack(list, 0).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(stack(list, 1).to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(stack(list, -1).shape(), (Shape{2, 2}));
  std::vector<Array> scalars{scalar(1), scalar(2), scalar(3)};
  EXPECT_EQ(stack(scalars).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(fails_with([&] { stack(std::span<const Array>{}); }, {"stack:", "HINT:"}));
  std::vector<Array> mismatched{a, counting({3})};
  EXPECT_TRUE(fails_with([&] { stack(mismatched); }, {"stack:", "f32[2]", "f32[3]", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { stack(list, 2); }, {"stack:", "axis 2"}));
}

TEST(Pad, PadsCropsAndInterleaves) {
  Array x = floats({1, 2, 3}, {3});
  EXPECT_EQ(pad(x, {1}, {2}, {}, -1).to_vector<float>(), (std::vector<float>{-1, 1, 2, 3, -1, -1}));
  EXPECT_EQ(pad(x, {0}, {0}, {1}).to_vector<float>(), (std::vector<float>{1, 0, 2, 0, 3}));
  EXPECT_EQ(pad(x, {-1}, {1}, {}, 9).to_vector<float>(), (std::vector<float>{2, 3, 9}));
  Array m = counting({2, 2});
  EXPECT_EQ(pad(m, {1, 0}, {0, 1}).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 1, 0, 2, 3, 0}));
  Array i = from_host<int32_t>({5}, {1});
  EXPECT_EQ(pad(i, {1}, {1}, {}, 7).to_vector<int32_t>(), (std::vector<int32_t>{7, 5, 7}));
  EXPECT_EQ(pad(x, {0}, {0}).impl(), x.impl());
}

TEST(Pad, RejectsBadParams) {
  Array x = counting({3});
  EXPECT_TRUE(fails_with([&] { pad(x, {0, 0}, {0}); }, {"pad:", "low", "f32[3]", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { pad(x, {0}, {0}, {-1}); }, {"pad:", "interior", "HINT:"}));
  EXPECT_TRUE(fails_with([&] { pad(x, {-2}, {-2}); }, {"pad:", "negative size", "HINT:"}));
}

// ----- the rules themselves (what a transformation or a bad caller would hit) ----------

AbstractValue f32(Shape shape) {
  return AbstractValue{std::move(shape), DType::f32};
}
AbstractValue i32(Shape shape) {
  return AbstractValue{std::move(shape), DType::i32};
}

TEST(LayoutRules, BroadcastInDim) {
  auto p = [](Shape shape, Dims dims) { return BroadcastInDimParams{shape, dims}; };
  auto prim = prim::broadcast_in_dim;
  EXPECT_TRUE(rule_fails(prim, {f32({3})}, p({-1, 3}, {1}), {"broadcast_in_dim:", "negative"}));
  EXPECT_TRUE(rule_fails(prim, {f32({3})}, p({2, 3}, {}), {"broadcast_dimensions", "f32[3]"}));
  EXPECT_TRUE(rule_fails(prim, {f32({3, 1})}, p({3}, {0, 1}), {"lower rank"}));
  EXPECT_TRUE(rule_fails(prim, {f32({3})}, p({2, 3}, {2}), {"out of range", "[2,3]"}));
  EXPECT_TRUE(rule_fails(prim, {f32({3})}, p({2, 3}, {-1}), {"out of range"}));
  EXPECT_TRUE(rule_fails(prim, {f32({3, 3})}, p({3, 3}, {1, 1}), {"strictly increasing"}));
  EXPECT_TRUE(rule_fails(prim, {f32({2})}, p({4, 3}, {1}), {"f32[2]", "size 2", "HINT:"}));
  EXPECT_TRUE(
      rule_fails(prim, {f32({})}, p({int64_t{1} << 40, int64_t{1} << 40}, {}), {"more elements"}));
}

TEST(LayoutRules, ReshapeAndTranspose) {
  EXPECT_TRUE(rule_fails(prim::reshape, {f32({6})}, ReshapeParams{Shape{-2, -3}}, {"negative"}));
  EXPECT_TRUE(rule_fails(prim::reshape, {f32({6})}, ReshapeParams{Shape{4}}, {"f32[6]", "[4]"}));
  auto t = [](Dims perm) { return TransposeParams{perm}; };
  EXPECT_TRUE(rule_fails(prim::transpose, {f32({2, 3})}, t({0}), {"transpose:", "f32[2,3]"}));
  EXPECT_TRUE(rule_fails(prim::transpose, {f32({2, 3})}, t({1, 1}), {"not a permutation"}));
  EXPECT_TRUE(rule_fails(prim::transpose, {f32({2, 3})}, t({0, 2}), {"not a permutation"}));
  EXPECT_TRUE(rule_fails(prim::transpose, {f32({2, 3})}, t({-1, 0}), {"not a permutation"}));
  EXPECT_TRUE(rule_fails(prim::transpose, {f32({})}, t({0}), {"rank-0", "HINT:"}));
}

TEST(LayoutRules, Slices) {
  auto s = [](Dims start, Dims limit, Dims strides) { return SliceParams{start, limit, strides}; };
  EXPECT_TRUE(rule_fails(prim::slice, {f32({4})}, s({0}, {4}, {0}), {"strides", ">= 1"}));
  EXPECT_TRUE(rule_fails(prim::slice, {f32({4})}, s({0}, {4}, {1, 1}), {"strides"}));
  EXPECT_TRUE(rule_fails(prim::slice, {f32({4})}, s({3}, {2}, {}), {"out of bounds"}));
  auto ds = [](Dims sizes) { return DynamicSliceParams{sizes}; };
  auto prim = prim::dynamic_slice;
  EXPECT_TRUE(rule_fails(prim, {f32({4}), i32({2, 1})}, ds({1}), {"i32[2,1]", "HINT:"}));
  EXPECT_TRUE(rule_fails(prim, {f32({4}), f32({1})}, ds({1}), {"integer vector"}));
  EXPECT_TRUE(rule_fails(prim, {f32({4}), i32({1})}, ds({5}), {"slice_sizes"}));
  EXPECT_TRUE(rule_fails(prim, {f32({4})}, ds({1}), {"expects 2 operand(s)"}));
  auto dus = prim::dynamic_update_slice;
  EXPECT_TRUE(rule_fails(dus, {f32({4}), i32({1}), i32({1})}, NoParams{}, {"dtype", "HINT:"}));
  EXPECT_TRUE(rule_fails(dus, {f32({4}), f32({5}), i32({1})}, NoParams{}, {"fit"}));
  EXPECT_TRUE(rule_fails(dus, {f32({4}), f32({1}), i32({2})}, NoParams{}, {"start indices"}));
}

TEST(LayoutRules, Concatenate) {
  auto c = [](int64_t dimension) { return ConcatenateParams{dimension}; };
  auto prim = prim::concatenate;
  EXPECT_TRUE(rule_fails(prim, {}, c(0), {"concatenate:", "at least one"}));
  EXPECT_TRUE(rule_fails(prim, {f32({2}), i32({2})}, c(0), {"one dtype", "i32[2]", "HINT:"}));
  EXPECT_TRUE(rule_fails(prim, {f32({2, 2}), f32({2, 3})}, c(0), {"f32[2,3]", "dimension 0"}));
  EXPECT_TRUE(rule_fails(prim, {f32({2, 2}), f32({2})}, c(0), {"equal rank"}));
  EXPECT_TRUE(rule_fails(prim, {f32({2})}, c(1), {"dimension 1", "HINT:"}));
  EXPECT_TRUE(rule_fails(prim, {f32({2})}, c(-1), {"dimension -1", "HINT:"}));
  EXPECT_TRUE(rule_fails(prim, {f32({}), f32({})}, c(0), {"rank-0"}));
}

TEST(LayoutRules, Pad) {
  auto p = [](Dims low, Dims high, Dims interior) { return PadParams{low, high, interior}; };
  EXPECT_TRUE(rule_fails(prim::pad, {f32({3}), f32({1})}, p({0}, {0}, {0}), {"rank-0", "HINT:"}));
  EXPECT_TRUE(rule_fails(prim::pad, {f32({3}), i32({})}, p({0}, {0}, {0}), {"i32[]"}));
  EXPECT_TRUE(rule_fails(prim::pad, {f32({3}), f32({})}, p({0}, {0}, {}), {"interior"}));
  EXPECT_TRUE(rule_fails(prim::pad, {f32({3}), f32({})}, p({0}, {0}, {-1}), {"interior"}));
  EXPECT_TRUE(rule_fails(prim::pad, {f32({3}), f32({})}, p({-2}, {-2}, {0}), {"negative size"}));
  EXPECT_TRUE(rule_fails(prim::pad, {f32({3}), f32({})},
                         p({int64_t{1} << 62}, {int64_t{1} << 62}, {int64_t{1} << 62}),
                         {"too large"}));
}

TEST(LayoutRules, Iota) {
  auto prim = prim::iota;
  EXPECT_TRUE(rule_fails(prim, {}, IotaParams{DType::bool_, Shape{3}, 0}, {"iota:", "bool"}));
  EXPECT_TRUE(rule_fails(prim, {}, IotaParams{DType::i32, Shape{-3}, 0}, {"negative"}));
  EXPECT_TRUE(rule_fails(prim, {}, IotaParams{DType::i32, Shape{3}, 1}, {"dimension 1"}));
  EXPECT_TRUE(rule_fails(prim, {}, IotaParams{DType::i32, Shape{}, 0}, {"rank-0"}));
  EXPECT_TRUE(rule_fails(prim, {f32({3})}, IotaParams{DType::i32, Shape{3}, 0}, {"expects 0"}));
}

TEST(LayoutRules, ResultTypesKeepWeakTypes) {
  AbstractValue weak{Shape{3}, DType::f32, true};
  auto out = abstract_eval(prim::transpose, std::vector{weak}, TransposeParams{{0}}, CallSite());
  EXPECT_TRUE(out[0].weak_type);
  out = abstract_eval(prim::concatenate, std::vector{weak, f32({2})}, ConcatenateParams{0},
                      CallSite());
  EXPECT_EQ(out[0], f32({5}));
}

}  // namespace
}  // namespace kiln
