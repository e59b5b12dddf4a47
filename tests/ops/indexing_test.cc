// Tests of the user-facing indexing ops (src/ops/indexing.cc: take, take_along_axis,
// one_hot, x.at(i).set/add) through the eager runtime, including an out-of-range index
// that surfaces at the next synchronization with the op's call site, and of the gather /
// scatter abstract-evaluation rules (src/prims/index_rules.cc).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/grad.h"
#include "kiln/ops.h"
#include "ops/rule_errors.h"
#include "prims/bind.h"
#include "prims/ids/index.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::counting;
using ::kiln::testing::rule_fails;

using testing::error_of;
using testing::fails_with;

// 0, 1, 2, ... as f32 in `shape`.
Array ints(std::vector<int32_t> values, Shape shape) {
  return from_host(values, std::move(shape));
}

// ----- take -----------------------------------------------------------------------------

TEST(Take, PicksAlongAnAxis) {
  Array x = counting({3, 4});  // rows [0..3], [4..7], [8..11]
  Array rows = take(x, ints({2, 0, 2}, {3}));
  EXPECT_EQ(rows.shape(), (Shape{3, 4}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Array columns = take(x, ints({3, 1, 0, 0}, {2, 2}), -1);
  EXPECT_EQ(columns.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(columns.to_vector<float>(), (std::vector<float>{3, 1, 0, 0, 7, 5, 4, 4, 11, 9, 8, 8}));
  Array one = take(x, from_host<uint8_t>({1}, {}), 0);
  EXPECT_EQ(one.shape(), Shape{4});
  EXPECT_EQ(one.to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
}

TEST(Take, ClipAndFillModes) {
  Array x = counting({4});
  Array bad = from_host<int64_t>({-2, 1, 9}, {3});
  EXPECT_EQ(take(x, bad, 0, IndexMode::kClip).to_vector<float>(), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ(take(x, bad, 0, IndexMode::kFill).to_vector<float>(), (std::vector<float>{0, 1, 0}));
}

TEST(Take, OutOfRangeIndexFailsAtTheNextSynchronization) {
  Array x = counting({3, 2});
  Array labels = ints({0, 7, 1}, {3});
  Array y = take(x, labels);  // returns at once; the kernel finds the bad index later
  std::string message = error_of([&] { y.block_until_ready(); });
  for (std::string_view part :
       {"gather failed while running", "index 7 at indices[1] is out of range for axis 0 of size 3",
        "indexing_test.cc", "HINT", "take() clamps them with IndexMode::kClip",
        "IndexMode::kFill"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " is not in:\n" << message;
  }
  // Later ops on the failed result report the same error.
  Array z = y * 2.0;
  EXPECT_TRUE(fails_with([&] { z.to_vector<float>(); }, {"index 7", "indexing_test.cc"}));
  EXPECT_TRUE(
      fails_with([&] { take(x, ints({-1}, {1})).to_vector<float>(); }, {"index -1 at indices[0]"}));
}

TEST(Take, RejectsBadInputs) {
  Array x = counting({3, 2});
  EXPECT_TRUE(fails_with(
      [&] { take(x, counting({2})); },
      {"take: indices must have an integer dtype, got f32[2]", "HINT", "indexing_test.cc"}));
  EXPECT_TRUE(fails_with([&] { take(x, from_host<bool>({true}, {1})); }, {"integer dtype"}));
  EXPECT_TRUE(fails_with([&] { take(x, ints({0}, {1}), 2); }, {"take: axis 2 is out of range"}));
  EXPECT_TRUE(fails_with([&] { take(scalar(1.0), ints({0}, {1})); }, {"take", "rank-0"}));
  EXPECT_TRUE(fails_with([&] { take(x, Array()); }, {"take", "empty Array"}));
}

// ----- take_along_axis ------------------------------------------------------------------

TEST(TakeAlongAxis, PicksOneElementPerPosition) {
  Array logits = counting({3, 4});
  Array labels = ints({1, 3, 0}, {3});
  EXPECT_EQ(take_along_axis(logits, labels, -1).to_vector<float>(), (std::vector<float>{1, 7, 8}));
  EXPECT_EQ(take_along_axis(logits, labels, 1).shape(), Shape{3});
}

TEST(TakeAlongAxis, WorksOnLeadingAndMiddleAxes) {
  Array x = counting({3, 4});
  // Along axis 0: one row index per column.
  EXPECT_EQ(take_along_axis(x, ints({2, 0, 1, 2}, {4}), 0).to_vector<float>(),
            (std::vector<float>{8, 1, 6, 11}));
  Array y = counting({2, 3, 2});  // y[a, b, c] = 6a + 2b + c
  Array picked = take_along_axis(y, ints({0, 2, 1, 1}, {2, 2}), 1);
  EXPECT_EQ(picked.shape(), (Shape{2, 2}));
  EXPECT_EQ(picked.to_vector<float>(), (std::vector<float>{0, 5, 8, 9}));
}

// NumPy's form: indices of x's rank, several picks per position, the other axes broadcast.
TEST(TakeAlongAxis, SameRankIndicesFollowNumpy) {
  Array x = counting({3, 4});  // x[r, c] = 4r + c
  Array sorted_desc = take_along_axis(x, ints({3, 0, 1, 2, 0, 0}, {3, 2}), 1);
  EXPECT_EQ(sorted_desc.shape(), (Shape{3, 2}));
  EXPECT_EQ(sorted_desc.to_vector<float>(), (std::vector<float>{3, 0, 5, 6, 8, 8}));
  // Along axis 0, the column axis broadcasting from 1.
  Array rows = take_along_axis(x, ints({2, 0}, {2, 1}), 0);
  EXPECT_EQ(rows.shape(), (Shape{2, 4}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  // x broadcasting: one row, indices for three.
  Array row = counting({1, 4});
  EXPECT_EQ(take_along_axis(row, ints({3, 2, 1}, {3, 1}), 1).to_vector<float>(),
            (std::vector<float>{3, 2, 1}));
  // The gradient scatters back to the picked places, adding repeats.
  auto picked_sum = [&](const Array& v) {
    return sum(take_along_axis(v, ints({1, 1, 3}, {1, 3}), 1));
  };
  EXPECT_EQ(grad(picked_sum)(counting({1, 4})).to_vector<float>(),
            (std::vector<float>{0, 2, 0, 1}));
}

TEST(TakeAlongAxis, RejectsMismatchedIndices) {
  Array x = counting({3, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        take_along_axis(x, ints({0, 1}, {2}), 1);
      },
      {"take_along_axis: indices i32[2] must have the rank of x f32[3,4] (NumPy's form) or "
       "its shape without axis 1, i.e. [3]",
       "HINT"}));
  EXPECT_TRUE(fails_with(
      [&] {
        take_along_axis(x, ints({0, 1, 0, 1}, {2, 2}), 1);
      },
      {"take_along_axis: indices i32[2,2] do not broadcast against x f32[3,4] in axis 0"}));
  EXPECT_TRUE(fails_with([&] { take_along_axis(x, counting({3}), 1); }, {"integer dtype"}));
  EXPECT_TRUE(fails_with(
      [&] {
        take_along_axis(x, ints({0, 0, 0}, {3}), 2);
      },
      {"take_along_axis: axis 2 is out of range"}));
  EXPECT_TRUE(fails_with(
      [&] {
        take_along_axis(x, ints({0, 9, 0}, {3}), 1).to_vector<float>();
      },
      {"index 9 at indices[1]", "axis 1 of size 4"}));
}

// ----- one_hot --------------------------------------------------------------------------

TEST(OneHot, EncodesLabelsAndZeroesOutOfRangeOnes) {
  Array labels = ints({2, 0, -1, 3}, {4});
  Array encoded = one_hot(labels, 3);
  EXPECT_EQ(encoded.shape(), (Shape{4, 3}));
  EXPECT_EQ(encoded.dtype(), DType::f32);
  EXPECT_EQ(encoded.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
  Array grid = one_hot(from_host<uint8_t>({1, 0}, {2, 1}), 2, DType::i32);
  EXPECT_EQ(grid.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(grid.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 0}));
  EXPECT_EQ(one_hot(ints({1}, {}), 2).shape(), Shape{2});
}

TEST(OneHot, RejectsBadInputs) {
  EXPECT_TRUE(fails_with([&] { one_hot(ints({0}, {1}), 0); },
                         {"one_hot: num_classes must be positive, got 0", "indexing_test.cc"}));
  EXPECT_TRUE(fails_with([&] { one_hot(ints({0}, {1}), -2); }, {"got -2"}));
  EXPECT_TRUE(fails_with([&] { one_hot(counting({2}), 3); },
                         {"one_hot: labels must have an integer dtype, got f32[2]"}));
}

// ----- at().set / add -------------------------------------------------------------------

TEST(IndexedUpdate, SetAndAddRowsFunctionally) {
  Array x = counting({3, 2});
  Array set = x.at(ints({2, 0}, {2})).set(from_host<float>({10, 11, 20, 21}, {2, 2}));
  EXPECT_EQ(set.to_vector<float>(), (std::vector<float>{20, 21, 2, 3, 10, 11}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));  // unchanged
  // Repeated indices: add sums every update, set keeps the last.
  Array idx = ints({1, 1, 1}, {3});
  EXPECT_EQ(x.at(idx).add(1.0).to_vector<float>(), (std::vector<float>{0, 1, 5, 6, 4, 5}));
  Array values = from_host<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(x.at(idx).set(values).to_vector<float>(), (std::vector<float>{0, 1, 5, 6, 4, 5}));
  // Values broadcast to indices.shape + x.shape[1:] and convert to x's dtype.
  Array row = from_host<double>({7, 8}, {2});
  EXPECT_EQ(x.at(ints({0, 2}, {2})).set(row).to_vector<float>(),
            (std::vector<float>{7, 8, 2, 3, 7, 8}));
  Array counts = from_host<int32_t>({0, 0, 0}, {3});
  EXPECT_EQ(counts.at(ints({0, 2, 2}, {3})).add(1.0).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 0, 2}));
}

TEST(IndexedUpdate, RejectsBadValuesAndIndices) {
  Array x = counting({3, 2});
  Array idx = ints({0, 1}, {2});
  EXPECT_TRUE(fails_with([&] { x.at(idx).set(counting({3})); },
                         {"at.set: values f32[3] do not broadcast to [2,2]", "indexing_test.cc"}));
  EXPECT_TRUE(fails_with(
      [&] {
        x.at(idx).add(counting({4, 2}));
      },
      {"at.add: values f32[4,2] do not broadcast to [2,2]", "HINT"}));
  EXPECT_TRUE(fails_with([&] { x.at(counting({1})); }, {"at: indices must have an integer dtype"}));
  EXPECT_TRUE(fails_with([&] { scalar(1.0).at(idx); }, {"at: cannot index a rank-0 array"}));
  Array flags = from_host<bool>({true, false}, {2});
  EXPECT_TRUE(fails_with([&] { flags.at(ints({0}, {1})).add(1.0); },
                         {"at.add: cannot add to a bool array"}));
  EXPECT_EQ(flags.at(ints({1}, {1})).set(1.0).to_vector<bool>(), (std::vector<bool>{true, true}));
  Array y = x.at(ints({3}, {1})).set(0.0);
  EXPECT_TRUE(fails_with([&] { y.block_until_ready(); },
                         {"scatter failed while running", "index 3 at indices[0]",
                          "axis 0 of size 3", "indexing_test.cc"}));
  // The hint names what .at() can do, not an IndexMode it does not take (issue 44).
  std::string hint = error_of([&] { x.at(ints({3}, {1})).add(1.0).block_until_ready(); });
  EXPECT_NE(hint.find("x.at(indices).set/add checks every index: clamp them first (clip(indices, "
                      "0, 2))"),
            std::string::npos)
      << hint;
  EXPECT_EQ(hint.find("IndexMode"), std::string::npos) << hint;
}

TEST(IndexedUpdate, AnyAxisSeveralIndexArraysAndCombiners) {
  Array x = counting({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  // x.at[:, [2, 0]].set(...): columns 2 and 0, values shaped [2 rows, 2 picks].
  Array columns = x.at(ints({2, 0}, {2}), 1).set(from_host<float>({10, 11, 20, 21}, {2, 2}));
  EXPECT_EQ(columns.to_vector<float>(), (std::vector<float>{11, 1, 10, 21, 4, 20}));
  EXPECT_EQ(x.at(ints({1, 1}, {2}), -1).add(1.0).to_vector<float>(),
            (std::vector<float>{0, 3, 2, 3, 6, 5}));
  // x.at[i, j] with i, j broadcasting: (0, 1), (1, 1) and (1, 2).
  Array i = ints({0, 1, 1}, {3}), j = ints({1, 1, 2}, {3});
  EXPECT_EQ(x.at({i, j}).set(-1.0).to_vector<float>(), (std::vector<float>{0, -1, 2, 3, -1, -1}));
  EXPECT_EQ(x.at({ints({1}, {1}), ints({0, 2}, {2})}).add(10.0).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 13, 4, 15}));
  // Index arrays of rank 2: the values take their shape.
  Array grid = ints({0, 1, 1, 0}, {2, 2});
  EXPECT_EQ(x.at(grid).add(1.0).to_vector<float>(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  // mul, min, max combine repeated indices.
  Array rows = ints({1, 1}, {2});
  EXPECT_EQ(x.at(rows).mul(2.0).to_vector<float>(), (std::vector<float>{0, 1, 2, 12, 16, 20}));
  EXPECT_EQ(x.at(rows).min(from_host<float>({3.5f, 9, 9, 1, 9, 9}, {2, 3})).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 1, 4, 5}));
  EXPECT_EQ(x.at({i, j}).max(4.5).to_vector<float>(), (std::vector<float>{0, 4.5, 2, 3, 4.5, 5}));
  Array flags = from_host<bool>({true, false}, {2});
  EXPECT_TRUE(fails_with([&] { flags.at(ints({0}, {1})).mul(1.0); },
                         {"at.mul: cannot multiply a bool array"}));
  EXPECT_TRUE(fails_with(
      [&] {
        x.at({i, ints({0, 1}, {2})});
      },
      {"at: the index arrays i32[3], i32[2] do not broadcast together"}));
  EXPECT_TRUE(fails_with([&] { x.at({i, j, j}); }, {"at: 3 index arrays for an array f32[2,3]"}));
  EXPECT_TRUE(fails_with([&] { x.at(i, 2); }, {"at: axis 2 is out of range"}));
  EXPECT_TRUE(fails_with(
      [&] {
        x.at(rows, 1).set(counting({3, 2}));
      },
      {"at.set: values f32[3,2] do not broadcast to [2,2]"}));
}

// ----- primitive rules ------------------------------------------------------------------

TEST(IndexRules, GatherChecksGeometry) {
  AbstractValue x{Shape{2, 3, 4}, DType::f32};
  AbstractValue idx{Shape{2, 5}, DType::i32};
  EXPECT_TRUE(rule_fails(prim::gather, {x, AbstractValue{Shape{2}, DType::f32}},
                         GatherParams{0, 0, IndexMode::kError},
                         {"gather: indices must have an integer dtype, got f32[2]"}));
  EXPECT_TRUE(rule_fails(prim::gather, {x, idx}, GatherParams{3, 0, IndexMode::kError},
                         {"gather: axis 3 is out of range for operand f32[2,3,4]"}));
  EXPECT_TRUE(rule_fails(prim::gather, {x, idx}, GatherParams{-1, 0, IndexMode::kError},
                         {"axis -1 is out of range"}));
  EXPECT_TRUE(rule_fails(prim::gather, {x, idx}, GatherParams{1, 2, IndexMode::kError},
                         {"gather: batch_dims 2 must be in 0..min(axis, indices rank)"}));
  EXPECT_TRUE(rule_fails(prim::gather, {x, AbstractValue{Shape{3, 5}, DType::i32}},
                         GatherParams{1, 1, IndexMode::kError},
                         {"gather: batch axis 0 differs: operand f32[2,3,4] has 2, indices "
                          "i32[3,5] have 3"}));
  EXPECT_TRUE(rule_fails(prim::gather, {AbstractValue{Shape{2, 0}, DType::f32}, idx},
                         GatherParams{1, 0, IndexMode::kClip},
                         {"gather: cannot clip indices into axis 1", "size 0", "fill"}));
  EXPECT_TRUE(rule_fails(prim::gather, {AbstractValue{Shape{}, DType::f32}, idx},
                         GatherParams{0, 0, IndexMode::kError}, {"rank-0"}));
  std::vector<AbstractValue> ok{x, idx};
  auto out = abstract_eval(prim::gather, ok, GatherParams{2, 1, IndexMode::kFill}, CallSite());
  EXPECT_EQ(out[0], (AbstractValue{Shape{2, 3, 5}, DType::f32}));
}

TEST(IndexRules, ScatterChecksUpdates) {
  AbstractValue x{Shape{4, 3}, DType::f32};
  AbstractValue idx{Shape{5}, DType::i64};
  AbstractValue updates{Shape{5, 3}, DType::f32};
  ScatterParams params{0, 0, IndexMode::kError};
  EXPECT_TRUE(rule_fails(prim::scatter, {x, idx, AbstractValue{Shape{5, 2}, DType::f32}}, params,
                         {"scatter: updates f32[5,2] must have shape [5,3]", "HINT"}));
  EXPECT_TRUE(rule_fails(prim::scatter_add, {x, idx, AbstractValue{Shape{5, 3}, DType::f64}},
                         params, {"scatter_add: updates f64[5,3] must have the operand's dtype"}));
  EXPECT_TRUE(rule_fails(
      prim::scatter_add,
      {AbstractValue{Shape{4, 3}, DType::bool_}, idx, AbstractValue{Shape{5, 3}, DType::bool_}},
      params, {"scatter_add: does not accept bool"}));
  EXPECT_TRUE(rule_fails(prim::scatter, {x, AbstractValue{Shape{5}, DType::bf16}, updates}, params,
                         {"scatter: indices must have an integer dtype"}));
  EXPECT_TRUE(rule_fails(prim::scatter, {x, idx}, params, {"expects 3 operand(s), got 2"}));
  std::vector<AbstractValue> ok{x, idx, updates};
  EXPECT_EQ(abstract_eval(prim::scatter_add, ok, params, CallSite())[0], x);
}

}  // namespace
}  // namespace kiln
