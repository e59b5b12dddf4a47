// Forward mode through the public API: jvp, linearize, jacfwd, jacrev, hessian and
// check_grads' forward option, through control flow, under jit and vmap, and the errors
// for what forward mode refuses. Each primitive's JVP rule is checked against finite
// differences in the op table (tests/prims/op_table.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/array_functions.h"
#include "kiln/control_flow.h"
#include "kiln/jit.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::f64;
using ::kiln::testing::values;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using ::testing::Pointwise;

MATCHER_P(NearlyEquals, tolerance, "") {
  return std::fabs(std::get<0>(arg) - std::get<1>(arg)) <= tolerance;
}

TEST(Jvp, OfSinTimesXIsItsDerivativeAlongTheTangent) {
  auto f = [](const Array& x) { return sin(x) * x; };
  std::vector<double> xs{0.3, -1.2, 2.0};
  Array x = f64(xs, {3}), t = f64({1, 0.5, -2}, {3});
  auto [y, dy] = jvp(f, std::tuple{x}, std::tuple{t});
  std::vector<double> ts{1, 0.5, -2}, expected;
  for (size_t i = 0; i < 3; ++i) {
    expected.push_back((std::cos(xs[i]) * xs[i] + std::sin(xs[i])) * ts[i]);
  }
  EXPECT_THAT(values(dy), Pointwise(NearlyEquals(1e-15), expected));
  EXPECT_THAT(values(y), Pointwise(NearlyEquals(1e-15), values(f(x))));
}

TEST(Jvp, OfSeveralArgumentsAndPytreesSumsTheirDirections) {
  // f(w, (a, b)) = (w * a, sum(w * b)): d = tw * a + w * ta, sum(tw * b + w * tb).
  auto f = [](const Array& w, const std::pair<Array, Array>& ab) {
    return std::pair{w * ab.first, sum(w * ab.second)};
  };
  Array w = f64({1, 2}, {2}), a = f64({3, 4}, {2}), b = f64({5, 6}, {2});
  Array tw = f64({0.5, -1}, {2}), ta = f64({1, 1}, {2}), tb = f64({0, 2}, {2});
  auto [y, dy] = jvp(f, std::tuple{w, std::pair{a, b}}, std::tuple{tw, std::pair{ta, tb}});
  EXPECT_EQ(values(dy.first), (std::vector<double>{0.5 * 3 + 1 * 1, -1 * 4 + 2 * 1}));
  EXPECT_DOUBLE_EQ(dy.second.item<double>(), 0.5 * 5 + 1 * 0 + -1 * 6 + 2 * 2);
  EXPECT_EQ(values(y.first), (std::vector<double>{3, 8}));
}

TEST(Jvp, IntegerArgumentsAndStaticArgumentsTakeNoTangent) {
  auto f = [](const Array& x, const Array& index, double scale) { return take(x, index) * scale; };
  Array x = f64({1, 2, 3}, {3});
  Array index = from_host<int32_t>({2, 0}, {2});
  Array t = f64({10, 20, 30}, {3});
  auto [y, dy] = jvp(f, std::tuple{x, index, 2.0}, std::tuple{t, index, 2.0});
  EXPECT_EQ(values(dy), (std::vector<double>{60, 20}));
}

TEST(Jvp, ResultsThatDoNotDependOnTheInputsGetZeroTangents) {
  auto f = [](const Array& x) { return std::pair{argmax(x, 0), x * 0.0 + stop_gradient(x)}; };
  Array x = f64({1, 3, 2}, {3});
  auto [y, dy] = jvp(f, std::tuple{x}, std::tuple{f64({1, 1, 1}, {3})});
  EXPECT_EQ(values(dy.second), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(dy.first.dtype(), y.first.dtype());
  EXPECT_EQ(values(dy.first), (std::vector<double>{0}));
}

TEST(Jvp, LinearizeAppliesTheSameDerivativeToManyTangents) {
  auto f = [](const Array& x) { return exp(x) * sum(x); };
  Array x = f64({0.1, 0.2, -0.3}, {3});
  auto [y, f_jvp] = linearize(f, x);
  for (const std::vector<double>& direction :
       {std::vector<double>{1, 0, 0}, {0, 1, 0}, {0.5, -0.5, 2}}) {
    Array t = f64(direction, {3});
    auto [y2, expected] = jvp(f, std::tuple{x}, std::tuple{t});
    EXPECT_THAT(values(f_jvp(t)), Pointwise(NearlyEquals(1e-15), values(expected)));
  }
  EXPECT_THAT(values(y), Pointwise(NearlyEquals(0), values(f(x))));
}

TEST(Jvp, AgreesWithReverseModeOnAnMlpInF64) {
  // <u, J v> by forward mode equals <J^T u, v> by reverse mode.
  auto mlp = [](const Array& w1, const Array& w2, const Array& x) {
    return logsumexp(matmul(tanh(matmul(x, w1)), w2), {1});
  };
  Array w1 = astype(random::normal(random::key(1), {4, 5}), DType::f64);
  Array w2 = astype(random::normal(random::key(2), {5, 3}), DType::f64);
  Array x = astype(random::normal(random::key(3), {6, 4}), DType::f64);
  Array t1 = astype(random::normal(random::key(4), {4, 5}), DType::f64);
  Array t2 = astype(random::normal(random::key(5), {5, 3}), DType::f64);
  Array u = astype(random::normal(random::key(6), {6}), DType::f64);
  auto [y, dy] = jvp(mlp, std::tuple{w1, w2, x}, std::tuple{t1, t2, zeros_like(x)});
  auto [y2, pullback] = vjp(mlp, w1, w2, x);
  auto [g1, g2, gx] = pullback(u);
  double forward = sum(u * dy).item<double>();
  double reverse = (sum(g1 * t1) + sum(g2 * t2)).item<double>();
  EXPECT_NEAR(forward, reverse, 1e-12 * std::fabs(reverse) + 1e-14);
  EXPECT_NO_THROW(check_grads(mlp, std::tuple{w1, w2, x}, {.order = 2, .forward = true}));
}

TEST(Jvp, ThroughScanCondAndWhileLoop) {
  // scan: the running product; its tangent by the product rule.
  auto product = [](const Array& xs) {
    auto step = [](const Array& carry, const Array& x) { return std::pair{carry * x, carry}; };
    return scan(step, scalar(1.0, DType::f64), xs).first;
  };
  Array xs = f64({2, 3, 0.5}, {3});
  Array t = f64({1, 0, 2}, {3});
  // d(x0 x1 x2) = t0 x1 x2 + x0 t1 x2 + x0 x1 t2 = 1.5 + 0 + 12
  EXPECT_DOUBLE_EQ(jvp(product, std::tuple{xs}, std::tuple{t}).second.item<double>(), 13.5);

  auto branch = [](const Array& x) {
    return cond(
        sum(x) > 0.0, [](const Array& v) { return v * v; }, [](const Array& v) { return sin(v); },
        x);
  };
  Array positive = f64({1, 2}, {2}), negative = f64({-1, -2}, {2});
  Array ones = f64({1, 1}, {2});
  EXPECT_EQ(values(jvp(branch, std::tuple{positive}, std::tuple{ones}).second),
            (std::vector<double>{2, 4}));
  EXPECT_THAT(values(jvp(branch, std::tuple{negative}, std::tuple{ones}).second),
              ElementsAre(DoubleNear(std::cos(-1.0), 1e-15), DoubleNear(std::cos(-2.0), 1e-15)));

  // while_loop: doubles x until it passes 100 (x = 3: six times, 96 -> 192): dy/dx = 64.
  // Reverse mode refuses while_loop; forward mode needs nothing reversed.
  auto doubling = [](const Array& x) {
    return while_loop([](const Array& v) { return v < 100.0; },
                      [](const Array& v) { return v * 2.0; }, x);
  };
  Array three = scalar(3.0, DType::f64);
  auto [y, dy] = jvp(doubling, std::tuple{three}, std::tuple{scalar(1.0, DType::f64)});
  EXPECT_DOUBLE_EQ(y.item<double>(), 192);
  EXPECT_DOUBLE_EQ(dy.item<double>(), 64);
  EXPECT_DOUBLE_EQ(jacfwd(doubling)(three).item<double>(), 64);
}

TEST(Jvp, ThroughCheckpointAndForwardOverReverseThroughScan) {
  // kiln's own custom functions (a checkpoint; the saved values of scan's VJP) are
  // differentiated through their forward computation.
  auto cell = [](const Array& x) { return sin(x) * x; };
  Array x = f64({0.4, -0.9}, {2}), t = f64({1, 2}, {2});
  auto plain = jvp(cell, std::tuple{x}, std::tuple{t}).second;
  auto remat = jvp(checkpoint(cell), std::tuple{x}, std::tuple{t}).second;
  EXPECT_THAT(values(remat), Pointwise(NearlyEquals(0), values(plain)));

  auto loss = [](const Array& w) {
    auto step = [&](const Array& carry, const Array& x) {
      Array next = tanh(carry * w + x);
      return std::pair{next, next};
    };
    return sum(scan(step, zeros_like(w), f64({0.1, 0.2, 0.3, -0.4}, {2, 2})).second);
  };
  Array w = f64({0.7, -0.3}, {2});
  EXPECT_NO_THROW(check_grads(loss, std::tuple{w}, {.order = 2, .forward = true}));
  Array h = hessian(loss)(w);
  // A Hessian is symmetric.
  std::vector<double> entries = values(h);
  EXPECT_NEAR(entries[1], entries[2], 1e-14);
}

TEST(Jvp, UnderJitAndVmapMatchesEager) {
  auto f = [](const Array& x) { return tanh(x) * sum(x * x); };
  Array x = f64({0.1, -0.4, 0.7}, {3}), t = f64({1, 2, 3}, {3});
  auto eager = jvp(f, std::tuple{x}, std::tuple{t}).second;
  auto jitted = jit([&](const Array& a, const Array& b) {
    return jvp(f, std::tuple{a}, std::tuple{b}).second;
  })(x, t);
  EXPECT_THAT(values(jitted), Pointwise(NearlyEquals(1e-15), values(eager)));
  // vmap over tangents: one directional derivative per row.
  Array rows = f64({1, 2, 3, 0, 0, 1}, {2, 3});
  Array batched = vmap([&](const Array& direction) {
    return jvp(f, std::tuple{x}, std::tuple{direction}).second;
  })(rows);
  EXPECT_THAT(values(batched).at(0), DoubleNear(values(eager).at(0), 1e-15));
}

TEST(Jacobian, ForwardAndReverseAgreeAndALinearMapIsItsMatrix) {
  Array a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  auto linear = [&](const Array& x) { return matmul(a, x); };
  Array x = f64({0.5, -1, 2}, {3});
  EXPECT_EQ(values(jacfwd(linear)(x)), values(a));
  EXPECT_EQ(values(jacrev(linear)(x)), values(a));
  EXPECT_EQ(jacfwd(linear)(x).shape(), (Shape{2, 3}));

  auto f = [](const Array& w, const Array& v) { return tanh(matmul(v, w)); };
  Array w = astype(random::normal(random::key(7), {3, 2}), DType::f64);
  Array v = astype(random::normal(random::key(8), {4, 3}), DType::f64);
  Array forward = jacfwd(f)(w, v), reverse = jacrev(f)(w, v);
  EXPECT_EQ(forward.shape(), (Shape{4, 2, 3, 2}));
  EXPECT_THAT(values(forward), Pointwise(NearlyEquals(1e-14), values(reverse)));
  EXPECT_EQ(jacrev<1>(f)(w, v).shape(), (Shape{4, 2, 4, 3}));
}

TEST(Jacobian, HessianOfLogSumExpIsDiagPMinusPPTranspose) {
  std::vector<double> xs{0.2, -0.5, 1.0};
  Array x = f64(xs, {3});
  Array h = hessian([](const Array& v) { return logsumexp(v); })(x);
  ASSERT_EQ(h.shape(), (Shape{3, 3}));
  double total = std::exp(0.2) + std::exp(-0.5) + std::exp(1.0);
  std::vector<double> expected;
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) {
      double pi = std::exp(xs[i]) / total, pj = std::exp(xs[j]) / total;
      expected.push_back((i == j ? pi : 0) - pi * pj);
    }
  }
  EXPECT_THAT(values(h), Pointwise(NearlyEquals(1e-15), expected));
}

TEST(Jacobian, EmptyArgumentsGiveEmptyJacobians) {
  auto f = [](const Array& x) { return x * 2.0; };
  Array empty = f64({}, {0});
  EXPECT_EQ(jacfwd(f)(empty).shape(), (Shape{0, 0}));
  EXPECT_EQ(jacrev(f)(empty).shape(), (Shape{0, 0}));
  Array scalar_x = scalar(3.0, DType::f64);
  EXPECT_DOUBLE_EQ(jacfwd(f)(scalar_x).item<double>(), 2);
  EXPECT_DOUBLE_EQ(jacrev(f)(scalar_x).item<double>(), 2);
}

TEST(JvpErrors, TangentsMustMatchThePrimals) {
  auto f = [](const Array& x) { return x * x; };
  Array x = f64({1, 2}, {2});
  EXPECT_THAT(error_of([&] { jvp(f, std::tuple{x}, std::tuple{astype(x, DType::f32)}); }),
              HasSubstr("jvp: the tangent for leaf 0 of the arguments is f32[2], but the primal "
                        "is f64[2]"));
  EXPECT_THAT(error_of([&] {
                jvp(f, std::tuple{x}, std::tuple{f64({1, 2, 3}, {3})});
              }),
              HasSubstr("is f64[3], but the primal is f64[2]"));
  auto pair_f = [](const std::vector<Array>& xs) { return xs[0]; };
  EXPECT_THAT(
      error_of([&] {
        jvp(pair_f, std::tuple{std::vector<Array>{x, x}}, std::tuple{std::vector<Array>{x}});
      }),
      HasSubstr("jvp: the tangent has structure ([*]), but the primal has structure "
                "([*, *])"));
  auto [y, f_jvp] = linearize(f, x);
  EXPECT_THAT(error_of([&] { f_jvp(astype(x, DType::f32)); }),
              HasSubstr("linearize: the tangent for leaf 0"));
}

TEST(JvpErrors, JacobiansNeedFloatArgumentsAndFloatResults) {
  Array counts = from_host<int32_t>({1, 2}, {2});
  EXPECT_THAT(error_of([&] { jacfwd([](const Array& x) { return x * 2; })(counts); }),
              HasSubstr("jacfwd: cannot differentiate with respect to i32[2], which is not a "
                        "floating-point array"));
  Array x = f64({1, 2}, {2});
  EXPECT_THAT(error_of([&] { jacrev([](const Array& v) { return argmax(v, 0); })(x); }),
              HasSubstr("jacrev: the function's result is i32[], not floating point"));
  EXPECT_THAT(error_of([&] { jacfwd([](const Array& v) { return argmax(v, 0); })(x); }),
              HasSubstr("jacfwd: the function's result is i32[], not floating point"));
}

TEST(JvpErrors, CustomVjpFunctionsAreRefusedAsInJax) {
  auto softplus = custom_vjp(
      "softplus",
      [](const Array& x) {
        return std::pair{log1p(exp(x)), std::vector<Array>{x}};
      },
      [](const std::vector<Array>& saved, const Array& g) { return g * logistic(saved[0]); });
  Array x = f64({0.5}, {1});
  std::string text = error_of([&] { jvp(softplus, std::tuple{x}, std::tuple{x}); });
  EXPECT_THAT(text, HasSubstr("forward-mode differentiation (jvp, linearize, jacfwd, hessian) of "
                              "a custom_vjp function is not supported"));
  EXPECT_THAT(text, HasSubstr("use grad, vjp or jacrev"));
  // jacrev is reverse mode, so it works.
  EXPECT_THAT(values(jacrev(softplus)(x)),
              ElementsAre(DoubleNear(1 / (1 + std::exp(-0.5)), 1e-15)));
}

TEST(JvpErrors, CheckGradsForwardReportsWhatForwardModeRefuses) {
  // What forward mode refuses comes back from check_grads as the same clear error.
  auto softplus = custom_vjp(
      "softplus2",
      [](const Array& x) {
        return std::pair{log1p(exp(x)), std::vector<Array>{x}};
      },
      [](const std::vector<Array>& saved, const Array& g) { return g * logistic(saved[0]); });
  Array x = f64({0.5, 1.5}, {2});
  EXPECT_NO_THROW(check_grads(softplus, std::tuple{x}));
  EXPECT_THAT(error_of([&] { check_grads(softplus, std::tuple{x}, {.forward = true}); }),
              HasSubstr("custom_vjp function is not supported"));
}

}  // namespace
}  // namespace kiln
