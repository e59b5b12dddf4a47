// Tests of Dropout: the identity in evaluation and at rate 0, about `rate` of the elements
// zeroed in training with the rest scaled by 1 / (1 - rate), masks fixed by the key, and
// different masks for different Dropout layers fed one key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "nn/module_testing.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;
using ::kiln::testing::values;
using testing::normal_input;

ApplyOptions training(const Array& key) {
  return ApplyOptions{true, key};
}

double zero_fraction(const Array& y) {
  std::vector<double> v = values(y);
  double zeros = 0;
  for (double e : v) zeros += e == 0 ? 1 : 0;
  return zeros / static_cast<double>(v.size());
}

TEST(ModuleDropout, EvaluationAndRateZeroAreTheIdentity) {
  Array x = normal_input(1, {8, 16});
  Module dropout = Dropout(0.5);
  Variables v = dropout.init(random::key(0), x.aval());
  EXPECT_TRUE(v.params.is_none());
  EXPECT_TRUE(v.state.is_none());
  EXPECT_TRUE(same_bits(dropout.apply(v, x).y, x));
  // Rate 0 needs no key even in training.
  EXPECT_TRUE(same_bits(Dropout(0).apply(v, x, training(Array())).y, x));
}

TEST(ModuleDropout, TrainingZeroesAboutRateAndScalesTheRest) {
  Array x = ones({100, 100});
  Module dropout = Dropout(0.3);
  Array y = dropout.apply(Variables{}, x, training(random::key(5))).y;
  EXPECT_NEAR(zero_fraction(y), 0.3, 0.02);
  for (double e : values(y)) {
    if (e != 0) {
      ASSERT_NEAR(e, 1 / 0.7, 1e-6);
    }
  }
  // Rate 1 zeroes everything.
  EXPECT_EQ(zero_fraction(Dropout(1).apply(Variables{}, x, training(random::key(5))).y), 1.0);
}

TEST(ModuleDropout, TheKeyFixesTheMask) {
  Array x = normal_input(2, {64, 32});
  Module dropout = Dropout(0.5);
  Array a = dropout.apply(Variables{}, x, training(random::key(9))).y;
  Array b = dropout.apply(Variables{}, x, training(random::key(9))).y;
  Array c = dropout.apply(Variables{}, x, training(random::key(10))).y;
  EXPECT_TRUE(same_bits(a, b));
  EXPECT_FALSE(same_bits(a, c));
  // The mask is bernoulli(key, 1 - rate) at the root.
  Array keep = random::bernoulli(random::key(9), 0.5, {64, 32});
  EXPECT_TRUE(same_bits(a, where(keep, x * 2.0, zeros_like(x))));
}

TEST(ModuleDropout, LayersInASequentialDrawDifferentMasks) {
  // With independent masks about 1/4 of the elements survive two rate-0.5 dropouts; with
  // one shared mask half would.
  Module model = Sequential({Dropout(0.5), Dropout(0.5)});
  Array x = ones({100, 100});
  Variables v = model.init(random::key(0), x.aval());
  EXPECT_TRUE(v.params.is_none());
  Array y = model.apply(v, x, training(random::key(3))).y;
  EXPECT_NEAR(1 - zero_fraction(y), 0.25, 0.02);
  for (double e : values(y)) {
    if (e != 0) {
      ASSERT_EQ(e, 4.0);
    }
  }
  // Child i gets fold_in(key, i).
  Array first = Dropout(0.5).apply(Variables{}, x, training(random::fold_in(random::key(3), 0))).y;
  Array both =
      Dropout(0.5).apply(Variables{}, first, training(random::fold_in(random::key(3), 1))).y;
  EXPECT_TRUE(same_bits(y, both));
}

TEST(ModuleDropout, MissingKeyInTrainingNamesTheLayer) {
  Module model = Sequential({Dense(4), Dropout(0.25)});
  Array x = normal_input(3, {2, 3});
  Variables v = model.init(random::key(0), x.aval());
  EXPECT_TRUE(fails_with([&] { model.apply(v, x, training(Array())); },
                         {"dropout_1: Dropout(0.25) in training needs a random key", "HINT"}));
  // In evaluation no key is needed.
  EXPECT_NO_THROW(model.apply(v, x));
  EXPECT_TRUE(fails_with([&] { Dropout(1.5); }, {"Dropout: rate must be in [0, 1], got 1.5"}));
  EXPECT_TRUE(fails_with([&] { Dropout(-0.1); }, {"got -0.1"}));
}

}  // namespace
}  // namespace kiln::nn
