// grad, value_and_grad, vjp and stop_gradient through the public API, including gradients
// of gradients and the errors for what cannot be differentiated.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/control_flow.h"
#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {
using ::kiln::testing::f64;

using testing::error_of;
using ::testing::HasSubstr;

TEST(Grad, OfASumOfSquaresIsTwiceTheInput) {
  auto f = [](const Array& x) { return sum(x * x); };
  Array x = f64({1, -2, 3}, {3});
  EXPECT_EQ(grad(f)(x).to_vector<double>(), (std::vector<double>{2, -4, 6}));
}

TEST(Grad, ValueAndGradWithRespectToEachArgument) {
  auto f = [](const Array& w, const Array& x) { return sum(w * x + w); };
  Array w = f64({1, 2}, {2}), x = f64({3, 4}, {2});
  auto [value, dw] = value_and_grad(f)(w, x);
  EXPECT_DOUBLE_EQ(value.item<double>(), 1 * 3 + 1 + 2 * 4 + 2);
  EXPECT_EQ(dw.to_vector<double>(), (std::vector<double>{4, 5}));
  EXPECT_EQ(grad<1>(f)(w, x).to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(Grad, BroadcastingOperandsGetSummedCotangents) {
  auto f = [](const Array& bias, const Array& x) { return sum((x + bias) * (x + bias)); };
  Array bias = f64({0.5, -1}, {2}), x = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  // d/db sum((x+b)^2) = 2 * sum over rows of (x + b)
  EXPECT_EQ(grad(f)(bias, x).to_vector<double>(),
            (std::vector<double>{2 * (1.5 + 3.5 + 5.5), 2 * (1 + 3 + 5)}));
}

TEST(Grad, SecondDerivativeOfSinIsMinusSin) {
  auto f = [](const Array& x) { return sum(sin(x)); };
  auto df = [&](const Array& x) { return sum(grad(f)(x)); };
  Array x = f64({0.3, 1.1}, {2});
  std::vector<double> second = grad(df)(x).to_vector<double>();
  EXPECT_NEAR(second[0], -std::sin(0.3), 1e-15);
  EXPECT_NEAR(second[1], -std::sin(1.1), 1e-15);
}

TEST(Grad, HessianVectorProduct) {
  // f(x) = sum(x^3): H = diag(6x), so H v = 6 x v.
  auto f = [](const Array& x) { return sum(x * x * x); };
  Array x = f64({1, 2, 3}, {3}), v = f64({1, 0.5, -1}, {3});
  auto directional = [&](const Array& y) { return sum(grad(f)(y) * v); };
  EXPECT_EQ(grad(directional)(x).to_vector<double>(), (std::vector<double>{6, 6, -18}));
}

TEST(Grad, StopGradientBlocksTheFlow) {
  auto f = [](const Array& x) { return sum(x * stop_gradient(x)); };
  Array x = f64({2, 3}, {2});
  EXPECT_EQ(grad(f)(x).to_vector<double>(), (std::vector<double>{2, 3}));
  EXPECT_EQ(stop_gradient(x).to_vector<double>(), (std::vector<double>{2, 3}));
}

TEST(Grad, HasAuxReturnsTheAuxiliaryValueUndifferentiated) {
  auto f = [](const Array& x) { return std::make_pair(sum(x * x), x * 10.0); };
  Array x = f64({1, 2}, {2});
  auto [value_aux, dx] = value_and_grad(f, HasAux{})(x);
  EXPECT_DOUBLE_EQ(value_aux.first.item<double>(), 5);
  EXPECT_EQ(value_aux.second.to_vector<double>(), (std::vector<double>{10, 20}));
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{2, 4}));
}

TEST(Vjp, PullsBackAnArbitraryCotangent) {
  auto f = [](const Array& x, const Array& y) { return x * y; };
  Array x = f64({1, 2}, {2}), y = f64({3, 4}, {2});
  auto [out, pullback] = vjp(f, x, y);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{3, 8}));
  auto [gx, gy] = pullback(f64({1, -1}, {2}));
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{3, -4}));
  EXPECT_EQ(gy.to_vector<double>(), (std::vector<double>{1, -2}));
}

TEST(Vjp, StaticArgumentsPassThrough) {
  auto f = [](const Array& x, double scale) { return x * scale; };
  auto [out, pullback] = vjp(f, f64({1, 2}, {2}), 3.0);
  auto [gx, scale] = pullback(f64({1, 1}, {2}));
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_EQ(scale, 3.0);
}

TEST(GradErrors, NonScalarOutput) {
  auto f = [](const Array& x) { return x * 2.0; };
  std::string text = error_of([&] { grad(f)(f64({1, 2}, {2})); });
  EXPECT_THAT(
      text, HasSubstr("grad: the function must return a scalar floating-point Array, got f64[2]"));
  EXPECT_THAT(text, HasSubstr("HINT:"));
}

TEST(GradErrors, IntegerInputNamesTheType) {
  auto f = [](const Array& x) { return sum(astype(x, DType::f32)); };
  std::string text = error_of([&] { grad(f)(from_host<int32_t>({1, 2}, {2})); });
  EXPECT_THAT(text, HasSubstr("cannot differentiate with respect to i32[2]"));
  EXPECT_THAT(text, HasSubstr("HINT:"));
}

TEST(GradErrors, NonDifferentiablePrimitiveNamesItAndTheCallSite) {
  auto f = [](const Array& x) { return sum(astype(x > 0.0, DType::f64) * x); };
  // Comparisons have no derivative, but no gradient has to flow through one here: fine.
  EXPECT_EQ(grad(f)(f64({-1, 2}, {2})).to_vector<double>(), (std::vector<double>{0, 1}));
  auto g = [](const Array& x) {
    return sum(astype(bitwise_and(astype(x, DType::i32), astype(x, DType::i32)), DType::f64));
  };
  // Integer casts cut the flow as well, so this is zero rather than an error.
  EXPECT_EQ(grad(g)(f64({1, 2}, {2})).to_vector<double>(), (std::vector<double>{0, 0}));
}

TEST(GradErrors, TracedValueUsedAfterItsTransformation) {
  Array leaked;
  auto f = [&](const Array& x) {
    leaked = x * 2.0;
    return sum(x);
  };
  grad(f)(f64({1}, {1}));
  std::string text = error_of([&] { (void)(leaked + 1.0); });
  EXPECT_THAT(text, HasSubstr("traced value"));
}

TEST(CheckGrads, PassesForCorrectRulesAndSecondOrder) {
  auto f = [](const Array& x, const Array& y) { return sum(tanh(x * y) + exp(x) / y); };
  Array x = f64({0.3, -0.7, 1.2}, {3}), y = f64({1.5, 0.8, 2.0}, {3});
  EXPECT_NO_THROW(check_grads(f, std::tuple{x, y}, {.order = 2}));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CustomVjp, UsesTheGivenBackwardRule) {
  int backward_calls = 0;
  auto softplus = custom_vjp(
      "softplus",
      [](const Array& x) {
        return std::pair{log1p(exp(x)), std::vector<Array>{x}};
      },
      [&backward_calls](const std::vector<Array>& saved, const Array& g) {
        ++backward_calls;
        return g * logistic(saved[0]);
      });
  Array x = from_host<double>({-1, 0, 2}, {3});
  EXPECT_NEAR(softplus(x).to_vector<double>()[2], std::log1p(std::exp(2.0)), 1e-15);
  Array dx = grad([&](const Array& v) { return sum(softplus(v)); })(x);
  EXPECT_EQ(backward_calls, 1);
  std::vector<double> values = dx.to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    double v = std::vector<double>{-1, 0, 2}[static_cast<size_t>(i)];
    EXPECT_NEAR(values[static_cast<size_t>(i)], 1 / (1 + std::exp(-v)), 1e-15);
  }
  TracedProgram traced = make_program([&](const Array& v) { return softplus(v); }, x);
  EXPECT_THAT(traced.to_string(), HasSubstr("custom_vjp_call[name=\"softplus\""));
  EXPECT_NO_THROW(check_grads([&](const Array& v) { return sum(softplus(v) * v); }, std::tuple{x}));
}

TEST(CustomVjp, WrongCotangentShapeIsAClearError) {
  auto bad = custom_vjp(
      "bad",
      [](const Array& x) {
        return std::pair{x * 2.0, std::vector<Array>{}};
      },
      [](const std::vector<Array>&, const Array& g) { return sum(g); });
  Array x = from_host<double>({1, 2}, {2});
  std::string text = error_of([&] { grad([&](const Array& v) { return sum(bad(v)); })(x); });
  EXPECT_THAT(text,
              HasSubstr("custom_vjp 'bad': the backward function returned a f64[] cotangent"));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

TEST(GradTrees, GradientOfATreeHasItsStructure) {
  Tree params = Tree::dict({{"w", from_host<double>({1, 2}, {2})},
                            {"layers", Tree::list({from_host<double>({3}, {1})})}});
  auto loss = [](const Tree& p, const Array& x) {
    return sum(p["w"].leaf() * x) + sum(p["layers"][0].leaf() * p["layers"][0].leaf());
  };
  Array x = from_host<double>({5, 7}, {2});
  Tree g = grad(loss)(params, x);
  EXPECT_EQ(g.structure(), params.structure());
  EXPECT_EQ(g["w"].leaf().to_vector<double>(), (std::vector<double>{5, 7}));
  EXPECT_EQ(g["layers"][0].leaf().to_vector<double>(), (std::vector<double>{6}));
  auto [value, g2] = value_and_grad(loss)(params, x);
  EXPECT_DOUBLE_EQ(value.item<double>(), 5 + 14 + 9);
  EXPECT_EQ(g2.leaves_with_paths()[0].first, "layers/0");
}

TEST(GradTrees, TreeResultsTraceAndPullBack) {
  auto f = [](const Array& x) { return Tree::dict({{"double", x * 2.0}, {"square", x * x}}); };
  Array x = from_host<double>({3}, {1});
  auto [out, pullback] = vjp(f, x);
  EXPECT_EQ(out["square"].leaf().to_vector<double>(), (std::vector<double>{9}));
  Tree cotangent = Tree::dict(
      {{"double", from_host<double>({1}, {1})}, {"square", from_host<double>({10}, {1})}});
  auto [dx] = pullback(cotangent);
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{2 + 10 * 2 * 3}));
  EXPECT_THAT(make_program(f, x).to_string(), HasSubstr("mul a 2.0:f64[]"));
}

TEST(GradTrees, MismatchedCotangentStructureIsAnError) {
  auto f = [](const Array& x) { return Tree::dict({{"a", x}, {"b", x}}); };
  Array x = from_host<double>({3}, {1});
  auto [out, pullback] = vjp(f, x);
  Tree wrong = Tree::dict({{"a", x}});
  std::string text = error_of([&] { (void)pullback(wrong); });
  EXPECT_THAT(text, HasSubstr("vjp"));
  EXPECT_THAT(text, HasSubstr("{a: *, b: *}"));
}

TEST(GradArgnums, SeveralArgnumsGiveATupleInTheOrderNamed) {
  auto f = [](const Array& w, const Array& b, const Array& x) { return sum(w * x + b * b); };
  Array w = from_host<double>({1, 2}, {2}), b = from_host<double>({3, 4}, {2});
  Array x = from_host<double>({5, 6}, {2});
  auto [dw, db] = grad<0, 1>(f)(w, b, x);
  EXPECT_EQ(dw.to_vector<double>(), (std::vector<double>{5, 6}));
  EXPECT_EQ(db.to_vector<double>(), (std::vector<double>{6, 8}));
  auto [value, grads] = value_and_grad<2, 0>(f)(w, b, x);
  EXPECT_DOUBLE_EQ(value.item<double>(), 5 + 12 + 9 + 16);
  EXPECT_EQ(std::get<0>(grads).to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(std::get<1>(grads).to_vector<double>(), (std::vector<double>{5, 6}));
}

TEST(CustomVjp, SecondOrderDifferentiatesTheBackwardRuleAndResiduals) {
  // f(x) = x^3 with a hand-written backward rule 3 x^2 g, which reads residual x.
  auto cube = custom_vjp(
      "cube",
      [](const Array& x) {
        return std::pair{x * x * x, std::vector<Array>{x}};
      },
      [](const std::vector<Array>& saved, const Array& g) {
        return g * 3.0 * saved[0] * saved[0];
      });
  Array x = from_host<double>({2, -1}, {2});
  auto first = [&](const Array& v) {
    return sum(grad([&](const Array& u) { return sum(cube(u)); })(v));
  };
  EXPECT_EQ(grad(first)(x).to_vector<double>(), (std::vector<double>{12, -6}));  // 6x
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CustomVjp, BackwardResultMustMatchTheArguments) {
  auto mul = custom_vjp(
      "mul",
      [](const Array& a, const Array& b) {
        return std::pair{a * b, std::vector{a, b}};
      },
      [](const std::vector<Array>& saved, const Array& g) { return g * saved[1]; });
  Array a = from_host<double>({1, 2}, {2}), b = from_host<double>({3, 4}, {2});
  std::string text =
      testing::error_of([&] { grad([&](const Array& x) { return sum(mul(x, b)); })(a); });
  EXPECT_THAT(text,
              ::testing::HasSubstr("custom_vjp 'mul': the backward function's result has "
                                   "structure *, but the argument list has structure (*, *)"));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Grad, WithAuxReturnsTheGradientAndTheAuxiliaryValue) {
  auto f = [](const Array& x) { return std::pair{sum(x * x), x * 10.0}; };
  Array x = from_host<double>({1, 2}, {2});
  auto [g, aux] = grad(f, HasAux{})(x);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2, 4}));
  EXPECT_EQ(aux.to_vector<double>(), (std::vector<double>{10, 20}));
}

TEST(Grad, ProgramsOfGradientsHoldNoZerosForArgumentsNotDifferentiated) {
  auto f = [](const Array& w, const Array& x) { return sum(w * x); };
  Array w = zeros({3}), x = zeros({3});
  std::string text = make_program(grad(f), w, x).to_string();
  EXPECT_EQ(text.find("0.0:f32[]"), std::string::npos) << text;
}

TEST(GradErrors, EagerUseOfAnEscapedTracerSaysSo) {
  Array leaked;
  (void)grad([&](const Array& x) {
    leaked = x * 2.0;
    return sum(x);
  })(from_host<double>({1}, {1}));
  std::string text = testing::error_of([&] { (void)leaked.to_vector<double>(); });
  EXPECT_THAT(text,
              ::testing::HasSubstr("is used after the transformation that made it has finished"));
}

TEST(CheckGrads, DefaultsFitTheInputPrecision) {
  auto f = [](const Array& x) { return sum(tanh(x) * x); };
  Array x32 = from_host<float>({0.3f, -0.7f, 1.1f}, {3});
  EXPECT_NO_THROW(check_grads(f, std::tuple{x32}));
  EXPECT_NO_THROW(check_grads(f, std::tuple{astype(x32, DType::f64)}, {.order = 2}));
  // A wrong rule is caught with the default f32 tolerances.
  auto wrong = custom_vjp(
      "wrong",
      [](const Array& x) {
        return std::pair{x * x, std::vector<Array>{x}};
      },
      [](const std::vector<Array>& saved, const Array& g) { return g * 2.2 * saved[0]; });
  std::string text = testing::error_of(
      [&] { check_grads([&](const Array& x) { return sum(wrong(x)); }, std::tuple{x32}); });
  EXPECT_THAT(text,
              ::testing::HasSubstr("check_grads: reverse-mode and finite differences disagree"));
}

TEST(Vjp, PullbackErrorsNameTheCallersLine) {
  auto f = [](const Array& x) { return x * 2.0; };
  Array x = from_host<double>({1, 2}, {2});
  auto [y, pullback] = vjp(f, x);
  std::string text = testing::error_of([&] { (void)pullback(from_host<double>({1}, {1})); });
  EXPECT_THAT(text, ::testing::HasSubstr("grad_test.cc"));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Grad, StopGradientLetsANonDifferentiablePrimitiveFollow) {
  // The hint of "reverse-mode differentiation of while_loop is not supported" suggests
  // stop_gradient: it must work.
  auto doubled = [](const Array& x) {
    return while_loop([](const Array& v) { return sum(v) < 100.0; },
                      [](const Array& v) { return v * 2.0; }, x);
  };
  auto f = [&](const Array& x) { return sum(x * doubled(stop_gradient(x))); };
  Array x = from_host<double>({3, 1, 2}, {3});
  EXPECT_EQ(grad(f)(x).to_vector<double>(), (std::vector<double>{96, 32, 64}));
  EXPECT_THAT(
      testing::error_of([&] { (void)grad([&](const Array& v) { return sum(doubled(v)); })(x); }),
      ::testing::HasSubstr("reverse-mode differentiation of while_loop is not supported"));
}

}  // namespace
}  // namespace kiln
