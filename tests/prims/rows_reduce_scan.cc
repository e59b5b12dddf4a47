// op_table rows for argmax, argmin and cumsum (part of the reduce family; reduce_rows()
// in rows_reduce.cc collects them). The oracles follow numpy: the first extreme wins ties
// and the first NaN counts as the extreme; cumsum accumulates in long double (floats) or
// exactly (integers, then wrapped).
#include <cmath>

#include <fmt/format.h>

#include "prims/ids/reduce.h"
#include "prims/rows_reduce_index_util.h"

namespace kiln::testing {
namespace {

struct AxisCase {
  Shape shape;
  int64_t axis;
};

std::vector<AxisCase> axis_cases(DType dtype, bool allow_empty_axis) {
  std::vector<AxisCase> list{{Shape{1}, 0},       {Shape{7}, 0},       {Shape{3, 5}, 0},
                             {Shape{3, 5}, 1},    {Shape{2, 3, 4}, 0}, {Shape{2, 3, 4}, 1},
                             {Shape{2, 3, 4}, 2}, {Shape{2, 0, 3}, 0}, {Shape{2, 0, 3}, 2},
                             {Shape{33, 17}, 1},  {Shape{4, 1, 6}, 1}};
  if (allow_empty_axis) {
    list.push_back({Shape{0}, 0});
    list.push_back({Shape{2, 0, 3}, 1});
  }
  if (wants_large_cases(dtype)) {
    list.push_back({Shape{1000, 301}, 0});
    list.push_back({Shape{1000, 301}, 1});
    list.push_back({Shape{300007}, 0});
  }
  return list;
}

// [outer, size, inner] around `axis`.
struct Lines {
  int64_t outer = 1, size = 1, inner = 1;
};
Lines lines_of(const Shape& shape, int64_t axis) {
  Lines lines;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (d < axis) lines.outer *= shape[d];
    if (d > axis) lines.inner *= shape[d];
  }
  lines.size = shape[axis];
  return lines;
}

// ----- argmax / argmin ------------------------------------------------------------------

// Few distinct values, so ties are common.
double tie_prone_value(Rng& rng, DType dtype) {
  switch (dtype) {
    case DType::bool_:
      return uniform(rng, 0, 1) < 0.5 ? 0 : 1;
    case DType::u8:
    case DType::u32:
      return std::floor(uniform(rng, 0, 5));
    default:
      return std::floor(uniform(rng, -3, 3));
  }
}

std::vector<OpCase> arg_cases() {
  std::vector<DType> dtypes = numeric_test_dtypes();
  dtypes.push_back(DType::bool_);
  std::vector<OpCase> cases;
  Rng rng(2024);
  int which = 0;
  for (DType dtype : dtypes) {
    for (const AxisCase& a : axis_cases(dtype, false)) {
      DType index_dtype = ++which % 2 == 0 ? DType::i32 : DType::i64;
      TestArray x =
          random_array(dtype, a.shape, rng, [&](Rng& r) { return tie_prone_value(r, dtype); });
      std::string label = fmt::format("{}{} axis {} -> {}", dtype_name(dtype), a.shape.to_string(),
                                      a.axis, dtype_name(index_dtype));
      cases.push_back({label, {x}, ArgReduceParams{a.axis, index_dtype}});
      if (x.values.size() >= 2 && dtype != DType::bool_) {
        insert_specials(x);
        insert_int_limits(x);
        cases.push_back({label + " specials", {x}, ArgReduceParams{a.axis, index_dtype}});
      }
    }
    if (is_floating(dtype)) {
      // Two NaNs and tied infinities in one line: the first NaN wins.
      double nan = std::nan("");
      double inf = INFINITY;
      TestArray x = make_array(dtype, Shape{2, 6},
                               {1, nan, inf, nan, -inf, 2,  //
                                -inf, inf, 0, inf, -inf, -0.0});
      for (int64_t axis : {0, 1}) {
        cases.push_back({fmt::format("{} two NaNs axis {}", dtype_name(dtype), axis),
                         {x},
                         ArgReduceParams{axis, DType::i32}});
      }
    }
  }
  return cases;
}

Oracle arg_oracle(bool is_max) {
  return [is_max](const OpCase& c) {
    const TestArray& x = c.inputs[0];
    const auto& p = std::get<ArgReduceParams>(c.params);
    Lines l = lines_of(x.aval.shape, p.axis);
    Shape out_shape;
    for (int64_t d = 0; d < x.aval.shape.rank(); ++d) {
      if (d != p.axis) out_shape.dims().push_back(x.aval.shape[d]);
    }
    TestArray out{AbstractValue(out_shape, p.index_dtype), {}};
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t q = 0; q < l.inner; ++q) {
        int64_t best = -1;
        for (int64_t k = 0; k < l.size; ++k) {
          double v = x.values[static_cast<size_t>((o * l.size + k) * l.inner + q)];
          if (std::isnan(v)) {
            best = k;
            break;
          }
          double b =
              best < 0 ? 0 : x.values[static_cast<size_t>((o * l.size + best) * l.inner + q)];
          if (best < 0 || (is_max ? v > b : v < b)) best = k;
        }
        out.values.push_back(static_cast<double>(best));
      }
    }
    return std::vector<TestArray>{out};
  };
}

// ----- cumsum ---------------------------------------------------------------------------

std::vector<OpCase> cumsum_cases() {
  std::vector<OpCase> cases;
  Rng rng(77);
  bool reverse = false;
  for (DType dtype : numeric_test_dtypes()) {
    for (const AxisCase& a : axis_cases(dtype, true)) {
      reverse = !reverse;
      TestArray x =
          random_array(dtype, a.shape, rng, [&](Rng& r) { return random_value(r, dtype); });
      std::string label = fmt::format("{}{} axis {}{}", dtype_name(dtype), a.shape.to_string(),
                                      a.axis, reverse ? " reverse" : "");
      cases.push_back({label, {x}, CumsumParams{a.axis, reverse}});
      if (x.values.size() >= 2) {
        insert_specials(x);
        insert_int_limits(x);
        cases.push_back({label + " specials", {x}, CumsumParams{a.axis, !reverse}});
      }
    }
  }
  return cases;
}

std::vector<TestArray> cumsum_oracle(const OpCase& c) {
  const TestArray& x = c.inputs[0];
  const auto& p = std::get<CumsumParams>(c.params);
  Lines l = lines_of(x.aval.shape, p.axis);
  DType dtype = x.aval.dtype;
  TestArray out{x.aval, std::vector<double>(x.values.size())};
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t q = 0; q < l.inner; ++q) {
      long double float_sum = 0;
      __int128 int_sum = 0;
      for (int64_t step = 0; step < l.size; ++step) {
        int64_t k = p.reverse ? l.size - 1 - step : step;
        auto at = static_cast<size_t>((o * l.size + k) * l.inner + q);
        if (is_floating(dtype)) {
          float_sum += x.values[at];
          out.values[at] = static_cast<double>(float_sum);
        } else {
          int_sum += static_cast<__int128>(x.values[at]);
          out.values[at] = wrap_to(dtype, int_sum);
        }
      }
    }
  }
  return {out};
}

// Each output is a running sum accumulated in double and rounded once.
Tolerance cumsum_tolerance(const OpCase& c, DType dtype) {
  const TestArray& x = c.inputs[0];
  const auto& p = std::get<CumsumParams>(c.params);
  Lines l = lines_of(x.aval.shape, p.axis);
  double max_abs_sum = 0;
  for (int64_t o = 0; o < l.outer; ++o) {
    for (int64_t q = 0; q < l.inner; ++q) {
      double abs_sum = 0;
      for (int64_t k = 0; k < l.size; ++k) {
        double v = std::fabs(x.values[static_cast<size_t>((o * l.size + k) * l.inner + q)]);
        if (std::isfinite(v)) abs_sum += v;
      }
      max_abs_sum = std::max(max_abs_sum, abs_sum);
    }
  }
  return double_sum_tolerance(dtype, static_cast<double>(l.size), max_abs_sum);
}

}  // namespace

std::vector<OpRow> arg_reduce_and_scan_rows() {
  auto exact = [](const OpCase&, DType) { return Tolerance{0, 0}; };
  OpRow cumsum_row{.prim = prim::cumsum,
                   .cases = cumsum_cases,
                   .oracle = cumsum_oracle,
                   .ref_tolerance = cumsum_tolerance,
                   .fast_tolerance = cumsum_tolerance};
  cumsum_row.second_order = true;
  return {OpRow{.prim = prim::argmax,
                .cases = arg_cases,
                .oracle = arg_oracle(true),
                .ref_tolerance = exact,
                .fast_tolerance = exact},
          OpRow{.prim = prim::argmin,
                .cases = arg_cases,
                .oracle = arg_oracle(false),
                .ref_tolerance = exact,
                .fast_tolerance = exact},
          cumsum_row};
}

}  // namespace kiln::testing
