// Tests of the classification metrics: accuracy and correct counts against a count done
// by hand, the confusion matrix against a double loop, their behaviour under jit, and
// errors naming the function and the shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kiln/jit.h"
#include "kiln/nn/losses.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::values;

TEST(Metrics, AccuracyAndCorrectCount) {
  // argmax per row: 2, 0, 1, 1, 0 (ties go to the first maximum).
  Array logits = from_host<float>({0.1f, 0.2f, 0.9f, 3, -1, 2, 0, 5, 5, -2, 1, 0, 7, 7, 7}, {5, 3});
  Array labels = from_host<int32_t>({2, 0, 2, 1, 0}, {5});
  Array acc = accuracy(logits, labels);
  EXPECT_EQ(acc.aval(), AbstractValue(Shape{}, DType::f32));
  EXPECT_FLOAT_EQ(acc.item<float>(), 4.0f / 5);
  Array count = correct_count(logits, labels);
  EXPECT_EQ(count.aval(), AbstractValue(Shape{}, DType::i32));
  EXPECT_EQ(count.item<int32_t>(), 4);
  // Leading batch axes and other label dtypes.
  Array grid = reshape(logits, {5, 1, 3});
  EXPECT_EQ(correct_count(grid, reshape(astype(labels, DType::u8), {5, 1})).item<int32_t>(), 4);
  EXPECT_EQ(correct_count(logits, astype(labels, DType::i64)).item<int32_t>(), 4);
}

TEST(Metrics, ConfusionMatrixMatchesADoubleLoop) {
  constexpr int64_t classes = 4, n = 200;
  Array truth = astype(random::uniform(random::key(5), {n}, DType::f32, 0, classes), DType::i32);
  Array guess = astype(random::uniform(random::key(6), {n}, DType::f32, 0, classes), DType::i32);
  std::vector<int32_t> t = truth.to_vector<int32_t>(), g = guess.to_vector<int32_t>();
  std::vector<double> want(classes * classes, 0);
  for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(t[i] * classes + g[i])] += 1;
  Array matrix = confusion_matrix(guess, truth, classes);
  EXPECT_EQ(matrix.aval(), AbstractValue(Shape({classes, classes}), DType::i32));
  EXPECT_EQ(values(matrix), want);
  EXPECT_EQ(sum(matrix).item<int32_t>(), n);
  // From scores: the prediction is the argmax of the last axis.
  Array scores = one_hot(guess, classes, DType::f32) * 3.0;
  EXPECT_EQ(values(confusion_matrix(scores, truth, classes)), want);
  // Jitted, the same counts.
  auto jitted = jit([](const Array& p, const Array& l) { return confusion_matrix(p, l, classes); });
  EXPECT_EQ(values(jitted(guess, truth)), want);
}

TEST(Metrics, ConfusionMatrixRowsAreTruthColumnsPredictions) {
  Array predictions = from_host<int32_t>({1, 1, 0, 2}, {4});
  Array labels = from_host<int32_t>({0, 1, 0, 0}, {4});
  EXPECT_THAT(values(confusion_matrix(predictions, labels, 3)),
              ::testing::ElementsAre(1, 1, 1,  // true 0: predicted 0, 1, 2 once each
                                     0, 1, 0,  // true 1: predicted 1
                                     0, 0, 0));
  // Out-of-range classes count nowhere rather than corrupting another cell.
  Array odd = from_host<int32_t>({5, 1, -1, 2}, {4});
  EXPECT_THAT(values(confusion_matrix(odd, labels, 3)),
              ::testing::ElementsAre(0, 0, 1, 0, 1, 0, 0, 0, 0));
}

TEST(Metrics, Errors) {
  Array logits = zeros({4, 3});
  EXPECT_TRUE(fails_with([&] { accuracy(logits, zeros({5}, DType::i32)); },
                         {"nn::accuracy", "i32[5]", "f32[4,3]", "[4]"}));
  EXPECT_TRUE(fails_with([&] { correct_count(logits, zeros({4})); },
                         {"nn::correct_count", "labels", "integer", "f32[4]"}));
  EXPECT_TRUE(
      fails_with([&] { confusion_matrix(zeros({4}, DType::i32), zeros({5}, DType::i32), 3); },
                 {"nn::confusion_matrix", "i32[4]", "i32[5]"}));
  EXPECT_TRUE(fails_with([&] { confusion_matrix(logits, zeros({4}, DType::i32), 0); },
                         {"nn::confusion_matrix", "num_classes", "0"}));
  EXPECT_TRUE(fails_with([&] { confusion_matrix(logits, zeros({3}, DType::i32), 3); },
                         {"nn::confusion_matrix", "f32[4,3]", "i32[3]"}));
}

}  // namespace
}  // namespace kiln::nn
