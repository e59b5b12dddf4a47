// lax.gather and the lax.scatter family with dimension numbers (kiln/gather_scatter.h):
// values by hand, the modes, repeated indices, gradients (reverse and forward) against
// finite differences, vmap and jit, and the errors for bad dimension numbers. The same
// functions against jax.lax: JnpCrosscheck (tests/ops/jnp_crosscheck_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/gather_scatter.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::f64;
using ::kiln::testing::values;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

Array i32s(std::vector<int32_t> values, Shape shape) {
  return from_host<int32_t>(values, shape);
}

// 0, 1, 2, ... in `shape`, as f64.
Array numbered(Shape shape) {
  return astype(iota(Shape{shape.num_elements()}, DType::f64), DType::f64).reshape(shape);
}

const lax::GatherDimensionNumbers kRows{
    .offset_dims = {1}, .collapsed_slice_dims = {0}, .start_index_map = {0}};
const lax::GatherDimensionNumbers kPoints{.collapsed_slice_dims = {0, 1},
                                          .start_index_map = {0, 1}};
const lax::ScatterDimensionNumbers kScatterPoints{.inserted_window_dims = {0},
                                                  .scatter_dims_to_operand_dims = {0}};

TEST(Gather, RowsPointsAndWindows) {
  Array x = numbered({3, 4});  // row r holds 4r .. 4r + 3
  EXPECT_EQ(values(lax::gather(x, i32s({2, 0}, {2, 1}), kRows, {1, 4})),
            (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(values(lax::gather(x, i32s({1, 2, 0, 3}, {2, 2}), kPoints, {1, 1})),
            (std::vector<double>{6, 3}));
  // A 2 x 2 window at (1, 1): [[5, 6], [9, 10]].
  lax::GatherDimensionNumbers windows{.offset_dims = {1, 2}, .start_index_map = {0, 1}};
  Array w = lax::gather(x, i32s({1, 1}, {1, 2}), windows, {2, 2});
  EXPECT_EQ(w.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(values(w), (std::vector<double>{5, 6, 9, 10}));
}

TEST(Gather, ModesForWindowsThatDoNotFit) {
  Array x = numbered({3, 4});
  Array past = i32s({2, 3}, {1, 2});  // a 2 x 2 window at (2, 3) sticks out
  lax::GatherDimensionNumbers windows{.offset_dims = {1, 2}, .start_index_map = {0, 1}};
  // clip moves it to (1, 2): [[6, 7], [10, 11]].
  EXPECT_EQ(values(lax::gather(x, past, windows, {2, 2}, IndexMode::kClip)),
            (std::vector<double>{6, 7, 10, 11}));
  std::vector<double> filled = values(lax::gather(x, past, windows, {2, 2}, IndexMode::kFill));
  for (double v : filled) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(values(lax::gather(x, past, windows, {2, 2}, IndexMode::kFill, -1.0)),
            (std::vector<double>{-1, -1, -1, -1}));
  Array ints = astype(x, DType::i32);
  EXPECT_EQ(lax::gather(ints, past, windows, {2, 2}, IndexMode::kFill).to_vector<int32_t>().at(0),
            std::numeric_limits<int32_t>::min());
  std::string text = error_of([&] { lax::gather(x, past, windows, {2, 2}).to_host(); });
  EXPECT_THAT(text, HasSubstr("out of range"));
}

TEST(Gather, BatchingDimsPickPerBatchEntry) {
  // One column per row: x[b, idx[b]].
  Array x = numbered({3, 4});
  lax::GatherDimensionNumbers per_row{.collapsed_slice_dims = {1},
                                      .start_index_map = {1},
                                      .operand_batching_dims = {0},
                                      .start_indices_batching_dims = {0}};
  EXPECT_EQ(values(lax::gather(x, i32s({3, 0, 2}, {3, 1}), per_row, {1, 1})),
            (std::vector<double>{3, 4, 10}));
}

TEST(Scatter, CombinesRepeatedIndicesAndDropsOrClamps) {
  Array x = f64({1, 2, 3, 4}, {4});
  Array idx = i32s({1, 3, 1}, {3, 1});
  Array u = f64({10, 20, 30}, {3});
  EXPECT_EQ(values(lax::scatter_add(x, idx, u, kScatterPoints)),
            (std::vector<double>{1, 42, 3, 24}));
  EXPECT_EQ(values(lax::scatter_mul(x, idx, u, kScatterPoints)),
            (std::vector<double>{1, 600, 3, 80}));
  EXPECT_EQ(values(lax::scatter_max(x, idx, u, kScatterPoints)),
            (std::vector<double>{1, 30, 3, 20}));
  EXPECT_EQ(values(lax::scatter_min(x, idx, f64({-1, 5, 0.5}, {3}), kScatterPoints)),
            (std::vector<double>{1, -1, 3, 4}));
  // scatter keeps the last update in row-major order of the updates.
  EXPECT_EQ(values(lax::scatter(x, idx, u, kScatterPoints)), (std::vector<double>{1, 30, 3, 20}));
  // Integers: min takes the smallest of the run too.
  Array ints = i32s({5, 5, 5, 5}, {4});
  EXPECT_EQ(lax::scatter_min(ints, idx, i32s({7, 2, 3}, {3}), kScatterPoints).to_vector<int32_t>(),
            (std::vector<int32_t>{5, 3, 5, 2}));
  Array outside = i32s({1, 9}, {2, 1});
  Array two = f64({10, 20}, {2});
  EXPECT_EQ(values(lax::scatter_add(x, outside, two, kScatterPoints, IndexMode::kFill)),
            (std::vector<double>{1, 12, 3, 4}));
  EXPECT_EQ(values(lax::scatter_add(x, outside, two, kScatterPoints, IndexMode::kClip)),
            (std::vector<double>{1, 12, 3, 24}));
  EXPECT_THAT(error_of([&] { lax::scatter_add(x, outside, two, kScatterPoints).to_host(); }),
              HasSubstr("out of range"));
  // NaN wins, as XLA's min and max propagate it.
  EXPECT_TRUE(
      std::isnan(values(lax::scatter_min(x, idx, f64({NAN, 0, 0}, {3}), kScatterPoints))[1]));
}

TEST(Scatter, WindowsAndBatchingDims) {
  Array x = zeros({3, 4}, DType::f64);
  lax::ScatterDimensionNumbers windows{.update_window_dims = {1, 2},
                                       .scatter_dims_to_operand_dims = {0, 1}};
  Array y = lax::scatter_add(x, i32s({1, 2}, {1, 2}), f64({1, 2, 3, 4}, {1, 2, 2}), windows);
  EXPECT_EQ(values(y), (std::vector<double>{0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4}));
  lax::ScatterDimensionNumbers per_row{.inserted_window_dims = {1},
                                       .scatter_dims_to_operand_dims = {1},
                                       .operand_batching_dims = {0},
                                       .scatter_indices_batching_dims = {0}};
  Array z = lax::scatter(x, i32s({3, 0, 1}, {3, 1}), f64({7, 8, 9}, {3}), per_row);
  EXPECT_EQ(values(z), (std::vector<double>{0, 0, 0, 7, 8, 0, 0, 0, 0, 9, 0, 0}));
}

TEST(GatherScatter, DerivativesMatchFiniteDifferences) {
  Array x = numbered({4, 3}) * 0.1 + 0.3;
  Array idx = i32s({2, 0, 2, 3}, {4, 1});
  auto gather_rows = [&](const Array& v) {
    return lax::gather(v, idx, kRows, {1, 3}) * lax::gather(v, idx, kRows, {1, 3});
  };
  EXPECT_NO_THROW(check_grads(gather_rows, std::tuple{x}, {.order = 2, .forward = true}));
  lax::ScatterDimensionNumbers rows{
      .update_window_dims = {1}, .inserted_window_dims = {0}, .scatter_dims_to_operand_dims = {0}};
  Array u = numbered({4, 3}) * -0.05 + 1.1;
  for (auto scatter_fn : {lax::scatter_add, lax::scatter_mul, lax::scatter_max, lax::scatter_min}) {
    auto f = [&](const Array& operand, const Array& updates) {
      return scatter_fn(operand, idx, updates, rows, IndexMode::kError, CallSite());
    };
    EXPECT_NO_THROW(check_grads(f, std::tuple{x, u}, {.forward = true}));
  }
}

TEST(GatherScatter, VmapAndJitMatchEager) {
  Array x = numbered({4, 3});
  Array idx = i32s({2, 0}, {2, 1});
  auto rows = [&](const Array& v) { return lax::gather(v, idx, kRows, {1, 3}); };
  Array eager = rows(x);
  EXPECT_EQ(values(jit(rows)(x)), values(eager));
  Array batch = stack({x, x * 2.0});
  Array batched = vmap(rows)(batch);
  EXPECT_EQ(batched.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values(batched)[7], values(eager)[1] * 2);
}

TEST(GatherScatterErrors, BadDimensionNumbersNameTheField) {
  Array x = numbered({3, 4});
  Array idx = i32s({1, 2}, {2, 1});
  EXPECT_THAT(error_of([&] { lax::gather(x, idx, kRows, {1}); }),
              HasSubstr("gather: slice_sizes [1] has 1 entries for an operand of rank 2"));
  EXPECT_THAT(error_of([&] {
                lax::gather(x, idx, kRows, {2, 4});
              }),
              HasSubstr("gather: collapsed axis 0 must have slice size 1, not 2"));
  EXPECT_THAT(error_of([&] {
                lax::gather(x, idx, kPoints, {1, 1});
              }),
              HasSubstr("the index vectors (last axis of indices i32[2,1]) have 1 entries, but "
                        "the start map [0,1] names 2 operand axes"));
  EXPECT_THAT(error_of([&] {
                lax::gather(x, idx, kRows, {1, 5});
              }),
              HasSubstr("the window along operand axis 1 has size 5, outside [0, 4]"));
  EXPECT_THAT(error_of([&] {
                lax::gather(x, astype(idx, DType::f32), kRows, {1, 4});
              }),
              HasSubstr("gather: indices must have an integer dtype, got f32[2,1]"));
  lax::GatherDimensionNumbers unsorted{
      .offset_dims = {1}, .collapsed_slice_dims = {0}, .start_index_map = {0, 0}};
  EXPECT_THAT(error_of([&] {
                lax::gather(x, i32s({1, 1}, {1, 2}), unsorted, {1, 4});
              }),
              HasSubstr("the start map = [0,0] must hold distinct axes"));
  EXPECT_THAT(error_of([&] {
                lax::scatter_add(x, idx, f64({1, 2}, {2}), kScatterPoints);
              }),
              HasSubstr("scatter_add: update_window_dims [] name 0 axes, but the operand "
                        "f64[3,4] has 1 window axes"));
  lax::ScatterDimensionNumbers rows{
      .update_window_dims = {1}, .inserted_window_dims = {0}, .scatter_dims_to_operand_dims = {0}};
  EXPECT_THAT(error_of([&] {
                lax::scatter(x, idx, zeros({3, 4}, DType::f64), rows);
              }),
              HasSubstr("scatter: updates f64[3,4] do not fit indices i32[2,1]"));
  EXPECT_THAT(error_of([&] {
                lax::scatter(x, idx, zeros({2, 4}, DType::f32), rows);
              }),
              HasSubstr("scatter: updates f32[2,4] must have the operand's dtype f64"));
}

TEST(GatherScatter, EmptyResultsAndUpdates) {
  Array x = numbered({3, 4});
  Array none = from_host<int32_t>(std::vector<int32_t>{}, Shape{0, 1});
  EXPECT_EQ(lax::gather(x, none, kRows, {1, 4}).shape(), (Shape{0, 4}));
  lax::ScatterDimensionNumbers rows{
      .update_window_dims = {1}, .inserted_window_dims = {0}, .scatter_dims_to_operand_dims = {0}};
  EXPECT_EQ(values(lax::scatter_add(x, none, zeros({0, 4}, DType::f64), rows)), values(x));
}

}  // namespace
}  // namespace kiln
