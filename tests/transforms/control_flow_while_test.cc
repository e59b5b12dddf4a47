// kiln::while_loop and kiln::fori_loop with Array bounds: Newton's iteration, pytree
// carries, closed-over values, vmap with an unbatched and a batched predicate against a
// loop over examples, the clear error under grad, and the shape errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "kiln/control_flow.h"
#include "kiln/ops.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::example;
using testing::fails_with;
using ::testing::HasSubstr;
using testing::values;

// sqrt(a) by Newton's iteration, until the update is below 1e-12, counting the steps.
std::pair<Array, Array> newton_sqrt(const Array& a) {
  using State = std::pair<Array, Array>;  // (estimate, steps)
  auto not_done = [&a](const State& s) {
    Array next = 0.5 * (s.first + a / s.first);
    return abs(next - s.first) > 1e-12;
  };
  auto step = [&a](const State& s) { return State{0.5 * (s.first + a / s.first), s.second + 1}; };
  return while_loop(not_done, step, State{a, scalar(0, DType::i32)});
}

TEST(WhileLoop, NewtonIterationForASquareRoot) {
  auto [root, steps] = newton_sqrt(scalar(2.0, DType::f64));
  EXPECT_NEAR(root.item<double>(), std::sqrt(2.0), 1e-12);
  EXPECT_GT(steps.item<int32_t>(), 2);
  EXPECT_LT(steps.item<int32_t>(), 10);
}

TEST(WhileLoop, ZeroIterationsReturnTheInitialCarry) {
  Array x = from_host<float>({1, 2}, {2});
  Array out = while_loop([](const Array&) { return scalar(0, DType::bool_); },
                         [](const Array& c) { return c * 2.0; }, x);
  EXPECT_EQ(values(out), (std::vector<double>{1, 2}));
}

TEST(WhileLoop, ForiLoopWithArrayBoundsIsAWhileLoop) {
  auto f = [](const Array& lower, const Array& upper, const Array& x) {
    return fori_loop(
        lower, upper,
        [&x](const Array& i, const Array& acc) { return acc + astype(i, DType::f32) * x; },
        zeros({}));
  };
  Array result = f(scalar(1, DType::i32), scalar(4, DType::i32), scalar(2.0));
  EXPECT_EQ(result.item<float>(), (1 + 2 + 3) * 2.0f);
  std::string text =
      make_program(f, scalar(1, DType::i32), scalar(4, DType::i32), scalar(2.0)).to_string();
  EXPECT_THAT(text, HasSubstr("while_loop[cond={ lambda"));
}

TEST(WhileLoop, VmapWithAnUnbatchedPredicate) {
  // The trip count depends only on the shared bound; the carry's values are batched.
  auto f = [](const Array& x, const Array& n) {
    using State = std::pair<Array, Array>;
    auto more = [&n](const State& s) { return s.second < n; };
    auto step = [](const State& s) { return State{s.first * 2.0 + 1.0, s.second + 1}; };
    return while_loop(more, step, State{x, scalar(0, DType::i32)}).first;
  };
  Array xs = from_host<double>({1, 2, 3}, {3});
  Array n = scalar(3, DType::i32);
  Array got = vmap(f, {0, kNotMapped})(xs, n);
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_EQ(example(got, b).item<double>(), f(example(xs, b), n).item<double>());
  }
}

TEST(WhileLoop, VmapWithABatchedPredicateRunsEachExampleToItsOwnEnd) {
  Array as = from_host<double>({2, 9, 0.25, 1e6}, {4});
  auto [roots, steps] = vmap(newton_sqrt)(as);
  for (int64_t b = 0; b < 4; ++b) {
    auto [root, count] = newton_sqrt(example(as, b));
    EXPECT_EQ(example(roots, b).item<double>(), root.item<double>()) << "example " << b;
    EXPECT_EQ(example(steps, b).item<int32_t>(), count.item<int32_t>()) << "example " << b;
  }
  // The examples really stop at different iterations.
  EXPECT_NE(example(steps, 0).item<int32_t>(), example(steps, 3).item<int32_t>());
}

TEST(WhileLoop, VmapOfFixedTripCountsPerExample) {
  auto f = [](const Array& n) {
    return fori_loop(
        scalar(0, DType::i32), n, [](const Array& i, const Array& acc) { return acc + i; },
        scalar(0, DType::i32));
  };
  Array ns = from_host<int32_t>({0, 1, 4, 6}, {4});
  EXPECT_EQ(vmap(f)(ns).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 6, 15}));
}

TEST(WhileLoopErrors, ReverseModeIsRejectedClearly) {
  auto loss = [](const Array& a) { return newton_sqrt(a).first; };
  EXPECT_TRUE(fails_with([&] { grad(loss)(scalar(2.0, DType::f64)); },
                         {"reverse-mode differentiation of while_loop is not supported: use scan "
                          "or fori_loop with static bounds"}));
}

TEST(WhileLoopErrors, PredicateMustBeABoolScalar) {
  auto vector_pred = [](const Array& c) { return c > 0.0; };
  auto step = [](const Array& c) { return c - 1.0; };
  EXPECT_TRUE(fails_with([&] { while_loop(vector_pred, step, zeros({3})); },
                         {"while_loop: the condition must return a bool scalar, got bool[3]"}));
  auto float_pred = [](const Array& c) { return sum(c); };
  EXPECT_TRUE(fails_with([&] { while_loop(float_pred, step, zeros({3})); },
                         {"the condition must return a bool scalar, got f32[]"}));
}

TEST(WhileLoopErrors, CarryTypeChanges) {
  auto more = [](const Array& c) { return sum(c) < 10.0; };
  auto grow = [](const Array& c) { return concatenate({c, c}); };
  EXPECT_TRUE(fails_with([&] { while_loop(more, grow, ones({2})); },
                         {"while_loop: the body returns carry leaf 0 as f32[4], but the carry is "
                          "f32[2]"}));
}

}  // namespace
}  // namespace kiln
