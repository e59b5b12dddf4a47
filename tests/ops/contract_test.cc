// Tests of the user-facing contraction, convolution and pooling ops (src/ops/contract.cc,
// src/ops/conv.cc) through the eager runtime, and of the contract and window primitives'
// abstract-evaluation rules (src/prims/contract_rules.cc, window_rules.cc): every bad input
// must fail with an error naming the op and the shapes, with a HINT where a fix is common.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/ids/contract.h"
#include "prims/ids/window.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::counting;

using ::kiln::testing::floats;

using testing::error_of;
using testing::fails_with;

// 1, 2, 3, ... (or a small repeating pattern) as f32 in `shape`.
Array pattern(Shape shape, int salt) {
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(salt)) % 11) - 5);
  }
  return floats(values, std::move(shape));
}

void expect_near(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-4 * (1 + std::fabs(expected[i]))) << "at " << i;
  }
}

// Naive numpy.matmul on row-major data for operands already broadcast to [batch, m, k] and
// [batch, k, n].
std::vector<float> batched_matmul(const std::vector<float>& a, const std::vector<float>& b,
                                  int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<float> c(static_cast<size_t>(batch * m * n), 0);
  for (int64_t p = 0; p < batch; ++p) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < k; ++q) {
          sum += a[static_cast<size_t>((p * m + i) * k + q)] *
                 b[static_cast<size_t>((p * k + q) * n + j)];
        }
        c[static_cast<size_t>((p * m + i) * n + j)] = static_cast<float>(sum);
      }
    }
  }
  return c;
}

// Naive NHWC x HWIO convolution with explicit padding, stride, kernel dilation and groups.
std::vector<float> naive_conv(const Array& x, const Array& w, Dims strides, Dims low, Dims high,
                              Dims dilation, int64_t groups) {
  std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>();
  int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3);
  int64_t kh = w.dim(0), kw = w.dim(1), ipg = w.dim(2), o = w.dim(3), opg = o / groups;
  int64_t oh = (h + low[0] + high[0] - (kh - 1) * dilation[0] - 1) / strides[0] + 1;
  int64_t ow = (wd + low[1] + high[1] - (kw - 1) * dilation[1] - 1) / strides[1] + 1;
  std::vector<float> out;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        for (int64_t f = 0; f < o; ++f) {
          double sum = 0;
          for (int64_t i = 0; i < kh; ++i) {
            for (int64_t j = 0; j < kw; ++j) {
              int64_t ih = y * strides[0] + i * dilation[0] - low[0];
              int64_t iw = z * strides[1] + j * dilation[1] - low[1];
              if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
              for (int64_t q = 0; q < ipg; ++q) {
                sum += xv[static_cast<size_t>(((b * h + ih) * wd + iw) * c + f / opg * ipg + q)] *
                       wv[static_cast<size_t>(((i * kw + j) * ipg + q) * o + f)];
              }
            }
          }
          out.push_back(static_cast<float>(sum));
        }
      }
    }
  }
  return out;
}

// ----- matmul ---------------------------------------------------------------------------

TEST(Matmul, MultipliesMatrices) {
  Array a = floats({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = floats({1, 0, 0, 1, 1, 1}, {3, 2});
  Array c = matmul(a, b);
  EXPECT_EQ(c.aval(), (AbstractValue{Shape{2, 2}, DType::f32}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
}

TEST(Matmul, PromotesOneDimensionalOperandsAndDropsTheAddedAxis) {
  Array v = floats({1, 2, 3}, {3});
  Array m = floats({1, 0, 0, 1, 1, 1}, {3, 2});
  Array vm = matmul(v, m);
  EXPECT_EQ(vm.shape(), Shape{2});
  EXPECT_EQ(vm.to_vector<float>(), (std::vector<float>{4, 5}));
  Array mt = floats({1, 0, 1, 0, 1, 1}, {2, 3});
  Array mv = matmul(mt, v);
  EXPECT_EQ(mv.shape(), Shape{2});
  EXPECT_EQ(mv.to_vector<float>(), (std::vector<float>{4, 5}));
  Array dot = matmul(v, v);
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_EQ(dot.item<float>(), 14);
}

TEST(Matmul, BroadcastsBatchAxes) {
  // Stacked lhs, one rhs: folded into a single GEMM.
  Array a = pattern({2, 4, 3}, 1), b = pattern({3, 5}, 2);
  Array c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 4, 5}));
  std::vector<float> bb = b.to_vector<float>();
  std::vector<float> b2 = bb;
  b2.insert(b2.end(), bb.begin(), bb.end());
  expect_near(c.to_vector<float>(), batched_matmul(a.to_vector<float>(), b2, 2, 4, 3, 5));

  // Size-1 batch axes on both sides broadcast against each other.
  Array x = pattern({2, 1, 2, 3}, 3), y = pattern({3, 3, 2}, 4);
  Array z = matmul(x, y);
  EXPECT_EQ(z.shape(), (Shape{2, 3, 2, 2}));
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>(), xs, ys;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      xs.insert(xs.end(), xv.begin() + i * 6, xv.begin() + (i + 1) * 6);
      ys.insert(ys.end(), yv.begin() + j * 6, yv.begin() + (j + 1) * 6);
    }
  }
  expect_near(z.to_vector<float>(), batched_matmul(xs, ys, 6, 2, 3, 2));

  // A plain matrix against a stack, and a vector against a stack.
  Array s = pattern({4, 3, 2}, 5), m = pattern({2, 3}, 6);
  Array ms = matmul(m, s);
  EXPECT_EQ(ms.shape(), (Shape{4, 2, 2}));
  std::vector<float> mv = m.to_vector<float>(), m4;
  for (int i = 0; i < 4; ++i) m4.insert(m4.end(), mv.begin(), mv.end());
  expect_near(ms.to_vector<float>(), batched_matmul(m4, s.to_vector<float>(), 4, 2, 3, 2));
  Array vs = matmul(floats({1, 2, 3}, {3}), s);
  EXPECT_EQ(vs.shape(), (Shape{4, 2}));
  std::vector<float> v4;
  for (int i = 0; i < 4; ++i) v4.insert(v4.end(), {1, 2, 3});
  expect_near(vs.to_vector<float>(), batched_matmul(v4, s.to_vector<float>(), 4, 1, 3, 2));
}

TEST(Matmul, PromotesDtypesAndKeepsSixteenBitFloats) {
  Array i = from_host<int32_t>({1, 2, 3, 4}, {2, 2});
  Array f = floats({1, 0, 0, 1}, {2, 2});
  Array c = matmul(i, f);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(matmul(i, i).to_vector<int32_t>(), (std::vector<int32_t>{7, 10, 15, 22}));
  Array h = astype(f, DType::bf16);
  EXPECT_EQ(matmul(h, h).dtype(), DType::bf16);
}

TEST(Matmul, EmptyAndDegenerateSizes) {
  Array c = matmul(zeros({3, 0}), zeros({0, 4}));
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(12, 0));
  EXPECT_EQ(matmul(zeros({0, 5}), zeros({5, 2})).shape(), (Shape{0, 2}));
  EXPECT_EQ(matmul(zeros({2, 0, 5}), zeros({5, 2})).shape(), (Shape{2, 0, 2}));
}

TEST(Matmul, RejectsBadShapesWithAHint) {
  EXPECT_TRUE(fails_with(
      [] {
        matmul(zeros({2, 3}), zeros({4, 5}));
      },
      {"matmul:", "f32[2,3]", "f32[4,5]", "has 3", "has 4", "HINT:", "transpose"}));
  EXPECT_TRUE(fails_with([] { matmul(zeros({3}), zeros({4})); }, {"matmul:", "f32[3]", "f32[4]"}));
  EXPECT_TRUE(fails_with(
      [] {
        matmul(scalar(2), zeros({2, 2}));
      },
      {"matmul:", "at least one axis", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [] {
        matmul(zeros({2, 2, 3}), zeros({3, 3, 2}));
      },
      {"matmul", "cannot be broadcast"}));
  EXPECT_TRUE(fails_with(
      [] {
        matmul(full({2, 2}, 1, DType::bool_), full({2, 2}, 1, DType::bool_));
      },
      {"matmul:", "bool", "HINT:"}));
  EXPECT_TRUE(fails_with([] { matmul(Array(), zeros({2})); }, {"matmul:", "empty Array"}));
}

// ----- dot_general ----------------------------------------------------------------------

TEST(DotGeneral, AcceptsNegativeDimsAndBatchAxes) {
  Array a = pattern({2, 3, 4}, 1), b = pattern({2, 4, 5}, 2);
  Array c = dot_general(a, b, {-1}, {-2}, {0}, {0});
  EXPECT_EQ(c.shape(), (Shape{2, 3, 5}));
  expect_near(c.to_vector<float>(), matmul(a, b).to_vector<float>());
  // Contracting the leading axis of both: a^T b.
  Array x = pattern({4, 3}, 3), y = pattern({4, 2}, 4);
  Array xty = dot_general(x, y, {0}, {0});
  EXPECT_EQ(xty.shape(), (Shape{3, 2}));
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>(), expected;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      float sum = 0;
      for (int k = 0; k < 4; ++k)
        sum += xv[static_cast<size_t>(k * 3 + i)] * yv[static_cast<size_t>(k * 2 + j)];
      expected.push_back(sum);
    }
  }
  expect_near(xty.to_vector<float>(), expected);
}

TEST(DotGeneral, PreferredElementTypeWidensTheResult) {
  Array a = astype(floats({1.5, 2, 3, 4}, {2, 2}), DType::bf16);
  Array c = dot_general(a, a, {1}, {0}, {}, {}, DType::f32);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{8.25, 11, 16.5, 22}));
}

TEST(DotGeneral, RejectsBadDimensionNumbers) {
  Array a = zeros({2, 3}), b = zeros({3, 4});
  EXPECT_TRUE(fails_with(
      [&] {
        dot_general(a, zeros({4, 4}), {1}, {0});
      },
      {"dot_general:", "contracting sizes differ", "f32[2,3]", "f32[4,4]", "HINT:"}));
  EXPECT_TRUE(
      fails_with([&] { dot_general(a, b, {2}, {0}); }, {"dot_general:", "axis 2", "out of range"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dot_general(a, b, {1, 1}, {0, 0});
      },
      {"dot_general:", "listed twice"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dot_general(a, b, {1}, {0, 1});
      },
      {"dot_general:", "equal length"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dot_general(zeros({2, 3, 4}), zeros({3, 4, 5}), {2}, {1}, {0}, {0});
      },
      {"dot_general:", "batch sizes differ", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        dot_general(zeros({2, 3}), zeros({2, 3}), {1}, {1}, {0, 1}, {0, 1});
      },
      {"dot_general:", "listed twice"}));
  EXPECT_TRUE(fails_with([&] { dot_general(a, b, {1}, {0}, {}, {}, DType::i32); },
                         {"dot_general:", "preferred_element_type i32", "f32"}));
}

TEST(DotGeneral, PrimitiveRejectsMixedAndBoolDtypes) {
  Array f = zeros({2, 2}), h = zeros({2, 2}, DType::f16), t = full({2, 2}, 1, DType::bool_);
  DotGeneralParams params{{1}, {0}, {}, {}, {}};
  EXPECT_TRUE(fails_with(
      [&] {
        bind1(prim::dot_general, {f, h}, params, CallSite());
      },
      {"dot_general:", "one dtype", "f32[2,2]", "f16[2,2]", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        bind1(prim::dot_general, {t, t}, params, CallSite());
      },
      {"dot_general:", "bool"}));
  EXPECT_TRUE(fails_with(
      [&] {
        bind1(prim::dot_general, {f, f}, DotGeneralParams{{-1}, {0}, {}, {}, {}}, CallSite());
      },
      {"dot_general:", "out of range", "negative"}));
}

// ----- conv2d / conv_general_dilated -----------------------------------------------------

TEST(Conv2d, ValidAndSamePadding) {
  Array x = counting({1, 3, 3, 1}, 1);  // 1..9
  Array w = ones({2, 2, 1, 1});
  Array valid = conv2d(x, w);
  EXPECT_EQ(valid.shape(), (Shape{1, 2, 2, 1}));
  EXPECT_EQ(valid.to_vector<float>(), (std::vector<float>{12, 16, 24, 28}));
  Array same = conv2d(x, ones({3, 3, 1, 1}), {1, 1}, Padding::kSame);
  EXPECT_EQ(same.shape(), (Shape{1, 3, 3, 1}));
  EXPECT_EQ(same.to_vector<float>(), (std::vector<float>{12, 21, 16, 27, 45, 33, 24, 39, 28}));
  // SAME with stride 2 on 4 cells and a 3-tap kernel: 2 outputs, total padding 1, all of it
  // at the end (low = total / 2), as in TensorFlow and JAX.
  Array x4 = counting({1, 4, 4, 1}, 1);
  Array s2 = conv2d(x4, ones({3, 3, 1, 1}), {2, 2}, Padding::kSame);
  EXPECT_EQ(s2.shape(), (Shape{1, 2, 2, 1}));
  expect_near(s2.to_vector<float>(),
              naive_conv(x4, ones({3, 3, 1, 1}), {2, 2}, {0, 0}, {1, 1}, {1, 1}, 1));
}

TEST(Conv2d, StridesDilationAndGroupsMatchANaiveLoop) {
  Array x = pattern({2, 9, 8, 4}, 1);
  struct Config {
    Dims strides;
    Padding padding;
    Dims dilation;
    int64_t groups;
    Shape w;
  };
  std::vector<Config> configs{
      {{2, 2}, Padding::kValid, {1, 1}, 1, Shape{3, 3, 4, 5}},
      {{1, 1}, Padding::kSame, {2, 2}, 1, Shape{3, 3, 4, 3}},
      {{2, 1}, Padding::kSame, {1, 1}, 2, Shape{3, 2, 2, 6}},
      {{1, 1}, Padding::kSame, {1, 1}, 4, Shape{3, 3, 1, 4}},   // depthwise
      {{1, 1}, Padding::kValid, {1, 1}, 1, Shape{1, 1, 4, 7}},  // 1x1
  };
  for (const Config& config : configs) {
    Array w = pattern(config.w, 3);
    Array y = conv2d(x, w, config.strides, config.padding, config.dilation, config.groups);
    Dims low{0, 0}, high{0, 0};
    if (config.padding == Padding::kSame) {
      for (size_t i = 0; i < 2; ++i) {
        int64_t in = x.dim(static_cast<int64_t>(i) + 1), s = config.strides[i];
        int64_t out = (in + s - 1) / s;
        int64_t total = std::max<int64_t>(
            (out - 1) * s + (config.w[static_cast<int64_t>(i)] - 1) * config.dilation[i] + 1 - in,
            0);
        low[i] = total / 2;
        high[i] = total - total / 2;
      }
    }
    expect_near(y.to_vector<float>(),
                naive_conv(x, w, config.strides, low, high, config.dilation, config.groups));
  }
}

TEST(ConvGeneralDilated, InputDilationIsATransposedConvolution) {
  // One input cell per row/column gap: lhs_dilation 2 spreads 2x2 inputs over 3x3.
  Array x = floats({1, 2, 3, 4}, {1, 2, 2, 1});
  Array y = conv_general_dilated(x, ones({1, 1, 1, 1}), {1, 1}, {0, 0}, {0, 0}, {2, 2}, {1, 1});
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 1}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 0, 2, 0, 0, 0, 3, 0, 4}));
  Array z = conv_general_dilated(x, ones({2, 2, 1, 1}), {1, 1}, {1, 1}, {1, 1}, {2, 2}, {1, 1});
  EXPECT_EQ(z.shape(), (Shape{1, 4, 4, 1}));
  EXPECT_EQ(z.to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Conv2d, RejectsBadInputsWithHints) {
  Array x = zeros({1, 5, 5, 3});
  EXPECT_TRUE(fails_with(
      [] {
        conv2d(zeros({5, 5, 3}), zeros({3, 3, 3, 4}));
      },
      {"conv2d:", "rank 4", "f32[5,5,3]", "HINT:", "expand_dims"}));
  EXPECT_TRUE(fails_with([&] { conv2d(x, zeros({3, 3, 3})); }, {"conv2d:", "HWIO", "f32[3,3,3]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv2d(x, zeros({3, 3, 4, 8}));
      },
      {"conv2d:", "3 channels", "f32[3,3,4,8]", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv2d(x, zeros({3, 3, 1, 4}), {1, 1}, Padding::kValid, {1, 1}, 2);
      },
      {"conv2d:", "groups=2", "divide", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv2d(x, zeros({7, 3, 3, 4}));
      },
      {"conv2d:", "7x3", "VALID", "HINT:", "kSame"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv2d(x, zeros({3, 3, 3, 4}), {1, 1}, Padding::kValid, {3, 3});
      },
      {"conv2d:", "dilation", "VALID"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv2d(x, zeros({3, 3, 3, 4}), {0, 1});
      },
      {"conv2d:", "strides", "[0,1]"}));
  EXPECT_TRUE(fails_with(
      [] {
        conv2d(zeros({1, 5, 5, 1}, DType::i32), zeros({3, 3, 1, 1}, DType::i32));
      },
      {"conv_general_dilated:", "floating-point", "HINT:"}));
}

TEST(ConvGeneralDilated, RuleRejectsBadParams) {
  Array x = zeros({1, 5, 5, 4}), w = zeros({3, 3, 2, 6});
  auto call = [&](Dims strides, Dims low, Dims high, Dims lhs_d, Dims rhs_d, int64_t groups) {
    return [=] { conv_general_dilated(x, w, strides, low, high, lhs_d, rhs_d, groups); };
  };
  EXPECT_TRUE(fails_with(call({1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 2),
                         {"conv_general_dilated:", "window_strides", "2 entries"}));
  EXPECT_TRUE(fails_with(call({1, 1}, {0, 0}, {0, 0}, {0, 1}, {1, 1}, 2),
                         {"conv_general_dilated:", "lhs_dilation", "at least 1"}));
  EXPECT_TRUE(fails_with(call({1, 1}, {-2, 0}, {-1, 0}, {1, 1}, {1, 1}, 2),
                         {"conv_general_dilated:", "H axis is empty", "HINT:"}));
  EXPECT_TRUE(fails_with(call({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 1),
                         {"conv_general_dilated:", "input-channel", "HINT:"}));
  EXPECT_TRUE(fails_with(call({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 3),
                         {"conv_general_dilated:", "feature_group_count 3", "divide"}));
  EXPECT_TRUE(fails_with(call({1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 0),
                         {"conv_general_dilated:", "feature_group_count 0"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv_general_dilated(x, zeros({3, 3, 2, 5}), {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 2);
      },
      {"conv_general_dilated:", "output channels"}));
  EXPECT_TRUE(fails_with(
      [&] {
        conv_general_dilated(x, zeros({3, 3, 4, 5}), {1, 1}, {1LL << 40, 0}, {0, 0}, {1, 1}, {1, 1},
                             1);
      },
      {"conv_general_dilated:", "padding_low", "out of range"}));
}

// ----- pooling --------------------------------------------------------------------------

TEST(MaxPool, ValidAndSame) {
  Array x = counting({1, 4, 4, 1}, 0);  // 0..15
  Array y = max_pool(x, {2, 2}, {2, 2});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  Array z = max_pool(counting({1, 3, 3, 1}, 1), {3, 3}, {1, 1}, Padding::kSame);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{5, 6, 6, 8, 9, 9, 8, 9, 9}));
  // Odd sizes floor with VALID, and integers work.
  Array i =
      max_pool(from_host<int32_t>({1, -2, 3, 4, 5, -6, 7, 8, 9, 10}, {1, 2, 5, 1}), {2, 2}, {2, 2});
  EXPECT_EQ(i.shape(), (Shape{1, 1, 2, 1}));
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{7, 9}));
}

TEST(MaxPool, PropagatesNaNPerChannel) {
  Array x = floats({1, NAN, 2, 3, 4, 5, 6, 7}, {1, 2, 2, 2});
  std::vector<float> y = max_pool(x, {2, 2}, {2, 2}).to_vector<float>();
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0], 6);
  EXPECT_TRUE(std::isnan(y[1]));
}

TEST(AvgPool, CountsOnlyCellsInsideTheArray) {
  Array x = counting({1, 4, 4, 1}, 0);
  EXPECT_EQ(avg_pool(x, {2, 2}, {2, 2}).to_vector<float>(),
            (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  Array z = avg_pool(counting({1, 3, 3, 1}, 1), {3, 3}, {1, 1}, Padding::kSame);
  expect_near(z.to_vector<float>(), {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
  // Several images and channels share the counts.
  Array many = avg_pool(pattern({3, 5, 4, 2}, 1), {3, 3}, {2, 2}, Padding::kSame);
  EXPECT_EQ(many.shape(), (Shape{3, 3, 2, 2}));
  Array h =
      avg_pool(astype(counting({1, 3, 3, 1}, 1), DType::bf16), {3, 3}, {1, 1}, Padding::kSame);
  EXPECT_EQ(h.dtype(), DType::bf16);
  expect_near(astype(h, DType::f32).to_vector<float>(), {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
}

TEST(Pooling, RejectsBadInputsWithHints) {
  Array x = zeros({1, 2, 2, 3});
  EXPECT_TRUE(fails_with(
      [&] {
        max_pool(x, {3, 3}, {1, 1});
      },
      {"max_pool:", "3x3 window", "2x2 input", "VALID", "HINT:", "kSame"}));
  EXPECT_TRUE(fails_with([&] { avg_pool(x, {3, 1}, {1, 1}); }, {"avg_pool:", "larger"}));
  EXPECT_TRUE(fails_with(
      [] {
        max_pool(zeros({4, 4, 3}), {2, 2}, {2, 2});
      },
      {"max_pool:", "rank 4", "f32[4,4,3]", "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        max_pool(x, {2, 2, 1}, {2, 2});
      },
      {"max_pool:", "window", "[2,2,1]"}));
  EXPECT_TRUE(fails_with([&] { max_pool(x, {2, 2}, {0, 2}); }, {"max_pool:", "strides"}));
  EXPECT_TRUE(fails_with(
      [] {
        avg_pool(zeros({1, 4, 4, 1}, DType::i32), {2, 2}, {2, 2});
      },
      {"avg_pool:", "floating-point", "HINT:"}));
}

TEST(ReduceWindow, RuleRejectsBadParams) {
  Array x = zeros({2, 3});
  auto bind_max = [&](ReduceWindowParams params) {
    return [=] { bind1(prim::reduce_window_max, {x}, params, CallSite()); };
  };
  EXPECT_TRUE(fails_with(bind_max({{2}, {1}, {0}, {0}}), {"reduce_window_max:", "window_dimensions",
                                                          "one entry per axis", "HINT:"}));
  EXPECT_TRUE(fails_with(bind_max({{0, 1}, {1, 1}, {0, 0}, {0, 0}}),
                         {"reduce_window_max:", "window_dimensions [0,1]", "out of range"}));
  EXPECT_TRUE(fails_with(bind_max({{1, 1}, {1, 0}, {0, 0}, {0, 0}}),
                         {"reduce_window_max:", "window_strides"}));
  EXPECT_TRUE(fails_with(bind_max({{1, 1}, {1, 1}, {-2, 0}, {-1, 0}}),
                         {"reduce_window_max:", "crops more"}));
  Array b = full({2, 2}, 1, DType::bool_);
  EXPECT_TRUE(fails_with(
      [&] {
        bind1(prim::reduce_window_sum, {b}, ReduceWindowParams{{1, 1}, {1, 1}, {0, 0}, {0, 0}},
              CallSite());
      },
      {"reduce_window_sum:", "bool", "HINT:"}));
  // A window larger than the padded axis is an empty output, as in XLA.
  Array empty = bind1(prim::reduce_window_sum, {x},
                      ReduceWindowParams{{3, 1}, {1, 1}, {0, 0}, {0, 0}}, CallSite());
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace kiln
