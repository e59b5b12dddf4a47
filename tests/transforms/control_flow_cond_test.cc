// kiln::cond and kiln::switch_: the branch taken, clamped out-of-range indices, closed-over
// values, gradients (check_grads, only the taken branch's), vmap with an unbatched and a
// batched predicate or index against a loop over examples, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "ir/printer.h"
#include "kiln/control_flow.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::example;
using testing::fails_with;
using ::testing::HasSubstr;
using testing::values;

auto doubled = [](const Array& x) { return x * 2.0; };
auto negated = [](const Array& x) { return -x; };

TEST(Cond, TakesTheBranchThePredicateNames) {
  Array x = from_host<float>({1, -2}, {2});
  EXPECT_EQ(values(cond(scalar(1, DType::bool_), doubled, negated, x)),
            (std::vector<double>{2, -4}));
  EXPECT_EQ(values(cond(sum(x) > 0, doubled, negated, x)), (std::vector<double>{-1, 2}));
  // An integer predicate: nonzero is true.
  EXPECT_EQ(values(cond(scalar(3, DType::i32), doubled, negated, x)), (std::vector<double>{2, -4}));
}

TEST(Cond, SeveralOperandsAndPytreeResults) {
  auto on_true = [](const Array& a, const Tree& t) {
    return std::pair{a + t["b"].leaf(), t["b"].leaf()};
  };
  auto on_false = [](const Array& a, const Tree& t) { return std::pair{a - t["b"].leaf(), a}; };
  Tree t = Tree::dict({{"b", scalar(5.0)}});
  auto [u, v] = cond(scalar(0, DType::bool_), on_true, on_false, scalar(2.0), t);
  EXPECT_EQ(u.item<float>(), -3.0f);
  EXPECT_EQ(v.item<float>(), 2.0f);
}

TEST(Switch, ClampsOutOfRangeIndices) {
  std::vector<std::function<Array(const Array&)>> branches{
      [](const Array& x) { return x + 1.0; }, [](const Array& x) { return x * 10.0; },
      [](const Array& x) { return x - 100.0; }};
  Array x = scalar(2.0);
  std::vector<double> got;
  for (int index : {-5, 0, 1, 2, 3, 99}) {
    got.push_back(switch_(scalar(index, DType::i32), branches, x).item<float>());
  }
  EXPECT_EQ(got, (std::vector<double>{3, 3, 20, -98, -98, -98}));
  // Other integer dtypes are accepted.
  EXPECT_EQ(switch_(scalar(1, DType::u8), branches, x).item<float>(), 20.0f);
}

TEST(Cond, ClosedOverValuesBecomeOperands) {
  Array w = from_host<float>({3, 4}, {2});
  auto f = [&w](const Array& p, const Array& x) {
    return cond(
        p, [&w](const Array& v) { return v * w; }, [](const Array& v) { return v; }, x);
  };
  EXPECT_EQ(values(f(scalar(1, DType::bool_), ones({2}))), (std::vector<double>{3, 4}));
  TracedProgram traced = make_program(f, scalar(1, DType::bool_), zeros({2}));
  std::string text = print_program(*traced.program);
  // w is a constant of the outer program and an operand of cond; each branch takes it
  // (nested programs name their variables afresh).
  EXPECT_THAT(text, HasSubstr("{ lambda a:f32[2] ; b:bool[] c:f32[2]. let"));
  EXPECT_THAT(text, HasSubstr("cond[branches=({ lambda ; a:f32[2] b:f32[2]. let"));
}

TEST(CondGrad, OnlyTheTakenBranchContributes) {
  auto f = [](const Array& x, const Array& p) {
    return sum(cond(
        p, [](const Array& v) { return v * v; }, [](const Array& v) { return sin(v); }, x));
  };
  Array x = from_host<double>({0.5, -1.0}, {2});
  EXPECT_EQ(values(grad(f)(x, scalar(1, DType::bool_))), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(values(grad(f)(x, scalar(0, DType::bool_))),
            (std::vector<double>{std::cos(0.5), std::cos(-1.0)}));
}

TEST(CondGrad, CheckGradsWithClosedOverWeightsAndSecondOrder) {
  Array w = from_host<double>({0.3, -0.7, 1.1}, {3});
  auto loss = [](const Array& w, const Array& x, const Array& index) {
    std::vector<std::function<Array(const Array&)>> branches{
        [&w](const Array& v) { return tanh(v * w); }, [&w](const Array& v) { return v * v * w; },
        [](const Array& v) { return exp(v); }};
    return sum(switch_(index, branches, x));
  };
  Array x = from_host<double>({0.2, 0.9, -0.4}, {3});
  for (int index : {0, 1, 2}) {
    EXPECT_NO_THROW(check_grads(loss, std::tuple{w, x, scalar(index, DType::i32)}, {.order = 2}))
        << "branch " << index;
  }
}

TEST(CondVmap, UnbatchedAndBatchedPredicates) {
  Array xs = random::normal(random::key(1), {5, 3}, DType::f64);
  Array preds = from_host<bool>({true, false, false, true, true}, {5});
  auto f = [](const Array& p, const Array& x) { return cond(p, doubled, negated, x); };
  Array shared = vmap(f, {kNotMapped, 0})(scalar(0, DType::bool_), xs);
  Array per_example = vmap(f)(preds, xs);
  Array only_pred = vmap(f, {0, kNotMapped})(preds, example(xs, 0));
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_EQ(values(example(shared, b)), values(f(scalar(0, DType::bool_), example(xs, b))));
    EXPECT_EQ(values(example(per_example, b)), values(f(example(preds, b), example(xs, b))));
    EXPECT_EQ(values(example(only_pred, b)), values(f(example(preds, b), example(xs, 0))));
  }
}

TEST(CondVmap, BatchedIndexOfASwitchWithOutOfRangeIndices) {
  std::vector<std::function<Array(const Array&)>> branches{
      [](const Array& x) { return x + 1.0; }, [](const Array& x) { return x * 10.0; },
      [](const Array& x) { return sum(x) * ones_like(x); }};
  auto f = [&](const Array& i, const Array& x) { return switch_(i, branches, x); };
  Array index = from_host<int32_t>({-1, 0, 1, 2, 7}, {5});
  Array xs = random::normal(random::key(2), {5, 2}, DType::f64);
  Array got = vmap(f)(index, xs);
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_EQ(values(example(got, b)), values(f(example(index, b), example(xs, b))));
  }
}

TEST(CondVmap, PerExampleGradientsWithABatchedPredicate) {
  auto loss = [](const Array& x, const Array& p) {
    return sum(cond(
        p, [](const Array& v) { return v * v; }, [](const Array& v) { return sin(v); }, x));
  };
  Array xs = random::normal(random::key(3), {3, 2}, DType::f64);
  Array ps = from_host<bool>({true, false, true}, {3});
  Array grads = vmap(grad(loss))(xs, ps);
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_EQ(values(example(grads, b)), values(grad(loss)(example(xs, b), example(ps, b))));
  }
}

TEST(CondErrors, BranchesReturnDifferentTypes) {
  auto to_f64 = [](const Array& x) { return astype(x, DType::f64); };
  EXPECT_TRUE(fails_with([&] { cond(scalar(1, DType::bool_), to_f64, negated, zeros({2})); },
                         {"cond: branch 1 returns f64[2] as result 0, but branch 0 returns f32[2]",
                          "every branch must return the same types"}));
  auto summed = [](const Array& x) { return sum(x); };
  EXPECT_TRUE(fails_with([&] { cond(scalar(1, DType::bool_), summed, negated, zeros({2})); },
                         {"branch 1 returns f32[] as result 0, but branch 0 returns f32[2]"}));
  auto pair = [](const Array& x) { return std::vector<Array>{x, x}; };
  auto single = [](const Array& x) { return std::vector<Array>{x}; };
  EXPECT_TRUE(fails_with([&] { cond(scalar(1, DType::bool_), pair, single, zeros({2})); },
                         {"cond: branch 1 returns 2 value(s), but branch 0 returns 1"}));
}

TEST(CondErrors, PredicateAndIndexMustBeScalars) {
  EXPECT_TRUE(fails_with(
      [&] { cond(zeros({3}, DType::bool_), doubled, negated, zeros({2})); },
      {"cond: the predicate must be a bool or integer scalar, got bool[3]", "kiln::where"}));
  EXPECT_TRUE(fails_with([&] { cond(scalar(1.0), doubled, negated, zeros({2})); },
                         {"cond: the predicate must be a bool or integer scalar, got f32[]"}));
  std::vector<std::function<Array(const Array&)>> branches{doubled};
  EXPECT_TRUE(fails_with([&] { switch_(scalar(0.0), branches, zeros({2})); },
                         {"switch_: the index must be an integer scalar, got f32[]"}));
  std::vector<std::function<Array(const Array&)>> none;
  EXPECT_TRUE(fails_with([&] { switch_(scalar(0, DType::i32), none, zeros({2})); },
                         {"switch_: there are no branches"}));
}

}  // namespace
}  // namespace kiln
