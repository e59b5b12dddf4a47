// Tests of the parameter initializers: fans as JAX computes them, the empirical mean and
// standard deviation of large draws against the variance-scaling formulas, bounds,
// determinism under explicit keys, exact constants, and errors for impossible requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/nn/initializers.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;
using ::kiln::testing::values;

struct Moments {
  double mean = 0;
  double stddev = 0;
  double min = 0;
  double max = 0;
};

Moments moments_of(const Array& x) {
  std::vector<double> v = values(x);
  Moments m{.mean = 0, .stddev = 0, .min = v.at(0), .max = v.at(0)};
  for (double e : v) {
    m.mean += e;
    m.min = std::min(m.min, e);
    m.max = std::max(m.max, e);
  }
  m.mean /= static_cast<double>(v.size());
  for (double e : v) m.stddev += (e - m.mean) * (e - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size()));
  return m;
}

TEST(ComputeFans, FollowsJax) {
  Fans dense = compute_fans(Shape{784, 512});
  EXPECT_EQ(dense.fan_in, 784);
  EXPECT_EQ(dense.fan_out, 512);
  Fans conv = compute_fans(Shape{3, 3, 32, 64});  // HWIO: the window multiplies both
  EXPECT_EQ(conv.fan_in, 3 * 3 * 32);
  EXPECT_EQ(conv.fan_out, 3 * 3 * 64);
  Fans bias = compute_fans(Shape{10});
  EXPECT_EQ(bias.fan_in, 10);
  EXPECT_EQ(bias.fan_out, 10);
  Fans scalar = compute_fans(Shape{});
  EXPECT_EQ(scalar.fan_in, 1);
  EXPECT_EQ(scalar.fan_out, 1);
  Fans empty = compute_fans(Shape{0, 5});
  EXPECT_EQ(empty.fan_in, 0);
  EXPECT_EQ(empty.fan_out, 5);
}

TEST(Initializers, ShapesAndDtypes) {
  Array key = random::key(0);
  std::vector<Initializer> all = {
      zeros_init(),
      ones_init(),
      constant_init(0.5),
      truncated_normal(),
      normal_init(),
      glorot_uniform(),
      glorot_normal(),
      he_uniform(),
      he_normal(),
      lecun_uniform(),
      lecun_normal(),
      variance_scaling(0.5, FanMode::kFanOut, Distribution::kUntruncatedNormal)};
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    for (size_t i = 0; i < all.size(); ++i) {
      Array w = all[i](key, Shape{4, 5}, dtype);
      EXPECT_EQ(w.aval(), AbstractValue(Shape({4, 5}), dtype))
          << "initializer " << i << " " << w.aval().to_string();
    }
  }
}

// The empirical standard deviation of 2^17 draws is within 1.5% of the formula (its
// relative standard error is about 0.2%; a missing truncation correction is 12% off), the mean
// within a few standard errors of 0, and the draws inside the distribution's bounds.
struct StatCase {
  std::string name;
  Initializer init;
  Shape shape;
  double stddev;  // expected
  double bound;   // |x| <= bound (infinite for the untruncated normal)
};

TEST(Initializers, EmpiricalMomentsMatchTheFormulas) {
  const Shape dense{512, 256};      // fan_in 512, fan_out 256, fan_avg 384
  const Shape conv{3, 3, 64, 128};  // fan_in 576, fan_out 1152
  auto truncated = [](double s) { return 2 * s / .87962566103423978; };
  auto uniform = [](double s) { return std::sqrt(3.0) * s; };
  const double inf = INFINITY;
  std::vector<StatCase> cases = {
      {"he_normal", he_normal(), dense, std::sqrt(2.0 / 512), truncated(std::sqrt(2.0 / 512))},
      {"he_uniform", he_uniform(), dense, std::sqrt(2.0 / 512), uniform(std::sqrt(2.0 / 512))},
      {"glorot_normal", glorot_normal(), dense, std::sqrt(1.0 / 384),
       truncated(std::sqrt(1.0 / 384))},
      {"glorot_uniform", glorot_uniform(), dense, std::sqrt(1.0 / 384),
       uniform(std::sqrt(1.0 / 384))},
      {"lecun_normal", lecun_normal(), dense, std::sqrt(1.0 / 512),
       truncated(std::sqrt(1.0 / 512))},
      {"lecun_uniform", lecun_uniform(), dense, std::sqrt(1.0 / 512),
       uniform(std::sqrt(1.0 / 512))},
      {"he_normal conv", he_normal(), conv, std::sqrt(2.0 / 576), truncated(std::sqrt(2.0 / 576))},
      {"fan_out untruncated",
       variance_scaling(3, FanMode::kFanOut, Distribution::kUntruncatedNormal), conv,
       std::sqrt(3.0 / 1152), inf},
      {"truncated_normal", truncated_normal(0.02), dense, 0.02, truncated(0.02)},
      {"normal_init", normal_init(0.5), dense, 0.5, inf},
  };
  Array key = random::key(7);
  for (const StatCase& c : cases) {
    Array w = c.init(key, c.shape, DType::f32);
    Moments m = moments_of(w);
    double n = static_cast<double>(c.shape.num_elements());
    EXPECT_NEAR(m.stddev, c.stddev, 0.015 * c.stddev) << c.name;
    EXPECT_NEAR(m.mean, 0, 5 * c.stddev / std::sqrt(n)) << c.name;
    EXPECT_LE(m.max, c.bound * (1 + 1e-6)) << c.name;
    EXPECT_GE(m.min, -c.bound * (1 + 1e-6)) << c.name;
    if (std::isfinite(c.bound)) {
      // The draws reach close to the bounds: the support is not narrower than intended.
      EXPECT_GT(m.max, 0.95 * c.bound) << c.name;
      EXPECT_LT(m.min, -0.95 * c.bound) << c.name;
    }
  }
}

// JAX draws variance-scaling weights as sampler(key) * factor; so does kiln, bit for bit.
TEST(Initializers, DrawLikeJax) {
  Array key = random::key(3);
  Shape shape{20, 30};
  EXPECT_TRUE(same_bits(
      he_normal()(key, shape, DType::f32),
      random::truncated_normal(key, -2, 2, shape) * (std::sqrt(2.0 / 20) / .87962566103423978)));
  EXPECT_TRUE(same_bits(glorot_uniform()(key, shape, DType::f32),
                        random::uniform(key, shape, DType::f32, -1, 1) * std::sqrt(3.0 / 25)));
}

TEST(Initializers, DeterministicUnderExplicitKeys) {
  for (const Initializer& init : {he_normal(), glorot_uniform(), normal_init(1.0)}) {
    Array a = init(random::key(1), Shape{64, 32}, DType::f32);
    Array b = init(random::key(1), Shape{64, 32}, DType::f32);
    Array c = init(random::key(2), Shape{64, 32}, DType::f32);
    EXPECT_TRUE(same_bits(a, b));
    std::vector<double> va = values(a), vc = values(c);
    int64_t equal_count = 0;
    for (size_t i = 0; i < va.size(); ++i) equal_count += va[i] == vc[i];
    EXPECT_LT(equal_count, 4);  // different keys: (almost) every value differs
  }
}

TEST(Initializers, ConstantsAreExact) {
  Array key = random::key(0);
  EXPECT_THAT(values(zeros_init()(key, Shape{2, 3}, DType::f32)), ::testing::Each(0.0));
  EXPECT_THAT(values(ones_init()(key, Shape{4}, DType::f64)), ::testing::Each(1.0));
  EXPECT_THAT(values(constant_init(0.25)(key, Shape{3, 1}, DType::bf16)), ::testing::Each(0.25));
  // Constants need no randomness, so integer dtypes are fine.
  Array counts = zeros_init()(key, Shape{5}, DType::i32);
  EXPECT_EQ(counts.dtype(), DType::i32);
  EXPECT_THAT(values(counts), ::testing::Each(0.0));
}

TEST(Initializers, ScalarAndEmptyShapes) {
  Array key = random::key(0);
  Array scalar_weight = he_normal()(key, Shape{}, DType::f32);  // fans of 1, as JAX
  EXPECT_EQ(scalar_weight.shape(), Shape{});
  EXPECT_TRUE(std::isfinite(scalar_weight.item<double>()));
  Array empty = he_uniform()(key, Shape{0, 8}, DType::f32);
  EXPECT_EQ(empty.shape(), Shape({0, 8}));
}

TEST(Initializers, RandomInitializersNeedAFloatDtype) {
  Array key = random::key(0);
  EXPECT_TRUE(fails_with(
      [&] {
        he_normal()(key, Shape{3, 4}, DType::i32);
      },
      {"he_normal", "i32", "[3,4]", "floating"}));
  EXPECT_TRUE(
      fails_with([&] { glorot_uniform()(key, Shape{2}, DType::u8); }, {"glorot_uniform", "u8"}));
  EXPECT_TRUE(
      fails_with([&] { truncated_normal()(key, Shape{2}, DType::bool_); }, {"truncated_normal"}));
  EXPECT_TRUE(fails_with([&] { normal_init()(key, Shape{2}, DType::i32); }, {"normal_init"}));
}

TEST(Initializers, BadParameters) {
  EXPECT_TRUE(fails_with([] { truncated_normal(-1); },
                         {"truncated_normal", "stddev", "-1", "initializers_test.cc"}));
  EXPECT_TRUE(
      fails_with([] { normal_init(NAN); }, {"normal_init", "stddev", "initializers_test.cc"}));
  EXPECT_TRUE(fails_with([] { variance_scaling(0, FanMode::kFanIn, Distribution::kUniform); },
                         {"variance_scaling", "scale", "positive", "initializers_test.cc"}));
  EXPECT_TRUE(fails_with([] { compute_fans(Shape{-1, 3}); }, {"compute_fans", "[-1,3]"}));
}

}  // namespace
}  // namespace kiln::nn
