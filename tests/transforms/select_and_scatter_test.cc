// select_and_scatter_add, reduce_window_max's VJP primitive: its operand checks, that max
// pooling's gradient is that one primitive, and the gradient of that gradient (its own VJP,
// the gather from each window's selected cell) in a hand-checked case and against finite
// differences, also under vmap.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "kiln/vmap.h"
#include "prims/bind.h"
#include "prims/ids/window.h"
#include "support/arrays.h"
#include "support/errors.h"
#include "support/text.h"

namespace kiln {
namespace {

using ::kiln::testing::count_of;

using testing::fails_with;

ReduceWindowParams pool_2x2() {
  return ReduceWindowParams{{1, 2, 2, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}};
}

Array scatter(const Array& source, const Array& operand, const ReduceWindowParams& params) {
  return bind1(prim::select_and_scatter_add, {source, operand}, params, CallSite());
}

TEST(SelectAndScatterAdd, RejectsBadOperands) {
  Array x = zeros({2, 4, 4, 3});
  Array g = zeros({2, 2, 2, 3});
  EXPECT_TRUE(fails_with([&] { scatter(g, astype(x, DType::i32), pool_2x2()); },
                         {"select_and_scatter_add:", "float", "f32[2,2,2,3]", "i32[2,4,4,3]"}));
  EXPECT_TRUE(fails_with([&] { scatter(g, astype(x, DType::f64), pool_2x2()); },
                         {"select_and_scatter_add:", "one dtype", "f64[2,4,4,3]"}));
  EXPECT_TRUE(fails_with(
      [&] {
        scatter(zeros({2, 3, 2, 3}), x, pool_2x2());
      },
      {"select_and_scatter_add:", "source f32[2,3,2,3]", "[2,2,2,3]", "operand f32[2,4,4,3]",
       "HINT:"}));
  EXPECT_TRUE(fails_with(
      [&] {
        scatter(g, x, ReduceWindowParams{{2, 2}, {2, 2}, {0, 0}, {0, 0}});
      },
      {"select_and_scatter_add:", "window_dimensions [2,2]", "f32[2,4,4,3]"}));
}

TEST(SelectAndScatterAdd, MaxPoolGradientIsOnePrimitive) {
  Array x = zeros({2, 6, 6, 3});
  auto loss = [](const Array& a) { return sum(max_pool(a, {2, 2}, {2, 2})); };
  std::string text = make_program(grad(loss), x).to_string();
  EXPECT_EQ(count_of(text, "select_and_scatter_add"), 1) << text;
  EXPECT_EQ(count_of(text, "slice"), 0) << text;
}

TEST(SelectAndScatterAdd, GradientOfTheGradientGathersAtTheSelectedCells) {
  // Windows of 2 over (1, 3, 3, 2), stride 1: windows select x1, x1 (first of the tie), x2.
  // d/dsource <ct, scatter(source, x)> takes ct at each window's selected cell.
  Array x = from_host(std::vector<double>{1, 3, 3, 2}, Shape{4});
  ReduceWindowParams params{{2}, {1}, {0}, {0}};
  Array source = from_host(std::vector<double>{1, 10, 100}, Shape{3});
  EXPECT_EQ(testing::values(scatter(source, x, params)), (std::vector<double>{0, 11, 100, 0}));
  Array ct = from_host(std::vector<double>{1, 2, 4, 8}, Shape{4});
  auto [out, pullback] = vjp([&](const Array& s) { return scatter(s, x, params); }, source);
  auto [d_source] = pullback(ct);
  EXPECT_EQ(testing::values(d_source), (std::vector<double>{2, 2, 4}));
}

TEST(SelectAndScatterAdd, SecondOrderMaxPoolMatchesFiniteDifferences) {
  // Distinct values, so no selection moves under the finite-difference step.
  std::vector<double> values;
  for (int i = 0; i < 2 * 5 * 5 * 2; ++i)
    values.push_back(static_cast<double>((i * 37) % 101) / 50);
  Array x = from_host(values, Shape{2, 5, 5, 2});
  auto f = [](const Array& a) {
    Array p = max_pool(a * a, {3, 3}, {2, 2}, Padding::kSame);
    return sum(p * p);
  };
  check_grads(f, std::tuple{x}, {.order = 2});
}

TEST(SelectAndScatterAdd, VmapOfMaxPoolGradientMatchesALoop) {
  std::vector<double> values;
  for (int i = 0; i < 3 * 4 * 4 * 2; ++i) values.push_back(static_cast<double>((i * 29) % 97));
  Array xs = from_host(values, Shape{3, 1, 4, 4, 2});
  auto pool_grad = grad([](const Array& a) { return sum(max_pool(a, {2, 2}, {1, 1})); });
  Array batched = vmap(pool_grad)(xs);
  for (int64_t b = 0; b < 3; ++b) {
    Shape example{1, 4, 4, 2};
    Array one = pool_grad(reshape(slice(xs, {b, 0, 0, 0, 0}, {b + 1, 1, 4, 4, 2}), example));
    Array from_batch = reshape(slice(batched, {b, 0, 0, 0, 0}, {b + 1, 1, 4, 4, 2}), example);
    EXPECT_EQ(testing::values(from_batch), testing::values(one)) << "example " << b;
  }
}

}  // namespace
}  // namespace kiln
