// Hand-computed gradients of the layout, reduction, scan and indexing primitives, for the
// cases finite differences cannot check (ties, zeros, repeated indices) or where a plain
// number makes the rule's meaning obvious. tests/prims/op_table.cc checks every rule
// against finite differences on many shapes.
#include <gtest/gtest.h>

#include <limits>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/bind.h"
#include "prims/ids/index.h"
#include "prims/ids/shape.h"
#include "support/arrays.h"

namespace kiln {
namespace {
using ::kiln::testing::f64;

using Values = std::vector<double>;

Array i32(std::vector<int32_t> values, Shape shape) {
  return from_host(values, std::move(shape));
}

// sum(y * weights): its gradient with respect to y is `weights`, so the gradient with
// respect to the op's input is the op's VJP applied to `weights`.
Array weighted(const Array& y, const Array& weights) {
  return sum(y * weights);
}

// JAX's convention (found by the cross-check against JAX, docs/peers.md): abs has slope 1
// at 0 and -0, and -1 at NaN; kiln's rule used to be sign(x), which gave 0 at zero.
TEST(AbsVjp, IsOneAtZeroAsInJax) {
  auto f = [](const Array& x) { return weighted(abs(x), f64({1, 2, 3, 4, 5}, {5})); };
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(grad(f)(f64({-2, -0.0, 0, 3, nan}, {5})).to_vector<double>(),
            (Values{-1, 2, 3, 4, -5}));
}

TEST(ReduceMaxVjp, TiesShareTheCotangentEqually) {
  auto f = [](const Array& x) { return max(x); };
  EXPECT_EQ(grad(f)(f64({1, 3, 3, 2}, {4})).to_vector<double>(), (Values{0, 0.5, 0.5, 0}));
  // Per row of a [2, 3]: one row with a two-way tie, one with a three-way tie.
  Array w = f64({2, 6}, {2});
  auto g = [&](const Array& x) { return weighted(max(x, {1}), w); };
  EXPECT_EQ(grad(g)(f64({1, 5, 5, 2, 2, 2}, {2, 3})).to_vector<double>(),
            (Values{0, 1, 1, 2, 2, 2}));
}

TEST(ReduceMinVjp, GoesToTheMinimumAndSplitsTies) {
  auto f = [](const Array& x) { return min(x, {0}); };
  auto g = [&](const Array& x) { return sum(f(x) * f64({1, 10}, {2})); };
  EXPECT_EQ(grad(g)(f64({4, -1, 2, -1, 7, 5}, {3, 2})).to_vector<double>(),
            (Values{0, 5, 1, 5, 0, 0}));
}

TEST(ReduceProdVjp, IsTheProductOfTheOthersWithZeros) {
  auto f = [](const Array& x) { return prod(x); };
  EXPECT_EQ(grad(f)(f64({2, 3, 4}, {3})).to_vector<double>(), (Values{12, 8, 6}));
  EXPECT_EQ(grad(f)(f64({2, 0, 4}, {3})).to_vector<double>(), (Values{0, 8, 0}));
  EXPECT_EQ(grad(f)(f64({0, 3, 0}, {3})).to_vector<double>(), (Values{0, 0, 0}));
  EXPECT_EQ(grad(f)(f64({5}, {1})).to_vector<double>(), (Values{1}));
  // Over the middle axis of [2, 3, 2]: rows x[i, :, j] with one zero (i = 0), none
  // (i = 1, j = 0) and two (i = 1, j = 1).
  Array x = f64({2, 1, 0, 3, 4, 0,  //
                 1, 0, 2, 0, 3, 5},
                {2, 3, 2});
  auto g = [](const Array& x) { return sum(prod(x, {1})); };
  EXPECT_EQ(grad(g)(x).to_vector<double>(), (Values{0, 0, 8, 0, 0, 3,  //
                                                    6, 0, 3, 0, 2, 0}));
}

TEST(ReduceProdVjp, SecondDerivativeIsExactAtAZero) {
  // H_ij = prod of the others but i and j, so at x = (2, 0, 4): H (1, 1, 1) = (0 + 4,
  // 4 + 2, 2 + 0). A rule that zeroed the gradient by a mask would give (0, 6, 0).
  auto f = [](const Array& x) { return prod(x); };
  auto directional = [&](const Array& x) { return sum(grad(f)(x)); };
  EXPECT_EQ(grad(directional)(f64({2, 0, 4}, {3})).to_vector<double>(), (Values{4, 6, 2}));
  // Two zeros: only the pair of zeros has a nonzero second derivative (the third factor).
  EXPECT_EQ(grad(directional)(f64({0, 3, 0}, {3})).to_vector<double>(), (Values{3, 0, 3}));
}

TEST(CumsumVjp, IsTheCumsumTheOtherWay) {
  Array w = f64({1, 2, 3, 4}, {4});
  auto forward = [&](const Array& x) { return weighted(cumsum(x, 0), w); };
  auto backward = [&](const Array& x) { return weighted(cumsum(x, 0, /*reverse=*/true), w); };
  Array x = f64({0.5, -1, 2, 3}, {4});
  EXPECT_EQ(grad(forward)(x).to_vector<double>(), (Values{10, 9, 7, 4}));
  EXPECT_EQ(grad(backward)(x).to_vector<double>(), (Values{1, 3, 6, 10}));
}

TEST(SliceVjp, PutsTheCotangentBackAtTheStridedPositions) {
  auto f = [](const Array& x) { return weighted(slice(x, {1}, {7}, {3}), f64({10, 20}, {2})); };
  EXPECT_EQ(grad(f)(f64({0, 1, 2, 3, 4, 5, 6}, {7})).to_vector<double>(),
            (Values{0, 10, 0, 0, 20, 0, 0}));
}

TEST(PadVjp, OperandAndPaddingValue) {
  // pad(x, low 1, high 2, interior 1) = [v, x0, v, x1, v, x2, v, v].
  Array w = f64({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  auto f = [&](const Array& x, const Array& value) {
    return weighted(bind1(prim::pad, {x, value}, PadParams{{1}, {2}, {1}}, CallSite()), w);
  };
  Array x = f64({1, 2, 3}, {3}), value = f64({0.5}, {});
  EXPECT_EQ(grad<0>(f)(x, value).to_vector<double>(), (Values{2, 4, 6}));
  EXPECT_EQ(grad<1>(f)(x, value).item<double>(), 1 + 3 + 5 + 7 + 8);
  // Negative low crops: pad(x[5], low -2, high 1) = [x2, x3, x4, v].
  auto g = [&](const Array& x, const Array& value) {
    return weighted(bind1(prim::pad, {x, value}, PadParams{{-2}, {1}, {0}}, CallSite()),
                    f64({1, 2, 3, 4}, {4}));
  };
  Array y = f64({1, 2, 3, 4, 5}, {5});
  EXPECT_EQ(grad<0>(g)(y, value).to_vector<double>(), (Values{0, 0, 1, 2, 3}));
  EXPECT_EQ(grad<1>(g)(y, value).item<double>(), 4);
}

TEST(DynamicUpdateSliceVjp, StartIsClampedBothWays) {
  // Start 4 is clamped to 3 for a window of 2 in 5.
  Array w = f64({1, 2, 3, 4, 5}, {5});
  auto f = [&](const Array& x, const Array& update) {
    return weighted(dynamic_update_slice(x, update, i32({4}, {1})), w);
  };
  Array x = f64({0, 0, 0, 0, 0}, {5}), update = f64({7, 8}, {2});
  EXPECT_EQ(grad<0>(f)(x, update).to_vector<double>(), (Values{1, 2, 3, 0, 0}));
  EXPECT_EQ(grad<1>(f)(x, update).to_vector<double>(), (Values{4, 5}));
  auto g = [&](const Array& x) {
    return weighted(dynamic_slice(x, i32({4}, {1}), {2}), f64({10, 20}, {2}));
  };
  EXPECT_EQ(grad(g)(x).to_vector<double>(), (Values{0, 0, 0, 10, 20}));
}

TEST(GatherVjp, RepeatedAndClippedIndicesAccumulate) {
  Array x = f64({1, 2, 3}, {3});
  auto f = [&](const Array& x) {
    return weighted(take(x, i32({0, 2, 0}, {3})), f64({1, 2, 3}, {3}));
  };
  EXPECT_EQ(grad(f)(x).to_vector<double>(), (Values{4, 0, 2}));
  // Clip mode reads (and so sends the cotangent to) the nearest end.
  auto g = [&](const Array& x) {
    return weighted(take(x, i32({5, -1, 1}, {3}), 0, IndexMode::kClip), f64({1, 2, 3}, {3}));
  };
  EXPECT_EQ(grad(g)(x).to_vector<double>(), (Values{2, 3, 1}));
  // Fill mode reads zeros for out-of-range indices: no cotangent reaches x from them.
  auto h = [&](const Array& x) {
    return weighted(take(x, i32({5, -1, 1}, {3}), 0, IndexMode::kFill), f64({1, 2, 3}, {3}));
  };
  EXPECT_EQ(grad(h)(x).to_vector<double>(), (Values{0, 3, 0}));
}

TEST(ScatterVjp, OnlyTheLastOfRepeatedIndicesGetsTheCotangent) {
  // x.at([1, 3, 1]).set(u): u2 overwrites u0 at position 1.
  Array w = f64({1, 2, 3, 4}, {4});
  Array indices = i32({1, 3, 1}, {3});
  auto f = [&](const Array& x, const Array& u) { return weighted(x.at(indices).set(u), w); };
  Array x = f64({0.5, 0.5, 0.5, 0.5}, {4}), u = f64({10, 20, 30}, {3});
  EXPECT_EQ(grad<0>(f)(x, u).to_vector<double>(), (Values{1, 0, 3, 0}));
  EXPECT_EQ(grad<1>(f)(x, u).to_vector<double>(), (Values{0, 4, 2}));
}

TEST(ScatterVjp, DroppedUpdatesInFillModeGetNothing) {
  Array w = f64({1, 2, 3}, {3});
  Array indices = i32({7, 0, -1, 0}, {4});
  auto f = [&](const Array& x, const Array& u) {
    return weighted(
        bind1(prim::scatter, {x, indices, u}, ScatterParams{0, 0, IndexMode::kFill}, CallSite()),
        w);
  };
  Array x = f64({0.5, 0.5, 0.5}, {3}), u = f64({1, 2, 3, 4}, {4});
  EXPECT_EQ(grad<0>(f)(x, u).to_vector<double>(), (Values{0, 2, 3}));
  EXPECT_EQ(grad<1>(f)(x, u).to_vector<double>(), (Values{0, 0, 0, 1}));
}

TEST(ScatterAddVjp, EveryRepeatedUpdateGetsTheCotangent) {
  Array w = f64({1, 2, 3, 4}, {4});
  Array indices = i32({1, 3, 1}, {3});
  auto f = [&](const Array& x, const Array& u) { return weighted(x.at(indices).add(u), w); };
  Array x = f64({0.5, 0.5, 0.5, 0.5}, {4}), u = f64({10, 20, 30}, {3});
  EXPECT_EQ(grad<0>(f)(x, u).to_vector<double>(), (Values{1, 2, 3, 4}));
  EXPECT_EQ(grad<1>(f)(x, u).to_vector<double>(), (Values{2, 4, 2}));
}

TEST(ConcatenateVjp, SlicesTheCotangentPerOperand) {
  Array w = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  auto f = [&](const Array& a, const Array& b) { return weighted(concatenate({a, b}, 1), w); };
  Array a = f64({0, 0}, {2, 1}), b = f64({0, 0, 0, 0}, {2, 2});
  EXPECT_EQ(grad<0>(f)(a, b).to_vector<double>(), (Values{1, 4}));
  EXPECT_EQ(grad<1>(f)(a, b).to_vector<double>(), (Values{2, 3, 5, 6}));
}

}  // namespace
}  // namespace kiln
