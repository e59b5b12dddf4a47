// find_nonfinite (kiln/nonfinite.h): the first equation that makes a NaN or an infinity,
// with its primitive, scope, the caller's line and its operands' ranges; an argument or a
// closed-over value that already holds one; nothing when all is finite; the backward pass
// of grad; the same function a jitted step came from; refused inside a transformation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/grad.h"
#include "kiln/jit.h"
#include "kiln/nonfinite.h"
#include "kiln/ops.h"
#include "kiln/tracing.h"
#include "kiln/tree.h"
#include "support/errors.h"

namespace kiln {
namespace {

using ::kiln::testing::fails_with;
using ::testing::HasSubstr;
using Kind = NonFiniteOrigin::Kind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Array row(std::initializer_list<double> values, DType dtype = DType::f32) {
  return astype(from_host(std::vector<double>(values), {static_cast<int64_t>(values.size())}),
                dtype);
}

TEST(FindNonfinite, NamesTheFirstEquationThatMadeOne) {
  unsigned log_line = 0;
  auto loss = [&](const Array& w, const Array& x) {
    auto scope = named_scope("head");
    Array z = x * w;  // [0, 1, 2]: finite
    log_line = __LINE__ + 1;
    Array y = log(z);     // log(0) = -inf: the origin
    return sum(y * 0.0);  // -inf * 0 = NaN later
  };
  NonFiniteOrigin origin = find_nonfinite(loss, row({0, 1, 2}), row({1, 1, 1}));
  ASSERT_EQ(origin.kind, Kind::kEquation);
  EXPECT_EQ(origin.primitive, "log");
  EXPECT_EQ(origin.scope, "head");
  EXPECT_EQ(origin.site.line(), log_line);
  EXPECT_THAT(origin.site.file(), HasSubstr("nonfinite_origin_test.cc"));
  EXPECT_EQ(origin.value, "f32[3]");
  EXPECT_EQ(origin.nan_count, 0);
  EXPECT_EQ(origin.inf_count, 1);
  ASSERT_EQ(origin.operands.size(), 1u);
  EXPECT_EQ(origin.operands[0], "f32[3] in [0, 2]");
  EXPECT_LT(origin.index, origin.equations);
  std::string text = origin.to_string();
  EXPECT_THAT(text, HasSubstr("log at tests/transforms/nonfinite_origin_test.cc:"));
  EXPECT_THAT(text, HasSubstr("(scope \"head\")"));
  EXPECT_THAT(text, HasSubstr("0 NaN and 1 infinite"));
  // The jitted function returns the NaN the origin explains.
  EXPECT_TRUE(std::isnan(jit(loss)(row({0, 1, 2}), row({1, 1, 1})).item<double>()));
}

TEST(FindNonfinite, FindsNothingWhereAllIsFinite) {
  auto f = [](const Array& x) { return sum(exp(x) / (1.0 + x * x)); };
  NonFiniteOrigin origin = find_nonfinite(f, row({-1, 0, 3}, DType::bf16));
  EXPECT_FALSE(origin.found());
  EXPECT_GT(origin.equations, 2);
  EXPECT_THAT(origin.to_string(), HasSubstr("every argument and every result"));
}

TEST(FindNonfinite, AnArgumentOrAClosedOverValueThatAlreadyHoldsOne) {
  auto f = [](const Tree& t) { return t["a"].leaf() + t["b"].leaf(); };
  Tree args = Tree::dict({{"a", row({1, 2})}, {"b", row({kNaN, 2})}});
  NonFiniteOrigin origin = find_nonfinite(f, args);
  EXPECT_EQ(origin.kind, Kind::kArgument);
  EXPECT_EQ(origin.index, 1);  // leaves in key order: a, b
  EXPECT_EQ(origin.nan_count, 1);

  // A value f closes over may hold an infinity on purpose (a mask): carried, not made.
  Array captured = row({1, std::numeric_limits<double>::infinity()});
  auto g = [&](const Array& x) { return x * captured; };
  origin = find_nonfinite(g, row({1, 1}));
  ASSERT_EQ(origin.kind, Kind::kEquation);
  EXPECT_FALSE(origin.made);
  EXPECT_EQ(origin.inf_count, 1);
  EXPECT_THAT(origin.operands[1], HasSubstr("1 infinite (a constant of the program)"));
  EXPECT_THAT(origin.to_string(), HasSubstr("carried from an operand that held one"));
}

TEST(FindNonfinite, AMaskOfMinusInfinityIsNotAnOriginButWhatItMakesIs) {
  // where(mask, x, -inf) carries the constant's -inf; exp(-inf - -inf) later makes a NaN.
  auto f = [](const Array& x) {
    Array masked = where(greater(x, full({}, 0.0)), x,
                         full(x.shape(), -std::numeric_limits<double>::infinity()));
    return masked - max(masked);
  };
  NonFiniteOrigin origin = find_nonfinite(f, row({-1, -2}));
  ASSERT_EQ(origin.kind, Kind::kEquation);
  EXPECT_TRUE(origin.made);
  EXPECT_EQ(origin.primitive, "sub");
  EXPECT_EQ(origin.nan_count, 2);
  EXPECT_EQ(origin.how, "a NaN from operands with infinities");
  EXPECT_FALSE(find_nonfinite(f, row({1, -2})).made);  // -inf carried, no NaN made
}

TEST(FindNonfinite, FollowsTheBackwardPassOfGrad) {
  // sqrt's derivative at 0 is infinite: the value is finite, its gradient is not.
  unsigned sqrt_line = 0;
  auto loss = [&](const Array& x) {
    sqrt_line = __LINE__ + 1;
    return sum(sqrt(x));
  };
  Array x = row({0, 4});
  EXPECT_FALSE(find_nonfinite(loss, x).found());
  NonFiniteOrigin origin = find_nonfinite(grad(loss), x);
  ASSERT_EQ(origin.kind, Kind::kEquation);
  // The backward equation carries the line of the forward call it differentiates.
  EXPECT_EQ(origin.site.line(), sqrt_line);
  EXPECT_EQ(origin.inf_count, 1);
}

TEST(FindNonfinite, IsRefusedInsideATransformation) {
  auto inner = [](const Array& x) { return log(x); };
  auto outer = [&](const Array& x) {
    (void)find_nonfinite(inner, x);
    return x;
  };
  EXPECT_TRUE(fails_with(
      [&] {
        (void)jit(outer)(row({1, 2}));
      },
      {"find_nonfinite runs the function one primitive at a time"}));
}

}  // namespace
}  // namespace kiln
