// Tests of the activation functions: values against plain double-precision formulas,
// finite and correct limits (and gradients) at large |x|, finite-difference gradient
// checks in f64, NaN propagation, activation_by_name, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/jit.h"
#include "kiln/nn/activations.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::fails_with;
using ::kiln::testing::same_bits;
using ::kiln::testing::values;

using ArrayFn = std::function<Array(const Array&)>;
using DoubleFn = std::function<double(double)>;

struct Elementwise {
  std::string name;
  ArrayFn fn;
  DoubleFn reference;
  bool kink_at_zero = false;
};

double reference_sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

std::vector<Elementwise> elementwise_cases() {
  const double c = std::sqrt(2 / M_PI);
  return {
      {"relu", [](const Array& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; },
       true},
      {"leaky_relu", [](const Array& x) { return leaky_relu(x, 0.1); },
       [](double x) { return x >= 0 ? x : 0.1 * x; }, true},
      {"elu", [](const Array& x) { return elu(x, 1.5); },
       [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, true},
      {"gelu", [](const Array& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu_tanh", [](const Array& x) { return gelu(x, true); },
       [c](double x) { return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))); }},
      {"silu", [](const Array& x) { return silu(x); },
       [](double x) { return x * reference_sigmoid(x); }},
      {"sigmoid", [](const Array& x) { return sigmoid(x); }, reference_sigmoid},
      {"tanh", [](const Array& x) { return nn::tanh(x); }, [](double x) { return std::tanh(x); }},
      {"softplus", [](const Array& x) { return softplus(x); },
       [](double x) { return x > 30 ? x + std::exp(-x) : std::log1p(std::exp(x)); }},
  };
}

// -12..12 in steps of 0.05 (kinks at exactly 0 included: the values are defined there).
std::vector<double> sample_points() {
  std::vector<double> points;
  for (int i = -240; i <= 240; ++i) points.push_back(i * 0.05);
  for (double x : {-40.0, -25.0, 25.0, 40.0, 1e-8, -1e-8}) points.push_back(x);
  return points;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " at index " << i;
  }
}

TEST(Activations, ValuesMatchDoublePrecisionFormulas) {
  std::vector<double> points = sample_points();
  for (const Elementwise& c : elementwise_cases()) {
    std::vector<double> want;
    for (double x : points) want.push_back(c.reference(x));
    Array x64 = from_host<double>(points, Shape{static_cast<int64_t>(points.size())});
    expect_close(values(c.fn(x64)), want, 1e-13, 1e-15, c.name + " f64");
    Array y32 = c.fn(astype(x64, DType::f32));
    EXPECT_EQ(y32.dtype(), DType::f32) << c.name;
    // f32: a few ulps of the result, plus the input's own rounding times the slope.
    expect_close(values(y32), want, 4e-6, 1e-6, c.name + " f32");
  }
}

// Row-wise softmax of a [3, 5] matrix computed in double.
std::vector<double> reference_softmax(const std::vector<double>& x, int64_t rows, int64_t cols,
                                      bool log_space) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY;
    for (int64_t k = 0; k < cols; ++k) m = std::max(m, x[r * cols + k]);
    double total = 0;
    for (int64_t k = 0; k < cols; ++k) total += std::exp(x[r * cols + k] - m);
    for (int64_t k = 0; k < cols; ++k) {
      double shifted = x[r * cols + k] - m;
      out[r * cols + k] = log_space ? shifted - std::log(total) : std::exp(shifted) / total;
    }
  }
  return out;
}

TEST(Activations, SoftmaxMatchesDoublePrecision) {
  std::vector<double> x = {0.5, -1.25, 3.0, 2.0, 0.0, -7.5, 2.5,  2.5, 1.0, -0.5,
                           100, 99,    -3,  0,   101, 1e3,  -1e3, 0,   5,   0.25};
  Array a = from_host<double>(x, Shape{4, 5});
  expect_close(values(softmax(a)), reference_softmax(x, 4, 5, false), 1e-14, 1e-16, "softmax");
  expect_close(values(log_softmax(a)), reference_softmax(x, 4, 5, true), 1e-14, 1e-13,
               "log_softmax");
  // Along axis 0: the same as along the last axis of the transpose.
  std::vector<double> xt(20);
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 5; ++k) xt[k * 4 + r] = x[r * 5 + k];
  }
  expect_close(values(transpose(softmax(a, 0))), reference_softmax(xt, 5, 4, false), 1e-14, 1e-16,
               "softmax axis 0");
  expect_close(values(transpose(log_softmax(a, -2))), reference_softmax(xt, 5, 4, true), 1e-14,
               1e-13, "log_softmax axis -2");
  // Rows sum to 1 in f32 too.
  for (double row_sum : values(sum(softmax(astype(a, DType::f32)), {1}))) {
    EXPECT_NEAR(row_sum, 1, 1e-6);
  }
}

// Values at large |x|, where a naive formula overflows or gives inf - inf.
struct Limit {
  std::string name;
  ArrayFn fn;
  double x;
  double value;
  double slope;  // the derivative there
};

TEST(Activations, StableAtLargeMagnitudes) {
  std::vector<Limit> limits;
  auto add = [&](std::string name, ArrayFn fn, std::vector<std::array<double, 3>> rows) {
    for (auto [x, value, slope] : rows) limits.push_back({name, fn, x, value, slope});
  };
  const double big = 1e30;
  // At 0 the slope is sigmoid(0) = 1/2 (the kinks of the stable form's max and min cancel).
  add("softplus", [](const Array& x) { return softplus(x); },
      {{1e4, 1e4, 1},
       {-1e4, 0, 0},
       {88, 88, 1},
       {100, 100, 1},
       {big, big, 1},
       {-big, 0, 0},
       {0, std::log(2.0), 0.5}});
  add("sigmoid", [](const Array& x) { return sigmoid(x); },
      {{1e4, 1, 0}, {-1e4, 0, 0}, {100, 1, 0}, {-100, 0, 0}, {big, 1, 0}, {-big, 0, 0}});
  add("gelu", [](const Array& x) { return gelu(x); },
      {{1e4, 1e4, 1}, {-1e4, 0, 0}, {100, 100, 1}, {-100, 0, 0}, {big, big, 1}, {-big, 0, 0}});
  add("gelu_tanh", [](const Array& x) { return gelu(x, true); },
      {{1e4, 1e4, 1}, {-1e4, 0, 0}, {100, 100, 1}, {-100, 0, 0}, {big, big, 1}, {-big, 0, 0}});
  add("elu", [](const Array& x) { return elu(x, 0.5); },
      {{1e4, 1e4, 1},
       {-1e4, -0.5, 0},
       {88, 88, 1},
       {-88, -0.5, 0},
       {big, big, 1},
       {-big, -0.5, 0}});
  add("silu", [](const Array& x) { return silu(x); },
      {{1e4, 1e4, 1}, {-1e4, 0, 0}, {100, 100, 1}, {big, big, 1}, {-big, 0, 0}});
  add("tanh", [](const Array& x) { return nn::tanh(x); },
      {{1e4, 1, 0}, {-1e4, -1, 0}, {big, 1, 0}, {-big, -1, 0}});
  add("relu", [](const Array& x) { return relu(x); }, {{big, big, 1}, {-big, 0, 0}});
  add("leaky_relu", [](const Array& x) { return leaky_relu(x); },
      {{big, big, 1}, {-big, -1e28, 0.01}});
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Limit& l : limits) {
      std::string what = l.name + "(" + std::to_string(l.x) + ") " + std::string(dtype_name(dtype));
      Array x = scalar(l.x, dtype);
      auto [y, dy] = value_and_grad([&](const Array& v) { return l.fn(v); })(x);
      double value = y.item<double>(), slope = dy.item<double>();
      ASSERT_TRUE(std::isfinite(value)) << what;
      ASSERT_TRUE(std::isfinite(slope)) << what;
      // Exact up to the dtype's rounding of the inputs and results.
      double tolerance = dtype == DType::f32 ? 1e-6 : 1e-15;
      EXPECT_NEAR(value, l.value, tolerance * std::max(1.0, std::abs(l.value))) << what;
      EXPECT_NEAR(slope, l.slope, tolerance) << what;
    }
  }
  // softplus(-100) is e^-100, not 0 and not NaN.
  EXPECT_NEAR(softplus(scalar(-100.0, DType::f64)).item<double>(), std::exp(-100.0), 1e-55);
}

TEST(Activations, SoftmaxStableWithHugeLogits) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Array x = astype(from_host<double>({1e4, 0, -1e30, 1e30}, Shape{2, 2}), dtype);
    // Up to f32's rounding of 1e30.
    expect_close(values(log_softmax(x)), {0, -1e4, -2e30, 0}, 1e-7, 0, "log_softmax");
    EXPECT_THAT(values(softmax(x)), ::testing::ElementsAre(1, 0, 0, 1));
    // d sum(log_softmax) / dx = 1 - classes * softmax.
    Array g = grad([](const Array& v) { return sum(log_softmax(v)); })(x);
    EXPECT_THAT(values(g), ::testing::ElementsAre(-1, 1, 1, -1));
    // A row of one large value and many equal ones.
    Array y = astype(from_host<double>({88, 88, 88, -1e4}, Shape{4}), dtype);
    std::vector<double> p = values(softmax(y));
    EXPECT_NEAR(p[0], 1.0 / 3, 1e-6);
    EXPECT_EQ(p[3], 0);
  }
}

// Points away from the kinks of relu, leaky_relu and elu (at 0) and of the clamp inside
// gelu_tanh (at +-10).
TEST(Activations, GradientsMatchFiniteDifferences) {
  Array x = from_host<double>({-3.1, -1.7, -0.6, -0.2, 0.3, 0.9, 1.4, 2.8, 4.5, -6.0}, Shape{2, 5});
  for (const Elementwise& c : elementwise_cases()) {
    // Second order too for the smooth ones (relu's second derivative is 0 on both sides).
    GradCheckOptions options;
    options.order = 2;
    EXPECT_NO_THROW(check_grads(c.fn, std::tuple{x}, options)) << c.name;
  }
  GradCheckOptions options;
  options.order = 2;
  for (int64_t axis : {0, 1, -1}) {
    EXPECT_NO_THROW(
        check_grads([axis](const Array& v) { return softmax(v, axis); }, std::tuple{x}, options))
        << "softmax axis " << axis;
    EXPECT_NO_THROW(check_grads([axis](const Array& v) { return log_softmax(v, axis); },
                                std::tuple{x}, options))
        << "log_softmax axis " << axis;
  }
}

// The check is a real test: a wrong derivative fails it.
TEST(Activations, GradientCheckCatchesAWrongDerivative) {
  Array x = from_host<double>({-1.5, 0.5, 2.0}, Shape{3});
  auto wrong = custom_vjp(
      "wrong_softplus",
      [](const Array& v) {
        return std::pair{softplus(v), std::vector{v}};
      },
      [](const std::vector<Array>& saved, const Array& g) { return g * sigmoid(saved[0]) * 1.01; });
  EXPECT_THROW(check_grads(wrong, std::tuple{x}), Error);
}

TEST(Activations, NanPropagates) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Array x = astype(from_host<double>({NAN, 1.0, -1.0}, Shape{3}), dtype);
    for (const Elementwise& c : elementwise_cases()) {
      std::vector<double> y = values(c.fn(x));
      EXPECT_TRUE(std::isnan(y[0])) << c.name;
      EXPECT_FALSE(std::isnan(y[1])) << c.name;
      EXPECT_FALSE(std::isnan(y[2])) << c.name;
    }
    Array rows = astype(from_host<double>({NAN, 1, 2, 0, 1, 2}, Shape{2, 3}), dtype);
    for (Array result : {softmax(rows), log_softmax(rows)}) {
      std::vector<double> y = values(result);
      for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(y[k]));   // the row with the NaN
      for (int k = 3; k < 6; ++k) EXPECT_FALSE(std::isnan(y[k]));  // the other row
    }
  }
}

TEST(Activations, ReluGradientAtZeroIsZero) {
  Array g = grad([](const Array& v) { return sum(relu(v)); })(from_host<float>({0, 2, -2}, {3}));
  EXPECT_THAT(values(g), ::testing::ElementsAre(0, 1, 0));
}

TEST(Activations, KeepTheInputDtype) {
  Array x = from_host<float>({-1, 0, 1}, {3});
  for (DType dtype : {DType::bf16, DType::f16, DType::f32, DType::f64}) {
    Array xd = astype(x, dtype);
    for (const Elementwise& c : elementwise_cases()) EXPECT_EQ(c.fn(xd).dtype(), dtype) << c.name;
    EXPECT_EQ(softmax(xd).dtype(), dtype);
    EXPECT_EQ(log_softmax(xd).dtype(), dtype);
  }
}

TEST(Activations, TraceBatchAndJit) {
  Array x = random::normal(random::key(1), {4, 6}, DType::f32) * 3.0;
  auto f = [](const Array& v) { return gelu(log_softmax(v) + silu(v)) + softplus(v); };
  Array eager = f(x);
  EXPECT_TRUE(same_bits(jit(f)(x), eager));
  // vmap over rows is the same as the row-wise call (softmax's axis -1 is per row).
  Array batched = vmap([](const Array& row) { return log_softmax(row); })(x);
  std::vector<double> want = values(log_softmax(x)), got = values(batched);
  expect_close(got, want, 1e-6, 1e-6, "vmap log_softmax");
}

TEST(Activations, ByName) {
  Array x = from_host<double>({-2.0, -0.5, 0.0, 0.5, 3.0}, Shape{5});
  struct Named {
    std::string name;
    Array want;
  };
  std::vector<Named> named = {
      {"relu", relu(x)},       {"leaky_relu", leaky_relu(x)}, {"elu", elu(x)},
      {"gelu", gelu(x)},       {"gelu_tanh", gelu(x, true)},  {"silu", silu(x)},
      {"sigmoid", sigmoid(x)}, {"tanh", nn::tanh(x)},         {"softplus", softplus(x)},
      {"identity", x}};
  for (const Named& n : named) {
    EXPECT_TRUE(same_bits(activation_by_name(n.name)(x), n.want)) << n.name;
  }
  EXPECT_FALSE(same_bits(activation_by_name("gelu")(x), gelu(x, true)));
}

TEST(Activations, Errors) {
  EXPECT_TRUE(
      fails_with([] { activation_by_name("gleu"); },
                 {"activation_by_name", "unknown activation 'gleu'", "did you mean 'gelu'"}));
  EXPECT_TRUE(fails_with([] { activation_by_name("ReLU"); }, {"did you mean 'relu'"}));
  EXPECT_TRUE(fails_with([] { activation_by_name("swish"); }, {"'swish'", "silu"}));
  Array ints = from_host<int32_t>({1, 2}, {2});
  EXPECT_TRUE(fails_with([&] { relu(ints); }, {"nn::relu", "floating-point", "i32[2]"}));
  EXPECT_TRUE(fails_with([&] { gelu(ints); }, {"nn::gelu", "i32[2]"}));
  EXPECT_TRUE(fails_with([&] { softmax(ints); }, {"nn::softmax", "i32[2]"}));
  Array m = zeros({2, 3});
  EXPECT_TRUE(fails_with([&] { softmax(m, 2); }, {"nn::softmax", "axis 2", "f32[2,3]"}));
  EXPECT_TRUE(fails_with([&] { log_softmax(m, -3); }, {"nn::log_softmax", "axis -3"}));
  EXPECT_TRUE(fails_with([&] { log_softmax(scalar(1.0)); }, {"nn::log_softmax", "f32[]"}));
  EXPECT_TRUE(fails_with([&] { sigmoid(Array()); }, {"nn::sigmoid", "empty"}));
}

}  // namespace
}  // namespace kiln::nn
