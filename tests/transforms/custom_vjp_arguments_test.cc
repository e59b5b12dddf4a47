// custom_vjp functions of several arguments: each argument reaches the forward and backward
// functions as itself. These tests use asymmetric functions (a - b, not a * b) and mixed
// dtypes, so that arguments passed in another order give a wrong number or a type error
// instead of the same answer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "kiln/ops.h"
#include "kiln/transforms.h"
#include "support/errors.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

auto make_minus() {
  return custom_vjp(
      "minus",
      [](const Array& a, const Array& b) {
        return std::pair{a - b, std::vector<Array>{}};
      },
      [](const std::vector<Array>&, const Array& g) {
        return std::tuple{g, -g};
      });
}

TEST(CustomVjpArguments, TwoArgumentsKeepTheirOrder) {
  auto minus = make_minus();
  Array x = from_host<double>({10, 20}, {2});
  Array y = from_host<double>({1, 2}, {2});
  EXPECT_THAT(minus(x, y).to_vector<double>(), ElementsAre(9, 18));
  EXPECT_THAT(minus(y, x).to_vector<double>(), ElementsAre(-9, -18));
  auto [dx, dy] =
      grad<0, 1>([&](const Array& a, const Array& b) { return sum(minus(a, b) * a); })(x, y);
  // d/da sum((a - b) a) = 2a - b; d/db = -a.
  EXPECT_THAT(dx.to_vector<double>(), ElementsAre(19, 38));
  EXPECT_THAT(dy.to_vector<double>(), ElementsAre(-10, -20));
}

TEST(CustomVjpArguments, TwoArgumentsOfDifferentShapesKeepTheirOrder) {
  auto minus = make_minus();
  Array matrix = from_host<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array row = from_host<double>({1, 1, 1}, {3});
  EXPECT_THAT(minus(matrix, row).to_vector<double>(), ElementsAre(0, 1, 2, 3, 4, 5));
}

// Three arguments of three dtypes: f64 values, int32 indices, an f32 scale.
auto make_gather_scaled() {
  return custom_vjp(
      "gather_scaled",
      [](const Array& values, const Array& indices, const Array& scale) {
        Array scale64 = astype(scale, DType::f64);
        return std::pair{take(values, indices) * scale64, std::vector<Array>{indices, scale64}};
      },
      [](const std::vector<Array>& saved, const Array& g) {
        // d values[j] = sum over i with indices[i] == j of g[i] * scale.
        Array hits = one_hot(saved[0], 3, DType::f64);  // [n, 3]
        Array d_values = sum(expand_dims(g * saved[1], 1) * hits, {0});
        return std::tuple{d_values, Array(), zeros({}, DType::f32)};
      });
}

TEST(CustomVjpArguments, ThreeArgumentsOfMixedDtypesKeepTheirOrder) {
  auto gather_scaled = make_gather_scaled();
  Array values = from_host<double>({10, 20, 30}, {3});
  Array indices = from_host<int32_t>({2, 0, 2}, {3});
  Array scale = from_host<float>({0.5f}, {});
  EXPECT_THAT(gather_scaled(values, indices, scale).to_vector<double>(), ElementsAre(15, 5, 15));
  Array d_values =
      grad([&](const Array& v) { return sum(gather_scaled(v, indices, scale)); })(values);
  EXPECT_THAT(d_values.to_vector<double>(), ElementsAre(0.5, 0, 1.0));
}

TEST(CustomVjpArguments, IntegerArgumentTakesAnEmptyCotangentThroughVjp) {
  auto gather_scaled = make_gather_scaled();
  Array values = from_host<double>({10, 20, 30}, {3});
  Array indices = from_host<int32_t>({1, 1, 1}, {3});
  Array scale = from_host<float>({2.0f}, {});
  auto [out, pullback] =
      vjp([&](const Array& v, const Array& i, const Array& s) { return gather_scaled(v, i, s); },
          values, indices, scale);
  EXPECT_THAT(out.to_vector<double>(), ElementsAre(40, 40, 40));
  auto [d_values, d_indices, d_scale] = pullback(from_host<double>({1, 1, 1}, {3}));
  EXPECT_THAT(d_values.to_vector<double>(), ElementsAre(0, 6, 0));
  // The integer argument gets zeros of its own dtype, whatever the backward function said.
  EXPECT_EQ(d_indices.dtype(), DType::i32);
  EXPECT_THAT(d_indices.to_vector<int32_t>(), ElementsAre(0, 0, 0));
  EXPECT_EQ(d_scale.dtype(), DType::f32);
}

TEST(CustomVjpArguments, AnIntegerArgumentsWrongCotangentSaysItTakesNone) {
  auto bad = custom_vjp(
      "bad_int",
      [](const Array& values, const Array& indices) {
        return std::pair{take(values, indices), std::vector<Array>{}};
      },
      [](const std::vector<Array>&, const Array& g) {
        return std::tuple{g, g};  // a float cotangent for the integer argument
      });
  Array values = from_host<double>({1, 2}, {2});
  Array indices = from_host<int32_t>({0, 1}, {2});
  std::string text = testing::error_of(
      [&] { grad([&](const Array& v) { return sum(bad(v, indices)); })(values); });
  EXPECT_THAT(text, HasSubstr("custom_vjp 'bad_int': the backward function returned a f64[2] "
                              "cotangent for argument array 1, which is i32[2]"));
  EXPECT_THAT(text, HasSubstr("an integer or bool argument takes no cotangent"));
}

TEST(CustomVjpArguments, PytreeAndArrayArgumentsKeepTheirOrder) {
  auto affine = custom_vjp(
      "affine",
      [](const std::vector<Array>& wb, const Array& x) {
        return std::pair{x * wb[0] - wb[1], std::vector<Array>{x, wb[0]}};
      },
      [](const std::vector<Array>& saved, const Array& g) {
        return std::tuple{std::vector<Array>{sum(g * saved[0]), -sum(g)}, g * saved[1]};
      });
  std::vector<Array> wb{from_host<double>({3}, {}), from_host<double>({1}, {})};
  Array x = from_host<double>({1, 2}, {2});
  EXPECT_THAT(affine(wb, x).to_vector<double>(), ElementsAre(2, 5));
  EXPECT_NO_THROW(check_grads(
      [&](const std::vector<Array>& p, const Array& v) { return sum(affine(p, v) * v); },
      std::tuple{wb, x}));
}

}  // namespace
}  // namespace kiln
