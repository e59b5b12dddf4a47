// Hand-checked examples for the VJP rules of dot_general, conv_general_dilated and the
// window reductions (src/transforms/vjp_rules/contract.cc, window.cc): small cases whose
// cotangents are worked out by hand in the comments, the first-maximum rule of
// reduce_window_max on ties, padding and NaN, cotangent dtypes with preferred_element_type,
// and gradients of gradients through the user-level ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "prims/bind.h"
#include "prims/ids/window.h"
#include "support/arrays.h"

namespace kiln {
namespace {
using ::kiln::testing::f64;

constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_values(const Array& x, const Shape& shape, const std::vector<double>& expected) {
  EXPECT_EQ(x.shape(), shape);
  std::vector<double> actual = testing::values(x);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << "at " << i;
    } else {
      EXPECT_NEAR(actual[i], expected[i], 1e-12 * (1 + std::fabs(expected[i]))) << "at " << i;
    }
  }
}

// ----- dot_general ----------------------------------------------------------------------

TEST(DotGeneralVjp, MatmulCotangentsAreProductsWithTheOtherOperand) {
  // C = A B: dA = G B^T, dB = A^T G.
  Array a = f64({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Array b = f64({1, 0, 2, 1, 0, 3}, Shape{3, 2});
  auto [c, pullback] = vjp([](const Array& x, const Array& y) { return matmul(x, y); }, a, b);
  expect_values(c, Shape{2, 2}, {5, 11, 14, 23});
  auto [da, db] = pullback(f64({1, 2, 3, 4}, Shape{2, 2}));
  // G B^T = [[1,2],[3,4]] [[1,2,0],[0,1,3]] ; A^T G = [[1,4],[2,5],[3,6]] [[1,2],[3,4]]
  expect_values(da, Shape{2, 3}, {1, 4, 6, 3, 10, 12});
  expect_values(db, Shape{3, 2}, {13, 18, 17, 24, 21, 30});
}

TEST(DotGeneralVjp, BatchAndContractingAxesInAnyOrder) {
  // out[b, i, j] = sum_k lhs[k, b, i] * rhs[j, b, k]: lhs axes (contracting, batch, free),
  // rhs axes (free, batch, contracting). d out / d lhs[k, b, i] = sum_j g[b, i, j] rhs[j, b, k].
  Array lhs = f64({1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 2, 2});
  Array rhs = f64({1, -1, 2, 0, 3, 1}, Shape{3, 1, 2});
  Array lhs_b = slice(lhs, {0, 0, 0}, {2, 1, 2});  // batch of 1 so rhs can match
  auto f = [](const Array& x, const Array& y) { return dot_general(x, y, {0}, {2}, {1}, {1}); };
  auto [out, pullback] = vjp(f, lhs_b, rhs);
  // lhs_b[k, 0, i] = {{1, 2}, {5, 6}}; out[0, i, j] = sum_k lhs_b[k,0,i] rhs[j,0,k]
  expect_values(
      out, Shape{1, 2, 3},
      {1 * 1 + 5 * -1, 1 * 2 + 5 * 0, 1 * 3 + 5 * 1, 2 * 1 + 6 * -1, 2 * 2 + 6 * 0, 2 * 3 + 6 * 1});
  auto [dl, dr] = pullback(f64({1, 0, 2, 0, 1, -1}, Shape{1, 2, 3}));
  // dl[k, 0, i] = sum_j g[0, i, j] rhs[j, 0, k]: i=0: j=0 + 2*(j=2); i=1: j=1 - (j=2).
  expect_values(dl, Shape{2, 1, 2}, {1 + 2 * 3, 2 - 3, -1 + 2 * 1, 0 - 1});
  // dr[j, 0, k] = sum_i g[0, i, j] lhs_b[k, 0, i]
  expect_values(dr, Shape{3, 1, 2}, {1, 5, 2, 6, 2 * 1 - 2, 2 * 5 - 6});
}

TEST(DotGeneralVjp, PreferredElementTypeGivesCotangentsInTheOperandDtype) {
  Array a = astype(f64({1, 2, 3, 4}, Shape{2, 2}), DType::bf16);
  Array b = astype(f64({5, 6, 7, 8}, Shape{2, 2}), DType::bf16);
  auto f = [](const Array& x, const Array& y) {
    return dot_general(x, y, {1}, {0}, {}, {}, DType::f32);
  };
  auto [c, pullback] = vjp(f, a, b);
  EXPECT_EQ(c.dtype(), DType::f32);
  auto [da, db] = pullback(astype(f64({1, 0, 0, 1}, Shape{2, 2}), DType::f32));
  EXPECT_EQ(da.dtype(), DType::bf16);
  EXPECT_EQ(db.dtype(), DType::bf16);
  expect_values(da, Shape{2, 2}, {5, 7, 6, 8});  // B^T
  expect_values(db, Shape{2, 2}, {1, 3, 2, 4});  // A^T
}

TEST(DotGeneralVjp, SecondOrderThroughGrad) {
  // f(x) = sum((x x^T) * x x^T) ... checked against finite differences to second order.
  Array x = f64({0.5, -1, 2, 0.25, 1.5, -0.75}, Shape{2, 3});
  auto f = [](const Array& a) {
    Array gram = dot_general(a, a, {1}, {1});
    return sum(gram * gram);
  };
  check_grads(f, std::tuple{x}, {.order = 2});
}

// ----- conv_general_dilated -----------------------------------------------------------------

// A 1-D convolution along W of a [1, 1, W, 1] input with a [1, K, 1, 1] kernel.
Array conv1d(const Array& x, const Array& w, int64_t stride, int64_t low, int64_t high,
             int64_t lhs_dilation = 1, int64_t rhs_dilation = 1) {
  return conv_general_dilated(x, w, {1, stride}, {0, low}, {0, high}, {1, lhs_dilation},
                              {1, rhs_dilation});
}

TEST(ConvVjp, OneDimensionalCotangentsByHand) {
  // y[o] = 10 x[o] + 20 x[o + 1], o = 0..2, g = 1: dx[i] = sum of the taps touching i.
  Array x = f64({1, 2, 3, 4}, Shape{1, 1, 4, 1});
  Array w = f64({10, 20}, Shape{1, 2, 1, 1});
  auto [y, pullback] =
      vjp([](const Array& a, const Array& b) { return conv1d(a, b, 1, 0, 0); }, x, w);
  expect_values(y, Shape{1, 1, 3, 1}, {50, 80, 110});
  auto [dx, dw] = pullback(f64({1, 1, 1}, Shape{1, 1, 3, 1}));
  expect_values(dx, Shape{1, 1, 4, 1}, {10, 30, 30, 20});
  expect_values(dw, Shape{1, 2, 1, 1}, {1 + 2 + 3, 2 + 3 + 4});
}

TEST(ConvVjp, StrideTwo) {
  // y0 = 10 x0 + 20 x1, y1 = 10 x2 + 20 x3; g = (1, 2).
  Array x = f64({1, 2, 3, 4}, Shape{1, 1, 4, 1});
  Array w = f64({10, 20}, Shape{1, 2, 1, 1});
  auto [y, pullback] =
      vjp([](const Array& a, const Array& b) { return conv1d(a, b, 2, 0, 0); }, x, w);
  auto [dx, dw] = pullback(f64({1, 2}, Shape{1, 1, 2, 1}));
  expect_values(dx, Shape{1, 1, 4, 1}, {10, 20, 20, 40});
  expect_values(dw, Shape{1, 2, 1, 1}, {1 * 1 + 2 * 3, 1 * 2 + 2 * 4});
}

TEST(ConvVjp, StrideThatSkipsTheLastInputCell) {
  // Window 2, stride 2 on 5 cells: y0 = w0 x0 + w1 x1, y1 = w0 x2 + w1 x3; x4 is unused.
  Array x = f64({1, 2, 3, 4, 5}, Shape{1, 1, 5, 1});
  Array w = f64({10, 20}, Shape{1, 2, 1, 1});
  auto [y, pullback] =
      vjp([](const Array& a, const Array& b) { return conv1d(a, b, 2, 0, 0); }, x, w);
  auto [dx, dw] = pullback(f64({1, 2}, Shape{1, 1, 2, 1}));
  expect_values(dx, Shape{1, 1, 5, 1}, {10, 20, 20, 40, 0});
  expect_values(dw, Shape{1, 2, 1, 1}, {7, 10});
}

TEST(ConvVjp, LhsDilationTwo) {
  // x dilated = (1, 0, 2, 0, 3, 0, 4); y[o] = 10 xd[o] + 20 xd[o + 1], o = 0..5; g = 1.
  Array x = f64({1, 2, 3, 4}, Shape{1, 1, 4, 1});
  Array w = f64({10, 20}, Shape{1, 2, 1, 1});
  auto [y, pullback] =
      vjp([](const Array& a, const Array& b) { return conv1d(a, b, 1, 0, 0, /*lhs_dilation=*/2); },
          x, w);
  expect_values(y, Shape{1, 1, 6, 1}, {10, 40, 20, 60, 30, 80});
  auto [dx, dw] = pullback(f64({1, 1, 1, 1, 1, 1}, Shape{1, 1, 6, 1}));
  expect_values(dx, Shape{1, 1, 4, 1}, {10, 30, 30, 20});
  expect_values(dw, Shape{1, 2, 1, 1}, {1 + 2 + 3, 2 + 3 + 4});
}

TEST(ConvVjp, NegativeAndAsymmetricPaddingWithRhsDilation) {
  // Padding low -1 drops x0; high 1 adds a zero: padded = (x1, x2, x3, x4, 0). The kernel
  // (10, 20) dilated by 2 reads padded[o] and padded[o + 2], o = 0..2.
  Array x = f64({1, 2, 3, 4, 5}, Shape{1, 1, 5, 1});
  Array w = f64({10, 20}, Shape{1, 2, 1, 1});
  auto [y, pullback] = vjp(
      [](const Array& a, const Array& b) {
        return conv1d(a, b, 1, -1, 1, /*lhs_dilation=*/1, /*rhs_dilation=*/2);
      },
      x, w);
  expect_values(y, Shape{1, 1, 3, 1}, {10 * 2 + 20 * 4, 10 * 3 + 20 * 5, 10 * 4 + 20 * 0});
  auto [dx, dw] = pullback(f64({1, 2, 3}, Shape{1, 1, 3, 1}));
  // x1: 10 g0; x2: 10 g1; x3: 10 g2 + 20 g0; x4: 20 g1; x0 was cropped.
  expect_values(dx, Shape{1, 1, 5, 1}, {0, 10, 20, 30 + 20, 40});
  expect_values(dw, Shape{1, 2, 1, 1}, {1 * 2 + 2 * 3 + 3 * 4, 1 * 4 + 2 * 5 + 3 * 0});
}

TEST(ConvVjp, DepthwiseGroupsKeepChannelsApart) {
  // Two channels, groups 2, 1x1 kernel (3, 5): y[.., c] = w[c] x[.., c].
  Array x = f64({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  Array w = f64({3, 5}, Shape{1, 1, 1, 2});
  auto [y, pullback] = vjp(
      [](const Array& a, const Array& b) {
        return conv_general_dilated(a, b, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 2);
      },
      x, w);
  expect_values(y, Shape{1, 1, 2, 2}, {3, 10, 9, 20});
  auto [dx, dw] = pullback(f64({1, 10, 100, 1000}, Shape{1, 1, 2, 2}));
  expect_values(dx, Shape{1, 1, 2, 2}, {3, 50, 300, 5000});
  expect_values(dw, Shape{1, 1, 1, 2}, {1 * 1 + 100 * 3, 10 * 2 + 1000 * 4});
}

TEST(ConvVjp, GroupedConvMatchesPerGroupConvolutions) {
  // Groups 2 equal two separate convolutions on the channel halves; their cotangents must
  // match the halves of the grouped convolution's.
  std::mt19937_64 rng(3);
  std::vector<double> xv(2 * 5 * 6 * 4), wv(3 * 3 * 2 * 6), gv(2 * 3 * 2 * 6);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& v : xv) v = u(rng);
  for (double& v : wv) v = u(rng);
  for (double& v : gv) v = u(rng);
  Array x = f64(xv, Shape{2, 5, 6, 4}), w = f64(wv, Shape{3, 3, 2, 6}),
        g = f64(gv, Shape{2, 3, 2, 6});
  auto conv = [](const Array& a, const Array& b, int64_t groups) {
    return conv_general_dilated(a, b, {2, 2}, {1, 0}, {1, 1}, {1, 1}, {1, 2}, groups);
  };
  auto [y, pullback] = vjp([&](const Array& a, const Array& b) { return conv(a, b, 2); }, x, w);
  auto [dx, dw] = pullback(g);
  for (int64_t group = 0; group < 2; ++group) {
    Array xg = slice(x, {0, 0, 0, 2 * group}, {2, 5, 6, 2 * group + 2});
    Array wg = slice(w, {0, 0, 0, 3 * group}, {3, 3, 2, 3 * group + 3});
    Array gg = slice(g, {0, 0, 0, 3 * group}, {2, 3, 2, 3 * group + 3});
    auto [yg, pullback_g] =
        vjp([&](const Array& a, const Array& b) { return conv(a, b, 1); }, xg, wg);
    auto [dxg, dwg] = pullback_g(gg);
    expect_values(slice(dx, {0, 0, 0, 2 * group}, {2, 5, 6, 2 * group + 2}), dxg.shape(),
                  testing::values(dxg));
    expect_values(slice(dw, {0, 0, 0, 3 * group}, {3, 3, 2, 3 * group + 3}), dwg.shape(),
                  testing::values(dwg));
  }
}

TEST(ConvVjp, EmptyOperandsGiveZeroCotangents) {
  Array x = zeros(Shape{0, 5, 5, 2}, DType::f64);
  Array w = ones(Shape{3, 3, 2, 4}, DType::f64);
  auto [y, pullback] = vjp([](const Array& a, const Array& b) { return conv2d(a, b); }, x, w);
  EXPECT_EQ(y.shape(), (Shape{0, 3, 3, 4}));
  auto [dx, dw] = pullback(zeros(Shape{0, 3, 3, 4}, DType::f64));
  EXPECT_EQ(dx.shape(), x.shape());
  expect_values(dw, w.shape(), std::vector<double>(72, 0.0));
}

TEST(ConvVjp, SecondOrderOfASmallConvNet) {
  // conv2d (SAME, stride 2, groups 2) -> tanh -> conv2d depthwise -> sum of squares.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  auto random = [&](Shape shape) {
    std::vector<double> v(static_cast<size_t>(shape.num_elements()));
    for (double& value : v) value = u(rng);
    return f64(v, shape);
  };
  Array x = random(Shape{1, 5, 6, 4}), w1 = random(Shape{3, 3, 2, 4}),
        w2 = random(Shape{2, 2, 1, 4});
  auto f = [](const Array& a, const Array& k1, const Array& k2) {
    Array h = tanh(conv2d(a, k1, {2, 2}, Padding::kSame, {1, 1}, 2));
    Array o = conv2d(h, k2, {1, 1}, Padding::kValid, {1, 1}, 4);
    return sum(o * o);
  };
  check_grads(f, std::tuple{x, w1, w2}, {.order = 2});
}

// ----- reduce_window_sum --------------------------------------------------------------------

Array window_sum(const Array& x, Dims window, Dims strides, Dims low, Dims high) {
  return bind1(
      prim::reduce_window_sum, {x},
      ReduceWindowParams{std::move(window), std::move(strides), std::move(low), std::move(high)},
      CallSite());
}
Array window_max(const Array& x, Dims window, Dims strides, Dims low, Dims high) {
  return bind1(
      prim::reduce_window_max, {x},
      ReduceWindowParams{std::move(window), std::move(strides), std::move(low), std::move(high)},
      CallSite());
}

TEST(ReduceWindowSumVjp, OverlappingWindows) {
  // Windows of 3, stride 1 over 5 cells: cell i is in windows max(0, i-2)..min(i, 2).
  Array x = f64({1, 2, 3, 4, 5}, Shape{5});
  auto [y, pullback] = vjp([](const Array& a) { return window_sum(a, {3}, {1}, {0}, {0}); }, x);
  expect_values(y, Shape{3}, {6, 9, 12});
  auto [dx] = pullback(f64({1, 2, 3}, Shape{3}));
  expect_values(dx, Shape{5}, {1, 3, 6, 5, 3});
}

TEST(ReduceWindowSumVjp, StrideAndPadding) {
  // Window 3, stride 2, padding 1/1: windows cover x[-1..1], x[1..3], x[3..5].
  Array x = f64({1, 2, 3, 4, 5}, Shape{5});
  auto [y, pullback] = vjp([](const Array& a) { return window_sum(a, {3}, {2}, {1}, {1}); }, x);
  expect_values(y, Shape{3}, {3, 9, 9});
  auto [dx] = pullback(f64({1, 2, 3}, Shape{3}));
  expect_values(dx, Shape{5}, {1, 3, 2, 5, 3});
}

TEST(ReduceWindowSumVjp, NegativePaddingAndSkippedCells) {
  // Padding -1/0 drops x0; window 2, stride 3 over (x1..x5): windows (x1, x2), (x4, x5).
  Array x = f64({1, 2, 3, 4, 5, 6}, Shape{6});
  auto [y, pullback] = vjp([](const Array& a) { return window_sum(a, {2}, {3}, {-1}, {0}); }, x);
  expect_values(y, Shape{2}, {5, 11});
  auto [dx] = pullback(f64({1, 2}, Shape{2}));
  expect_values(dx, Shape{6}, {0, 1, 1, 0, 2, 2});
}

TEST(ReduceWindowSumVjp, AvgPoolSecondOrder) {
  Array x = f64({0.5, -1, 2, 0.25, 1.5, -0.75, 1, 2, 3, -2, 0.1, 0.7}, Shape{1, 3, 4, 1});
  auto f = [](const Array& a) {
    Array p = avg_pool(a * a, {2, 2}, {1, 2}, Padding::kSame);
    return sum(p * p);
  };
  check_grads(f, std::tuple{x}, {.order = 2});
}

// ----- reduce_window_max --------------------------------------------------------------------

TEST(ReduceWindowMaxVjp, TiesGoToTheFirstMaximum) {
  // Windows of 2 over (1, 3, 3, 2): (1, 3) -> x1; (3, 3) -> x1 (first); (3, 2) -> x2.
  Array x = f64({1, 3, 3, 2}, Shape{4});
  auto [y, pullback] = vjp([](const Array& a) { return window_max(a, {2}, {1}, {0}, {0}); }, x);
  expect_values(y, Shape{3}, {3, 3, 3});
  auto [dx] = pullback(f64({1, 10, 100}, Shape{3}));
  expect_values(dx, Shape{4}, {0, 11, 100, 0});
}

TEST(ReduceWindowMaxVjp, TiesInTwoDimensionsFollowRowMajorOrder) {
  // All equal: each 2x2 window picks its top-left cell; one 2x2 window with the maximum
  // tied between its bottom-left and top-right cells picks the top-right (row-major first).
  Array x = f64({7, 7, 7, 7}, Shape{1, 2, 2, 1});
  auto [y, pullback] = vjp([](const Array& a) { return max_pool(a, {2, 2}, {2, 2}); }, x);
  auto [dx] = pullback(f64({5}, Shape{1, 1, 1, 1}));
  expect_values(dx, Shape{1, 2, 2, 1}, {5, 0, 0, 0});
  Array z = f64({1, 9, 9, 2}, Shape{2, 2});
  auto [yz, pullback_z] = vjp(
      [](const Array& a) {
        return window_max(a, {2, 2}, {1, 1}, {0, 0}, {0, 0});
      },
      z);
  auto [dz] = pullback_z(f64({1}, Shape{1, 1}));
  expect_values(dz, Shape{2, 2}, {0, 1, 0, 0});
}

TEST(ReduceWindowMaxVjp, OverlappingWindowsAccumulate) {
  // Windows of 3 over (1, 5, 2, 0, 3): maxima 5, 5, 3.
  Array x = f64({1, 5, 2, 0, 3}, Shape{5});
  auto [y, pullback] = vjp([](const Array& a) { return window_max(a, {3}, {1}, {0}, {0}); }, x);
  expect_values(y, Shape{3}, {5, 5, 3});
  auto [dx] = pullback(f64({1, 2, 4}, Shape{3}));
  expect_values(dx, Shape{5}, {0, 3, 0, 0, 4});
}

TEST(ReduceWindowMaxVjp, PaddingNeverWinsOverARealCell) {
  // x = (-inf, -inf), window 2, padding 1/1: windows (pad, x0), (x0, x1), (x1, pad). Every
  // window's maximum is -inf; the real cells win over padding, the first on ties.
  Array x = f64({-kInf, -kInf}, Shape{2});
  auto [y, pullback] = vjp([](const Array& a) { return window_max(a, {2}, {1}, {1}, {1}); }, x);
  expect_values(y, Shape{3}, {-kInf, -kInf, -kInf});
  auto [dx] = pullback(f64({1, 2, 4}, Shape{3}));
  expect_values(dx, Shape{2}, {3, 4});
}

TEST(ReduceWindowMaxVjp, WindowsOfPaddingOnlyDropTheirCotangent) {
  // Window 1, padding 2/0 over (5): windows (pad), (pad), (x0).
  Array x = f64({5}, Shape{1});
  auto [y, pullback] = vjp([](const Array& a) { return window_max(a, {1}, {1}, {2}, {0}); }, x);
  expect_values(y, Shape{3}, {-kInf, -kInf, 5});
  auto [dx] = pullback(f64({1, 2, 4}, Shape{3}));
  expect_values(dx, Shape{1}, {4});
}

TEST(ReduceWindowMaxVjp, NaNMaximumComesFromTheFirstNaN) {
  Array x = f64({1, std::nan(""), std::nan(""), 2}, Shape{4});
  auto [y, pullback] = vjp([](const Array& a) { return window_max(a, {4}, {1}, {0}, {0}); }, x);
  EXPECT_TRUE(std::isnan(testing::values(y)[0]));
  auto [dx] = pullback(f64({3}, Shape{1}));
  expect_values(dx, Shape{4}, {0, 3, 0, 0});
}

TEST(ReduceWindowMaxVjp, MaxPoolWithSamePaddingByHand) {
  // 3x3 input, 2x2 windows, stride 2, SAME: padding 0 in front, 1 behind. The windows'
  // maxima: 9 at (0, 1), 8 at (1, 2), 7 at (2, 0), 6 at (2, 2).
  Array x = f64({3, 9, 1, 2, 4, 8, 7, 5, 6}, Shape{1, 3, 3, 1});
  auto [y, pullback] = vjp(
      [](const Array& a) {
        return max_pool(a, {2, 2}, {2, 2}, Padding::kSame);
      },
      x);
  expect_values(y, Shape{1, 2, 2, 1}, {9, 8, 7, 6});
  auto [dx] = pullback(f64({1, 2, 3, 4}, Shape{1, 2, 2, 1}));
  expect_values(dx, Shape{1, 3, 3, 1}, {0, 1, 0, 0, 0, 2, 3, 0, 4});
}

TEST(ReduceWindowMaxVjp, GradientOfTheGradientTraces) {
  // The rule is built from differentiable ops: the second derivative of a max pool is zero,
  // and of a conv followed by a max pool it is the conv's, routed through the pool.
  Array x =
      f64({0.3, -1.2, 2.5, 0.7, 1.1, -0.4, 0.9, 2.2, -1.7, 0.2, 1.4, -0.6, 0.05, 1.9, -2.1, 0.8},
          Shape{1, 4, 4, 1});
  Array w = f64({0.5, -0.25, 1.5, 0.75}, Shape{2, 2, 1, 1});
  auto f = [](const Array& a, const Array& k) {
    Array h = conv2d(a, k, {1, 1}, Padding::kSame);
    Array p = max_pool(h * h, {2, 2}, {1, 1}, Padding::kValid);
    return sum(p * p);
  };
  check_grads(f, std::tuple{x, w}, {.order = 2});
}

}  // namespace
}  // namespace kiln
