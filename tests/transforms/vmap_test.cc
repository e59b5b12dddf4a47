// vmap through the public API: axes, pytrees, composition with grad, make_program and
// itself, custom_vjp under vmap, and the errors for axes that do not fit the arguments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/ops.h"
#include "kiln/random.h"
#include "kiln/vmap.h"
#include "support/arrays.h"
#include "support/errors.h"

namespace kiln {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

using ::kiln::testing::values;

Array row(const Array& x, int64_t i) {
  return squeeze(slice(x, {i, 0}, {i + 1, x.shape()[1]}), {0});
}

TEST(Vmap, MapsAxisZeroByDefault) {
  auto f = [](const Array& x) { return x * x + 1.0; };
  Array xs = from_host<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  Array ys = vmap(f)(xs);
  EXPECT_EQ(ys.shape(), Shape({3, 2}));
  EXPECT_EQ(values(ys), (std::vector<double>{2, 5, 10, 17, 26, 37}));
}

TEST(Vmap, UnmappedArgumentsAreSharedAndOutAxesPlaceTheBatch) {
  auto f = [](const Array& x, const Array& w) { return x * w; };
  Array xs = from_host<double>({1, 2, 3, 4, 5, 6}, {2, 3});  // batch on axis 1: 3 examples
  Array w = from_host<double>({10, 100}, {2});
  Array ys = vmap(f, {1, kNotMapped}, {1})(xs, w);
  EXPECT_EQ(ys.shape(), Shape({2, 3}));
  EXPECT_EQ(values(ys), (std::vector<double>{10, 20, 30, 400, 500, 600}));
  Array batch_first = vmap(f, {1, kNotMapped})(xs, w);
  EXPECT_EQ(batch_first.shape(), Shape({3, 2}));
  EXPECT_EQ(values(batch_first), (std::vector<double>{10, 400, 20, 500, 30, 600}));
}

TEST(Vmap, ResultsThatDoNotDependOnTheBatchAreRepeatedOrKeptUnmapped) {
  auto f = [](const Array& x, const Array& w) { return std::pair{x + w, w * 2.0}; };
  Array xs = from_host<double>({1, 2, 3}, {3});
  Array w = from_host<double>({10}, {1});
  auto [sum_batched, twice_w] = vmap(f, {0, kNotMapped})(xs, w);
  EXPECT_EQ(values(sum_batched), (std::vector<double>{11, 12, 13}));
  EXPECT_EQ(values(twice_w), (std::vector<double>{20, 20, 20}));
  auto [_, shared] = vmap(f, {0, kNotMapped}, {0, kNotMapped})(xs, w);
  EXPECT_EQ(shared.shape(), Shape({1}));
}

TEST(Vmap, TreesAndStaticArguments) {
  auto f = [](const Tree& p, const Array& x, double scale) {
    return p["w"].leaf() * x * scale + p["b"].leaf();
  };
  Tree params =
      Tree::dict({{"w", from_host<double>({2}, {1})}, {"b", from_host<double>({1}, {1})}});
  Array xs = from_host<double>({1, 2, 3}, {3, 1});
  Array ys = vmap(f, {kNotMapped, 0, kNotMapped})(params, xs, 10.0);
  EXPECT_EQ(values(ys), (std::vector<double>{21, 41, 61}));
}

TEST(Vmap, NestedVmapMapsTwoAxes) {
  auto outer = [](const Array& x, const Array& y) { return x * y; };
  Array xs = from_host<double>({1, 2}, {2});
  Array ys = from_host<double>({10, 20, 30}, {3});
  // For each x, for each y: the outer product.
  auto table = vmap([&](const Array& x) { return vmap(outer, {kNotMapped, 0})(x, ys); })(xs);
  EXPECT_EQ(table.shape(), Shape({2, 3}));
  EXPECT_EQ(values(table), (std::vector<double>{10, 20, 30, 20, 40, 60}));
}

TEST(Vmap, PerExampleGradientsEqualALoopOfGradients) {
  auto loss = [](const Tree& p, const Array& x, const Array& y) {
    Array pred = tanh(matmul(x, p["w"].leaf()) + p["b"].leaf());
    Array err = pred - y;
    return sum(err * err);
  };
  Tree params = Tree::dict({{"w", from_host<double>({0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, {3, 2})},
                            {"b", from_host<double>({0.01, -0.02}, {2})}});
  Array xs = from_host<double>({1, 2, 3, -1, 0, 2, 0.5, 0.5, 0.5, 2, -2, 1}, {4, 3});
  Array ys = from_host<double>({1, 0, 0, 1, 0.5, 0.5, -1, 1}, {4, 2});
  Tree per_example = vmap(grad(loss), {kNotMapped, 0, 0})(params, xs, ys);
  EXPECT_EQ(per_example["w"].leaf().shape(), Shape({4, 3, 2}));
  for (int64_t i = 0; i < 4; ++i) {
    Tree single = grad(loss)(params, reshape(row(xs, i), {1, 3}), reshape(row(ys, i), {1, 2}));
    for (const char* name : {"w", "b"}) {
      Array batched = per_example[name].leaf();
      Dims start(static_cast<size_t>(batched.rank()), 0), limit = batched.shape().dims();
      start[0] = i;
      limit[0] = i + 1;
      std::vector<double> got = values(slice(batched, start, limit));
      std::vector<double> want = values(single[name].leaf());
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-14) << name;
    }
  }
}

TEST(Vmap, GradOfAVmappedFunction) {
  auto f = [](const Array& x) { return sin(x) * x; };
  Array xs = from_host<double>({0.5, 1.0, 2.0}, {3});
  Array g = grad([&](const Array& v) { return sum(vmap(f)(v)); })(xs);
  std::vector<double> got = values(g);
  for (size_t i = 0; i < 3; ++i) {
    double x = std::vector<double>{0.5, 1.0, 2.0}[i];
    EXPECT_NEAR(got[i], std::cos(x) * x + std::sin(x), 1e-15);
  }
}

TEST(Vmap, TracesIntoABatchedProgram) {
  auto f = [](const Array& x) { return exp(x) * 2.0; };
  Array xs = zeros({8, 4});
  std::string text = make_program(vmap(f), xs).to_string();
  EXPECT_THAT(text, HasSubstr("a:f32[8,4]"));
  EXPECT_THAT(text, HasSubstr("exp a"));
}

TEST(Vmap, CustomVjpKeepsItsBackwardRuleUnderVmap) {
  int backward_calls = 0;
  auto square = custom_vjp(
      "square",
      [](const Array& x) {
        return std::pair{x * x, std::vector<Array>{x}};
      },
      [&backward_calls](const std::vector<Array>& saved, const Array& g) {
        ++backward_calls;
        return g * 2.0 * saved[0];
      });
  Array xs = from_host<double>({1, 2, 3}, {3, 1});
  Array ys = vmap([&](const Array& x) { return square(x); })(xs);
  EXPECT_EQ(values(ys), (std::vector<double>{1, 4, 9}));
  Array per_example = vmap(grad([&](const Array& x) { return sum(square(x)); }))(xs);
  EXPECT_EQ(values(per_example), (std::vector<double>{2, 4, 6}));
  EXPECT_GE(backward_calls, 1);
}

TEST(Vmap, OverKeysEqualsEachKeysDraw) {
  Array keys = random::split(random::key(7), 3);
  auto draw = [](const Array& key) { return random::normal(key, {4}); };
  Array batched = vmap(draw)(keys);
  ASSERT_EQ(batched.shape(), Shape({3, 4}));
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<float> want = draw(random::key_at(keys, i)).to_vector<float>();
    std::vector<float> got = squeeze(slice(batched, {i, 0}, {i + 1, 4}), {0}).to_vector<float>();
    EXPECT_EQ(got, want) << "key " << i;
  }
  // A permutation per key sorts under vmap.
  Array perms = vmap([](const Array& key) { return random::permutation(key, 5); })(keys);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<int32_t> want =
        random::permutation(random::key_at(keys, i), 5).to_vector<int32_t>();
    std::vector<int32_t> got = squeeze(slice(perms, {i, 0}, {i + 1, 5}), {0}).to_vector<int32_t>();
    EXPECT_EQ(got, want) << "key " << i;
  }
}

TEST(VmapErrors, InAxesCountMustMatchTheArguments) {
  auto f = [](const Array& x, const Array& y) { return x + y; };
  Array x = zeros({3});
  std::string text = error_of([&] { (void)vmap(f, {0})(x, x); });
  EXPECT_THAT(text, HasSubstr("vmap: in_axes has 1 entries, but the function has 2 arguments"));
}

TEST(VmapErrors, AxisOutOfRangeNamesTheArgument) {
  auto f = [](const Array& x, const Array& y) { return x + y; };
  Array x = zeros({3}), y = zeros({3, 2});
  std::string text = error_of([&] { (void)vmap(f, {0, 2})(x, y); });
  EXPECT_THAT(text, HasSubstr("vmap: in_axes maps axis 2 of argument 1, which is f32[3,2]"));
}

TEST(VmapErrors, MappedSizesMustAgree) {
  auto f = [](const Array& x, const Array& y) { return x * y; };
  std::string text = error_of([&] { (void)vmap(f)(zeros({3}), zeros({4})); });
  EXPECT_THAT(text, HasSubstr("argument 0 has 3 on axis 0, but argument 1 has 4 on axis 0"));
}

TEST(VmapErrors, StaticArgumentsCannotBeMapped) {
  auto f = [](const Array& x, double s) { return x * s; };
  std::string text = error_of([&] { (void)vmap(f, {0, 0})(zeros({3}), 2.0); });
  EXPECT_THAT(text, HasSubstr("vmap: in_axes maps argument 1, which is static"));
}

TEST(VmapErrors, UnmappedResultThatDependsOnTheBatch) {
  auto f = [](const Array& x) { return x * 2.0; };
  std::string text = error_of([&] { (void)vmap(f, {0}, {kNotMapped})(zeros({3})); });
  EXPECT_THAT(text, HasSubstr("out_axes says result 0 is not mapped, but it differs"));
}

TEST(VmapErrors, NothingMapped) {
  auto f = [](const Array& x) { return x * 2.0; };
  std::string text = error_of([&] { (void)vmap(f, {kNotMapped})(zeros({3})); });
  EXPECT_THAT(text, HasSubstr("vmap: no input is mapped"));
}

TEST(VmapErrors, BatchedValueUsedAfterVmap) {
  Array leaked;
  auto f = [&](const Array& x) {
    leaked = x * 2.0;
    return x;
  };
  (void)vmap(f)(zeros({3}));
  std::string text = error_of([&] { (void)(leaked + 1.0); });
  EXPECT_THAT(text, HasSubstr("traced value"));
}

}  // namespace
}  // namespace kiln
