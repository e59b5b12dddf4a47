// Tests of the other losses: binary cross-entropy with logits (pos_weight), MSE, Huber,
// focal loss and margin ranking, against double-precision formulas, at huge logits,
// against finite differences in f64, and their errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "nn/loss_testing.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::nn::loss_testing::kLabels;
using ::kiln::nn::loss_testing::kLogits;
using ::kiln::nn::loss_testing::labels_of;
using ::kiln::nn::loss_testing::log_softmax_row;
using ::kiln::nn::loss_testing::matrix;
using ::kiln::nn::loss_testing::Matrix;
using ::kiln::nn::loss_testing::scalar_of;
using ::kiln::testing::fails_with;
using ::kiln::testing::values;

// ----- binary cross-entropy with logits ------------------------------------------------------
double reference_bce(const std::vector<double>& x, const std::vector<double>& y,
                     const std::vector<double>& pos_weight, size_t columns) {
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double pw = pos_weight.empty() ? 1 : pos_weight[pos_weight.size() == 1 ? 0 : i % columns];
    double p = 1 / (1 + std::exp(-x[i]));
    total += -(pw * y[i] * std::log(p) + (1 - y[i]) * std::log(1 - p));
  }
  return total / static_cast<double>(x.size());
}

TEST(BinaryCrossEntropy, MatchesReference) {
  std::vector<double> x = {0.3, -1.2, 2.5, -0.1, 4.0, -3.0}, y = {1, 0, 0.25, 1, 0, 0.9};
  Array logits = from_host<double>(x, {2, 3}), targets = from_host<double>(y, {2, 3});
  EXPECT_NEAR(scalar_of(binary_cross_entropy_with_logits(logits, targets)),
              reference_bce(x, y, {}, 3), 1e-14);
  EXPECT_NEAR(scalar_of(binary_cross_entropy_with_logits(logits, targets,
                                                         from_host<double>({2.0, 0.5, 3.0}, {3}))),
              reference_bce(x, y, {2.0, 0.5, 3.0}, 3), 1e-14);
  EXPECT_NEAR(scalar_of(binary_cross_entropy_with_logits(logits, targets, scalar(4.0, DType::f64))),
              reference_bce(x, y, {4.0}, 3), 1e-14);
  // f32 targets with f64 logits are fine (targets take the logits' dtype).
  EXPECT_NEAR(scalar_of(binary_cross_entropy_with_logits(logits, astype(targets, DType::f32))),
              reference_bce(x, y, {}, 3), 1e-7);
}

TEST(BinaryCrossEntropy, StableWithHugeLogits) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Array logits = astype(from_host<double>({1e4, -1e4, 1e4, -1e4}, {4}), dtype);
    Array targets = astype(from_host<double>({1, 0, 0, 1}, {4}), dtype);
    // Right with confidence: 0; wrong: 1e4 each. Mean (0 + 0 + 1e4 + 1e4) / 4.
    auto [loss, g] = value_and_grad([&](const Array& x) {
      return binary_cross_entropy_with_logits(x, targets, scalar(2.0, dtype));
    })(logits);
    // pos_weight 2 doubles the wrong positive: (1e4 + 2e4) / 4.
    EXPECT_EQ(loss.item<double>(), 7500);
    // d/dx = ((1 + (pw - 1) y) sigmoid(x) - pw y) / n = [0, 0, 1/4, -2/4].
    EXPECT_THAT(values(g), ::testing::ElementsAre(0, 0, 0.25, -0.5));
  }
}

TEST(BinaryCrossEntropy, GradientsMatchFiniteDifferences) {
  Array logits = from_host<double>({0.3, -1.2, 2.5, -0.1, 4.0, -3.0}, {2, 3});
  Array targets = from_host<double>({1, 0, 0.25, 1, 0, 0.9}, {2, 3});
  Array pw = from_host<double>({2.0, 0.5, 3.0}, {3});
  GradCheckOptions second;
  second.order = 2;
  EXPECT_NO_THROW(
      check_grads([&](const Array& x, const Array& t,
                      const Array& w) { return binary_cross_entropy_with_logits(x, t, w); },
                  std::tuple{logits, targets, pw}, second));
}

TEST(BinaryCrossEntropy, Errors) {
  Array logits = zeros({4, 3});
  EXPECT_TRUE(fails_with(
      [&] {
        binary_cross_entropy_with_logits(logits, zeros({4, 1}));
      },
      {"binary_cross_entropy_with_logits", "f32[4,3]", "f32[4,1]", "same shape"}));
  EXPECT_TRUE(fails_with(
      [&] {
        binary_cross_entropy_with_logits(logits, zeros({4, 3}, DType::i32));
      },
      {"binary_cross_entropy_with_logits", "targets", "i32[4,3]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        binary_cross_entropy_with_logits(logits, zeros({4, 3}), ones({4}));
      },
      {"binary_cross_entropy_with_logits", "pos_weight", "f32[4]", "[3]"}));
}

// ----- regression losses -----------------------------------------------------------------------
TEST(RegressionLosses, MatchReference) {
  std::vector<double> p = {1.0, -2.0, 0.5, 3.0, 0.0, -0.25}, t = {0.5, 1.0, 0.5, -1.0, 0.9, 0.0};
  Array predictions = from_host<double>(p, {3, 2}), targets = from_host<double>(t, {3, 2});
  double squares = 0;
  for (size_t i = 0; i < p.size(); ++i) squares += (p[i] - t[i]) * (p[i] - t[i]);
  EXPECT_NEAR(scalar_of(mse(predictions, targets)), squares / 6, 1e-15);
  for (double delta : {0.5, 1.0, 2.0}) {
    double total = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      double e = std::abs(p[i] - t[i]);
      total += e <= delta ? 0.5 * e * e : delta * (e - 0.5 * delta);
    }
    EXPECT_NEAR(scalar_of(huber(predictions, targets, delta)), total / 6, 1e-15) << delta;
  }
}

TEST(RegressionLosses, GradientsMatchFiniteDifferences) {
  // Errors away from +-delta, where Huber's second derivative jumps.
  Array predictions = from_host<double>({1.0, -2.0, 0.7, 3.0, 0.0, -0.25}, {3, 2});
  Array targets = from_host<double>({0.5, 1.0, 0.5, -1.0, 0.9, 0.0}, {3, 2});
  GradCheckOptions second;
  second.order = 2;
  EXPECT_NO_THROW(check_grads([](const Array& a, const Array& b) { return mse(a, b); },
                              std::tuple{predictions, targets}, second));
  EXPECT_NO_THROW(check_grads([](const Array& a, const Array& b) { return huber(a, b, 1.0); },
                              std::tuple{predictions, targets}, second));
}

TEST(RegressionLosses, Errors) {
  EXPECT_TRUE(fails_with(
      [] {
        mse(zeros({4}), zeros({4, 1}));
      },
      {"nn::mse", "f32[4]", "f32[4,1]", "same shape"}));
  EXPECT_TRUE(fails_with(
      [] {
        huber(zeros({2, 3}), zeros({3, 2}));
      },
      {"nn::huber", "f32[2,3]", "f32[3,2]"}));
  EXPECT_TRUE(fails_with([] { huber(zeros({2}), zeros({2}), 0.0); }, {"nn::huber", "delta"}));
  EXPECT_TRUE(fails_with([] { mse(zeros({2}, DType::i32), zeros({2})); },
                         {"nn::mse", "predictions", "i32[2]"}));
}

// ----- focal loss --------------------------------------------------------------------------------
double reference_focal(const Matrix& logits, const std::vector<int>& labels, double gamma,
                       double alpha) {
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    double logp = log_softmax_row(logits[i])[static_cast<size_t>(labels[i])];
    total += -alpha * std::pow(1 - std::exp(logp), gamma) * logp;
  }
  return total / static_cast<double>(logits.size());
}

TEST(FocalLoss, MatchesReference) {
  Array logits = matrix(kLogits), labels = labels_of(kLabels);
  for (double gamma : {0.0, 0.5, 1.0, 2.0, 2.5}) {
    EXPECT_NEAR(scalar_of(focal_loss(logits, labels, gamma, 0.25)),
                reference_focal(kLogits, kLabels, gamma, 0.25), 1e-14)
        << gamma;
  }
  // gamma 0, alpha 1 is the cross-entropy.
  EXPECT_NEAR(scalar_of(focal_loss(logits, labels, 0, 1)),
              scalar_of(softmax_cross_entropy(logits, labels)), 1e-15);
}

TEST(FocalLoss, StableWithHugeLogitsAndGradients) {
  Array labels = labels_of({0, 0});
  for (double gamma : {0.0, 0.5, 2.0, 2.5}) {
    Array logits = matrix({{1e4, 0, 0}, {0, 1e4, 0}}, DType::f32);
    auto [loss, g] =
        value_and_grad([&](const Array& x) { return focal_loss(x, labels, gamma); })(logits);
    // Example 0 is certain and right (0), example 1 certain and wrong (1e4, modulation 1).
    EXPECT_EQ(loss.item<double>(), 5e3) << gamma;
    for (double v : values(g)) EXPECT_TRUE(std::isfinite(v)) << gamma;
  }
  Array logits = matrix(kLogits), fine_labels = labels_of(kLabels);
  GradCheckOptions second;
  second.order = 2;
  for (double gamma : {0.0, 1.0, 2.0, 2.5}) {
    EXPECT_NO_THROW(
        check_grads([&](const Array& x) { return focal_loss(x, fine_labels, gamma, 0.5); },
                    std::tuple{logits}, second))
        << gamma;
  }
}

TEST(FocalLoss, Errors) {
  EXPECT_TRUE(fails_with(
      [] {
        focal_loss(zeros({4, 3}), zeros({3}, DType::i32));
      },
      {"nn::focal_loss", "i32[3]", "f32[4,3]"}));
  EXPECT_TRUE(fails_with(
      [] {
        focal_loss(zeros({4, 3}), zeros({4}, DType::i32), -1);
      },
      {"nn::focal_loss", "gamma"}));
}

// ----- margin ranking --------------------------------------------------------------------------
TEST(MarginRanking, MatchesReferenceAndGradients) {
  std::vector<double> a = {1.0, 0.2, -0.5, 2.0}, b = {0.5, 0.9, -0.4, 3.0}, y = {1, -1, 1, -1};
  Array x1 = from_host<double>(a, {4}), x2 = from_host<double>(b, {4});
  Array sign = from_host<int32_t>({1, -1, 1, -1}, {4});
  for (double margin : {0.0, 0.3}) {
    double total = 0;
    for (size_t i = 0; i < a.size(); ++i) total += std::max(0.0, -y[i] * (a[i] - b[i]) + margin);
    EXPECT_NEAR(scalar_of(margin_ranking(x1, x2, sign, margin)), total / 4, 1e-15) << margin;
    EXPECT_NEAR(scalar_of(margin_ranking(x1, x2, from_host<double>(y, {4}), margin)), total / 4,
                1e-15);
  }
  // Away from the hinge (no example has -y (x1 - x2) + 0.3 == 0).
  EXPECT_NO_THROW(
      check_grads([&](const Array& p, const Array& q) { return margin_ranking(p, q, sign, 0.3); },
                  std::tuple{x1, x2}));
}

TEST(MarginRanking, Errors) {
  EXPECT_TRUE(fails_with([] { margin_ranking(zeros({4}), zeros({5}), ones({4})); },
                         {"nn::margin_ranking", "f32[4]", "f32[5]"}));
  EXPECT_TRUE(fails_with(
      [] {
        margin_ranking(zeros({4}), zeros({4}), ones({4, 1}));
      },
      {"nn::margin_ranking", "y", "f32[4,1]"}));
  EXPECT_TRUE(fails_with([] { margin_ranking(zeros({2}), zeros({2}), zeros({2}, DType::bool_)); },
                         {"nn::margin_ranking", "bool[2]"}));
}

}  // namespace
}  // namespace kiln::nn
