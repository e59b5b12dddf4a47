// Tests of the normalisation layers against values computed here by hand: BatchNorm's batch
// statistics in training and the running-statistic update (unbiased variance, as PyTorch),
// its running statistics in evaluation; LayerNorm and RMSNorm over the last axis.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/module_testing.h"
#include "support/arrays.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::same_bits;
using ::kiln::testing::values;
using testing::all_close;
using testing::normal_input;

constexpr double kEps = 1e-5;

struct Stats {
  std::vector<double> mean, var;  // per feature; var biased
};

// Statistics over every axis but the last of row-major values with `features` columns.
Stats feature_stats(const std::vector<double>& xs, int64_t features) {
  size_t f = static_cast<size_t>(features);
  size_t n = xs.size() / f;
  Stats s{std::vector<double>(f, 0), std::vector<double>(f, 0)};
  for (size_t i = 0; i < xs.size(); ++i) s.mean[i % f] += xs[i] / static_cast<double>(n);
  for (size_t i = 0; i < xs.size(); ++i) {
    double d = xs[i] - s.mean[i % f];
    s.var[i % f] += d * d / static_cast<double>(n);
  }
  return s;
}

TEST(ModuleNorm, BatchNormTrainingUsesBatchStatisticsAndMovesRunningOnes) {
  Array x = normal_input(1, {2, 3, 2, 4}) * 2.0 + 1.0;
  Module bn = BatchNorm(0.8);
  Variables v = bn.init(random::key(0), x.aval());
  EXPECT_EQ(v.params.to_string(), "{bias: f32[4], scale: f32[4]}");
  EXPECT_EQ(v.state.to_string(), "{mean: f32[4], var: f32[4]}");
  EXPECT_EQ(values(v.state["mean"].leaf()), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(v.state["var"].leaf()), std::vector<double>(4, 1.0));
  // Non-trivial scale and bias.
  Array scale = from_host<float>({1, 2, 0.5, -1}, {4});
  Array bias = from_host<float>({0, 1, -1, 3}, {4});
  v.params = Tree::dict({{"scale", scale}, {"bias", bias}});
  ApplyResult r = bn.apply(v, x, ApplyOptions{true, Array()});

  std::vector<double> xs = values(x), sc = values(scale), bi = values(bias);
  Stats s = feature_stats(xs, 4);
  std::vector<double> expected;
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t f = i % 4;
    expected.push_back((xs[i] - s.mean[f]) / std::sqrt(s.var[f] + kEps) * sc[f] + bi[f]);
  }
  EXPECT_TRUE(all_close(r.y, expected, 1e-4, 1e-4));
  // running = 0.8 * running + 0.2 * batch, the batch variance unbiased (n = 12).
  std::vector<double> mean, var;
  for (size_t f = 0; f < 4; ++f) {
    mean.push_back(0.2 * s.mean[f]);
    var.push_back(0.8 * 1.0 + 0.2 * s.var[f] * 12.0 / 11.0);
  }
  EXPECT_TRUE(all_close(r.state["mean"].leaf(), mean));
  EXPECT_TRUE(all_close(r.state["var"].leaf(), var));
}

TEST(ModuleNorm, BatchNormEvaluationUsesRunningStatistics) {
  Array x = normal_input(2, {5, 3});
  Module bn = BatchNorm();
  Array running_mean = from_host<float>({0.5, -1, 2}, {3});
  Array running_var = from_host<float>({4, 0.25, 1}, {3});
  Variables v = bn.init(random::key(0), x.aval());
  v.state = Tree::dict({{"mean", running_mean}, {"var", running_var}});
  ApplyResult r = bn.apply(v, x);
  // The state comes back unchanged.
  EXPECT_TRUE(same_bits(r.state["mean"].leaf(), running_mean));
  EXPECT_TRUE(same_bits(r.state["var"].leaf(), running_var));
  std::vector<double> xs = values(x), m = {0.5, -1, 2}, var = {4, 0.25, 1}, expected;
  for (size_t i = 0; i < xs.size(); ++i) {
    expected.push_back((xs[i] - m[i % 3]) / std::sqrt(var[i % 3] + kEps));
  }
  EXPECT_TRUE(all_close(r.y, expected));
  // Training on the same batch gives a different output (batch statistics).
  Array trained = bn.apply(v, x, ApplyOptions{true, Array()}).y;
  EXPECT_FALSE(all_close(trained, expected));
  // Its output has per-feature mean 0 and variance ~1.
  Stats s = feature_stats(values(trained), 3);
  for (size_t f = 0; f < 3; ++f) {
    EXPECT_NEAR(s.mean[f], 0, 1e-5);
    EXPECT_NEAR(s.var[f], 1, 1e-3);
  }
}

TEST(ModuleNorm, BatchNormWithoutScaleOrBiasHasOnlyState) {
  Module bn = BatchNorm(0.9, NormOptions{1e-3, false, false});
  Variables v = bn.init(random::key(0), AbstractValue({8, 2}, DType::f32));
  EXPECT_TRUE(v.params.is_none());
  EXPECT_EQ(v.state.to_string(), "{mean: f32[2], var: f32[2]}");
  Array x = normal_input(3, {8, 2});
  std::vector<double> xs = values(x), expected;
  Stats s = feature_stats(xs, 2);
  for (size_t i = 0; i < xs.size(); ++i) {
    expected.push_back((xs[i] - s.mean[i % 2]) / std::sqrt(s.var[i % 2] + 1e-3));
  }
  EXPECT_TRUE(all_close(bn.apply(v, x, ApplyOptions{true, Array()}).y, expected, 1e-4, 1e-5));
}

TEST(ModuleNorm, LayerNormOverTheLastAxis) {
  Array x = normal_input(4, {3, 5}) * 3.0;
  Module ln = LayerNorm();
  Variables v = ln.init(random::key(0), x.aval());
  EXPECT_EQ(v.params.to_string(), "{bias: f32[5], scale: f32[5]}");
  EXPECT_TRUE(v.state.is_none());
  Array scale = normal_input(5, {5});
  Array bias = normal_input(6, {5});
  v.params = Tree::dict({{"scale", scale}, {"bias", bias}});
  std::vector<double> xs = values(x), sc = values(scale), bi = values(bias), expected;
  for (size_t row = 0; row < 3; ++row) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < 5; ++j) mean += xs[row * 5 + j] / 5;
    for (size_t j = 0; j < 5; ++j) var += (xs[row * 5 + j] - mean) * (xs[row * 5 + j] - mean) / 5;
    for (size_t j = 0; j < 5; ++j) {
      expected.push_back((xs[row * 5 + j] - mean) / std::sqrt(var + kEps) * sc[j] + bi[j]);
    }
  }
  // Training and evaluation are the same for LayerNorm.
  EXPECT_TRUE(all_close(ln.apply(v, x).y, expected, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(ln.apply(v, x, ApplyOptions{true, Array()}).y, expected, 1e-4, 1e-5));
}

TEST(ModuleNorm, RMSNormScalesByTheRootMeanSquare) {
  Array x = normal_input(7, {2, 3, 4}) + 0.5;
  Module rms = RMSNorm();
  Variables v = rms.init(random::key(0), x.aval());
  EXPECT_EQ(v.params.to_string(), "{scale: f32[4]}");
  Array scale = from_host<float>({1, -2, 0.5, 3}, {4});
  v.params = Tree::dict({{"scale", scale}});
  std::vector<double> xs = values(x), sc = {1, -2, 0.5, 3}, expected;
  for (size_t row = 0; row < 6; ++row) {
    double ms = 0;
    for (size_t j = 0; j < 4; ++j) ms += xs[row * 4 + j] * xs[row * 4 + j] / 4;
    for (size_t j = 0; j < 4; ++j)
      expected.push_back(xs[row * 4 + j] / std::sqrt(ms + kEps) * sc[j]);
  }
  EXPECT_TRUE(all_close(rms.apply(v, x).y, expected, 1e-4, 1e-5));
  EXPECT_TRUE(
      RMSNorm(NormOptions{1e-6, false, true}).init(random::key(0), x.aval()).params.is_none());
}

}  // namespace
}  // namespace kiln::nn
