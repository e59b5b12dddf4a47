// Tests of softmax cross-entropy: values against torch's formula written out in double
// precision (label smoothing and class weights included), stability with huge logits,
// finite-difference gradient checks in f64, jit equal to eager bit for bit, vmap, and
// errors naming the function and the shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/jit.h"
#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
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
using ::kiln::testing::same_bits;
using ::kiln::testing::values;

// torch.nn.CrossEntropyLoss(weight=w, label_smoothing=s), mean reduction, written out.
double reference_cross_entropy(const Matrix& logits, const std::vector<int>& labels, double s,
                               const std::vector<double>& w) {
  double numerator = 0, denominator = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    std::vector<double> logp = log_softmax_row(logits[i]);
    auto classes = static_cast<double>(logp.size());
    double weight = w.empty() ? 1 : w[static_cast<size_t>(labels[i])];
    double smooth = 0;
    for (size_t c = 0; c < logp.size(); ++c) smooth += -(w.empty() ? 1 : w[c]) * logp[c];
    numerator += (1 - s) * weight * -logp[static_cast<size_t>(labels[i])] + s / classes * smooth;
    denominator += weight;
  }
  return numerator / denominator;
}

// ----- softmax cross-entropy --------------------------------------------------------------
TEST(CrossEntropy, MatchesReference) {
  Array logits = matrix(kLogits), labels = labels_of(kLabels);
  Array weights = from_host<float>({0.5, 2.0, 1.0, 3.0}, {4});
  std::vector<double> w = {0.5, 2.0, 1.0, 3.0};
  for (double s : {0.0, 0.1, 0.3, 1.0}) {
    EXPECT_NEAR(scalar_of(softmax_cross_entropy(logits, labels, {.label_smoothing = s})),
                reference_cross_entropy(kLogits, kLabels, s, {}), 1e-13)
        << "smoothing " << s;
    CrossEntropyOptions weighted;
    weighted.label_smoothing = s;
    weighted.class_weights = weights;
    EXPECT_NEAR(scalar_of(softmax_cross_entropy(logits, labels, weighted)),
                reference_cross_entropy(kLogits, kLabels, s, w), 1e-13)
        << "weighted, smoothing " << s;
  }
  // Per-example losses: one per row, each the reference for that row alone.
  std::vector<double> per_example =
      values(softmax_cross_entropy_per_example(logits, labels, {.label_smoothing = 0.2}));
  ASSERT_EQ(per_example.size(), kLogits.size());
  for (size_t i = 0; i < kLogits.size(); ++i) {
    EXPECT_NEAR(per_example[i], reference_cross_entropy({kLogits[i]}, {kLabels[i]}, 0.2, {}),
                1e-13);
  }
  // f32 logits: the same to f32 precision, and an f32 result.
  Array loss32 = softmax_cross_entropy(matrix(kLogits, DType::f32), labels);
  EXPECT_EQ(loss32.dtype(), DType::f32);
  EXPECT_NEAR(scalar_of(loss32), reference_cross_entropy(kLogits, kLabels, 0, {}), 1e-6);
}

TEST(CrossEntropy, WeightedMeanDividesBySumOfLabelWeights) {
  // Two examples of classes 0 and 1 with weights 1 and 3: (1 * l0 + 3 * l1) / 4.
  Array logits = matrix({{1.0, 0.0}, {0.0, 2.0}});
  Array labels = labels_of({0, 1});
  CrossEntropyOptions options;
  options.class_weights = from_host<double>({1.0, 3.0}, {2});
  double l0 = std::log1p(std::exp(-1.0)), l1 = std::log1p(std::exp(-2.0));
  EXPECT_NEAR(scalar_of(softmax_cross_entropy(logits, labels, options)), (l0 + 3 * l1) / 4, 1e-15);
  EXPECT_THAT(values(softmax_cross_entropy_per_example(logits, labels, options)),
              ::testing::ElementsAre(::testing::DoubleNear(l0, 1e-15),
                                     ::testing::DoubleNear(3 * l1, 1e-15)));
}

TEST(CrossEntropy, LeadingBatchAxes) {
  // logits [2, 3, 4] with labels [2, 3]: the mean over all six examples.
  Matrix rows = {{1, 2, 3, 4}, {0, 0, 0, 0},  {-1, 5, 2, 0},
                 {3, 3, 1, 0}, {9, -9, 0, 1}, {0, 1, 0, 1}};
  std::vector<int> labels = {3, 0, 1, 2, 0, 3};
  Array logits = reshape(matrix(rows), {2, 3, 4});
  Array label_array = reshape(labels_of(labels), {2, 3});
  EXPECT_NEAR(scalar_of(softmax_cross_entropy(logits, label_array, {.label_smoothing = 0.1})),
              reference_cross_entropy(rows, labels, 0.1, {}), 1e-13);
  EXPECT_EQ(softmax_cross_entropy_per_example(logits, label_array).shape(), Shape({2, 3}));
}

TEST(CrossEntropy, StableWithHugeLogits) {
  for (DType dtype : {DType::f32, DType::f64}) {
    // Correct class far ahead: loss 0; far behind: loss 1e4.
    Array logits = matrix({{1e4, 0, 0}, {0, 1e4, -1e4}}, dtype);
    Array labels = labels_of({0, 0});
    std::vector<double> per = values(softmax_cross_entropy_per_example(logits, labels));
    EXPECT_EQ(per[0], 0);
    EXPECT_EQ(per[1], 1e4);
    auto [loss, g] =
        value_and_grad([&](const Array& x) { return softmax_cross_entropy(x, labels); })(logits);
    EXPECT_EQ(loss.item<double>(), 5e3);
    // d mean / d logits = (softmax - one_hot) / batch.
    EXPECT_THAT(values(g), ::testing::ElementsAre(0, 0, 0, -0.5, 0.5, 0));
    // With smoothing: finite, and the reference value (the smoothing term is ~1e4 / 3).
    double smoothed = scalar_of(softmax_cross_entropy(logits, labels, {.label_smoothing = 0.1}));
    Matrix rows = {{1e4, 0, 0}, {0, 1e4, -1e4}};
    EXPECT_NEAR(smoothed, reference_cross_entropy(rows, {0, 0}, 0.1, {}), 1e-2);  // f32: 5e3 * 1e-6
  }
}

TEST(CrossEntropy, OutOfRangeLabelsGiveNan) {
  Array logits = matrix({{1, 2}, {3, 4}, {5, 6}});
  std::vector<double> per =
      values(softmax_cross_entropy_per_example(logits, labels_of({0, 2, -1})));
  EXPECT_FALSE(std::isnan(per[0]));
  EXPECT_TRUE(std::isnan(per[1]));
  EXPECT_TRUE(std::isnan(per[2]));
  EXPECT_TRUE(fails_with(
      [&] {
        check_labels_in_range(labels_of({0, 1, 7}), 2);
      },
      {"check_labels_in_range", "label 7", "flat index 2", "[0, 2)"}));
  EXPECT_NO_THROW(check_labels_in_range(labels_of({0, 1, 1}), 2));
}

TEST(CrossEntropy, OtherLabelDtypes) {
  Array logits = matrix(kLogits);
  double want = reference_cross_entropy(kLogits, kLabels, 0, {});
  for (DType dtype : {DType::u8, DType::i64, DType::u32}) {
    EXPECT_NEAR(scalar_of(softmax_cross_entropy(logits, astype(labels_of(kLabels), dtype))), want,
                1e-13)
        << dtype_name(dtype);
  }
}

TEST(CrossEntropy, GradientsMatchFiniteDifferences) {
  Array logits = matrix(kLogits), labels = labels_of(kLabels);
  CrossEntropyOptions weighted;
  weighted.label_smoothing = 0.15;
  weighted.class_weights = from_host<double>({0.5, 2.0, 1.0, 3.0}, {4});
  GradCheckOptions second;
  second.order = 2;
  EXPECT_NO_THROW(check_grads([&](const Array& x) { return softmax_cross_entropy(x, labels); },
                              std::tuple{logits}, second));
  EXPECT_NO_THROW(
      check_grads([&](const Array& x) { return softmax_cross_entropy(x, labels, weighted); },
                  std::tuple{logits}, second));
  EXPECT_NO_THROW(check_grads(
      [&](const Array& x) { return softmax_cross_entropy_per_example(x, labels, weighted); },
      std::tuple{logits}));
  // The class weights themselves are differentiable too.
  EXPECT_NO_THROW(check_grads(
      [&](const Array& w) {
        CrossEntropyOptions o;
        o.label_smoothing = 0.15;
        o.class_weights = w;
        return softmax_cross_entropy(logits, labels, o);
      },
      std::tuple{weighted.class_weights}));
}

TEST(CrossEntropy, JitMatchesEagerBitForBit) {
  Array logits = matrix(kLogits, DType::f32), labels = labels_of(kLabels);
  CrossEntropyOptions options;
  options.label_smoothing = 0.1;
  options.class_weights = from_host<float>({0.5, 2.0, 1.0, 3.0}, {4});
  auto loss = [options](const Array& x, const Array& y) {
    return softmax_cross_entropy(x, y, options);
  };
  EXPECT_TRUE(same_bits(jit(loss)(logits, labels), loss(logits, labels)));
  auto [value, g] = value_and_grad(loss)(logits, labels);
  auto [jit_value, jit_g] = jit(value_and_grad(loss))(logits, labels);
  EXPECT_TRUE(same_bits(jit_value, value));
  EXPECT_TRUE(same_bits(jit_g, g));
}

TEST(CrossEntropy, Vmaps) {
  // Per-example losses through vmap of the one-example loss equal the batched call.
  Array logits = matrix(kLogits), labels = labels_of(kLabels);
  Array batched = vmap([](const Array& x, const Array& y) {
    return softmax_cross_entropy(reshape(x, {1, -1}), reshape(y, {1}));
  })(logits, labels);
  std::vector<double> want = values(softmax_cross_entropy_per_example(logits, labels));
  std::vector<double> got = values(batched);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15);
}

TEST(CrossEntropy, Errors) {
  Array logits = zeros({8, 10});
  EXPECT_TRUE(fails_with([&] { softmax_cross_entropy(logits, zeros({6}, DType::i32)); },
                         {"softmax_cross_entropy", "i32[6]", "f32[8,10]", "[8]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        softmax_cross_entropy(logits, zeros({8, 10}, DType::i32));
      },
      {"softmax_cross_entropy", "i32[8,10]", "f32[8,10]"}));
  EXPECT_TRUE(fails_with([&] { softmax_cross_entropy(logits, zeros({8}, DType::f32)); },
                         {"softmax_cross_entropy", "labels", "integer", "f32[8]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        softmax_cross_entropy(zeros({8, 10}, DType::i32), zeros({8}, DType::i32));
      },
      {"softmax_cross_entropy", "logits", "floating", "i32[8,10]"}));
  CrossEntropyOptions short_weights;
  short_weights.class_weights = ones({9});
  EXPECT_TRUE(
      fails_with([&] { softmax_cross_entropy(logits, zeros({8}, DType::i32), short_weights); },
                 {"softmax_cross_entropy", "class_weights", "f32[9]", "[10]", "f32[8,10]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        softmax_cross_entropy_per_example(logits, zeros({8}, DType::i32), {.label_smoothing = 1.5});
      },
      {"softmax_cross_entropy_per_example", "label_smoothing", "1.5"}));
  EXPECT_TRUE(fails_with([&] { softmax_cross_entropy(scalar(1.0), scalar(0, DType::i32)); },
                         {"softmax_cross_entropy", "f32[]", "class axis"}));
}

}  // namespace
}  // namespace kiln::nn
