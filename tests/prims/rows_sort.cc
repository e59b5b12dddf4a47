// op_table row for sort (used by kiln::random::permutation and argsort). The oracle orders
// (key..., index) tuples with an unstable sort, which is stable by construction, and is
// written independently of the kernels.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "prims/ids/sort.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

// NaN after everything, all NaNs equal; -0 == 0 (doubles already compare so).
int order(double a, double b) {
  bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan || b_nan) return static_cast<int>(a_nan) - static_cast<int>(b_nan);
  return a < b ? -1 : (b < a ? 1 : 0);
}

std::vector<OpCase> sort_cases() {
  std::vector<OpCase> cases;
  Rng rng(5);
  // Keys with many ties (small ranges), so stability shows.
  auto keys = [&](DType dtype, const Shape& shape) {
    TestArray array = random_array(dtype, shape, rng, [&](Rng& r) {
      if (dtype == DType::bool_) return std::floor(uniform(r, 0, 2));
      if (dtype == DType::u32) return std::floor(uniform(r, 0, 4294967296.0));
      if (is_floating(dtype)) return std::floor(uniform(r, -8, 8)) / 2;
      return std::floor(uniform(r, is_unsigned(dtype) ? 0 : -20, 20));
    });
    insert_specials(array);
    return array;
  };
  auto positions = [](const Shape& shape) {
    std::vector<double> index(static_cast<size_t>(shape.num_elements()));
    std::iota(index.begin(), index.end(), 0.0);
    return make_array(DType::i32, shape, index);
  };
  const DType key_dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                              DType::i64, DType::u8,  DType::u32, DType::bool_};
  for (DType dtype : key_dtypes) {
    for (const auto& [shape, dimension] :
         std::vector<std::pair<Shape, int64_t>>{{Shape{0}, 0},
                                                {Shape{1}, 0},
                                                {Shape{7}, 0},
                                                {Shape{600}, -1},
                                                {Shape{5, 4}, 0},
                                                {Shape{5, 4}, 1},
                                                {Shape{2, 0, 3}, 2},
                                                {Shape{3, 4, 5}, 1}}) {
      std::string label =
          fmt::format("{}{} dim {}", dtype_name(dtype), shape.to_string(), dimension);
      cases.push_back({label + " alone", {keys(dtype, shape)}, SortParams{dimension, 1}});
      cases.push_back({label + " + positions",
                       {keys(dtype, shape), positions(shape)},
                       SortParams{dimension, 1}});
    }
  }
  // Two keys, then a payload of another dtype.
  Shape shape{4, 50};
  cases.push_back({"i32, f32 keys + f64 values",
                   {keys(DType::i32, shape), keys(DType::f32, shape), keys(DType::f64, shape)},
                   SortParams{1, 2}});
  // Long lines for the radix path (single 32-bit keys), with ties from a small range.
  for (DType dtype : {DType::u32, DType::i32, DType::f32}) {
    for (const Shape& large : {Shape{100003}, Shape{3, 2000}}) {
      TestArray k = random_array(dtype, large, rng, [&](Rng& r) {
        return dtype == DType::u32 ? std::floor(uniform(r, 0, 4294967296.0))
                                   : std::floor(uniform(r, -3000, 3000)) / 4;
      });
      insert_specials(k);
      cases.push_back({fmt::format("{}{} radix", dtype_name(dtype), large.to_string()),
                       {k, positions(large)},
                       SortParams{-1, 1}});
    }
  }
  return cases;
}

std::vector<TestArray> sort_oracle(const OpCase& c) {
  const auto& params = std::get<SortParams>(c.params);
  const Shape& shape = c.inputs[0].aval.shape;
  int64_t dimension = params.dimension < 0 ? params.dimension + shape.rank() : params.dimension;
  int64_t length = shape[dimension], inner = 1, outer = 1;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (axis < dimension) outer *= shape[axis];
    if (axis > dimension) inner *= shape[axis];
  }
  std::vector<TestArray> out;
  for (const TestArray& input : c.inputs) out.push_back({input.aval, input.values});
  std::vector<int64_t> index(static_cast<size_t>(length));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * length + k) * inner + i); };
      std::iota(index.begin(), index.end(), int64_t{0});
      // A total order on (keys..., position): stable by construction, any sort will do.
      std::sort(index.begin(), index.end(), [&](int64_t a, int64_t b) {
        for (int64_t key = 0; key < params.num_keys; ++key) {
          const auto& values = c.inputs[static_cast<size_t>(key)].values;
          int cmp = order(values[at(a)], values[at(b)]);
          if (cmp != 0) return cmp < 0;
        }
        return a < b;
      });
      for (size_t operand = 0; operand < c.inputs.size(); ++operand) {
        for (int64_t k = 0; k < length; ++k) {
          out[operand].values[at(k)] = c.inputs[operand].values[at(index[static_cast<size_t>(k)])];
        }
      }
    }
  }
  return out;
}

// f64 operands in [0.5, 1.5] (distinct keys, so no tie sits on a finite difference's step),
// sorted alone, with a position payload, with a float payload, and by integer keys with ties
// (their float payload's gradient is a permutation that does not move).
std::vector<OpCase> sort_grad_cases() {
  Rng rng(17);
  auto distinct = [&](Shape shape) {
    return random_array(DType::f64, std::move(shape), rng,
                        [](Rng& r) { return uniform(r, 0.5, 1.5); });
  };
  auto positions = [](const Shape& shape) {
    std::vector<double> index(static_cast<size_t>(shape.num_elements()));
    std::iota(index.begin(), index.end(), 0.0);
    return make_array(DType::i32, shape, index);
  };
  TestArray tied_keys = random_array(DType::i32, Shape{3, 8}, rng,
                                     [](Rng& r) { return std::floor(uniform(r, 0, 3)); });
  return {
      {"f64[7] alone", {distinct({7})}, SortParams{0, 1}},
      {"f64[5,4] dim 0", {distinct({5, 4})}, SortParams{0, 1}},
      {"f64[3,4,5] dim 1 + positions",
       {distinct({3, 4, 5}), positions({3, 4, 5})},
       SortParams{1, 1}},
      {"f64 keys + f64 values", {distinct({4, 6}), distinct({4, 6})}, SortParams{1, 1}},
      {"i32 keys with ties + f64 values", {tied_keys, distinct({3, 8})}, SortParams{-1, 1}},
  };
}

}  // namespace

std::vector<OpRow> sort_rows() {
  return {OpRow{.prim = prim::sort,
                .cases = sort_cases,
                .oracle = sort_oracle,
                .ref_tolerance = exact,
                .fast_tolerance = exact,
                .grad_cases = sort_grad_cases}};
}

}  // namespace kiln::testing
