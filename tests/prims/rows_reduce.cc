// op_table rows for the reduce family: reduce_sum/max/min/prod over sets of axes (this
// file) and argmax/argmin/cumsum (rows_reduce_scan.cc). The oracles walk multi-indices
// and accumulate floats in long double and integers exactly (then wrap to the dtype), so
// they share no code with the kernels.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "prims/ids/reduce.h"
#include "prims/rows_reduce_index_util.h"

namespace kiln::testing {

std::vector<OpRow> arg_reduce_and_scan_rows();

namespace {

enum class Kind { kSum, kMax, kMin, kProd };

struct ReduceGeometry {
  Shape shape;
  Dims axes;
};

// No axes, all axes, leading / trailing / middle / non-contiguous axes, size-1 and empty
// axes, empty reductions, rank 0; large shapes exercise the fast kernels' row blocks,
// column chunks and split reduced axes.
std::vector<ReduceGeometry> geometries(DType dtype, Kind kind) {
  std::vector<ReduceGeometry> list{
      {Shape{}, {}},
      {Shape{0}, {0}},
      {Shape{0}, {}},
      {Shape{1}, {0}},
      {Shape{7}, {0}},
      {Shape{7}, {}},
      {Shape{3, 5}, {0}},
      {Shape{3, 5}, {1}},
      {Shape{3, 5}, {0, 1}},
      {Shape{2, 3, 4}, {1}},
      {Shape{2, 3, 4}, {0, 2}},
      {Shape{2, 3, 4}, {0, 1}},
      {Shape{2, 3, 4}, {1, 2}},
      {Shape{2, 3, 4}, {0, 1, 2}},
      {Shape{2, 0, 3}, {1}},
      {Shape{2, 0, 3}, {0, 2}},
      {Shape{4, 1, 5}, {1}},
      {Shape{4, 1, 5}, {0, 1}},
      {Shape{33, 17}, {0}},
      {Shape{33, 17}, {1}},
      {Shape{3, 1, 37, 5}, {1, 2}},
  };
  if (wants_large_cases(dtype)) {
    list.push_back({Shape{300007}, {0}});
    // Only the fast kernels (sum, max, min) have layouts to tell apart at this size.
    if (kind != Kind::kProd) {
      list.push_back({Shape{1000, 301}, {0}});
      list.push_back({Shape{1000, 301}, {1}});
      list.push_back({Shape{3, 70001}, {1}});
      list.push_back({Shape{5, 200, 70}, {1}});
      list.push_back({Shape{70, 8, 64}, {1}});
      list.push_back({Shape{40, 1000}, {0}});
    }
  }
  return list;
}

double value_for(Kind kind, Rng& rng, DType dtype) {
  if (kind != Kind::kProd) return random_value(rng, dtype);
  // Products: factors near 1 (floats) or small (integers) so results stay interesting.
  double sign = uniform(rng, 0, 1) < 0.5 ? -1 : 1;
  if (is_floating(dtype)) return sign * std::exp(uniform(rng, -0.05, 0.05));
  double magnitude = std::floor(uniform(rng, 1, 4));
  return is_unsigned(dtype) ? magnitude : sign * magnitude;
}

std::vector<OpCase> reduce_cases(Kind kind) {
  std::vector<DType> dtypes = numeric_test_dtypes();
  if (kind == Kind::kMax || kind == Kind::kMin) dtypes.push_back(DType::bool_);
  std::vector<OpCase> cases;
  Rng rng(static_cast<uint64_t>(kind) + 41);
  for (DType dtype : dtypes) {
    for (const ReduceGeometry& g : geometries(dtype, kind)) {
      TestArray x =
          random_array(dtype, g.shape, rng, [&](Rng& r) { return value_for(kind, r, dtype); });
      std::string label = fmt::format("{}{} axes{}", dtype_name(dtype), g.shape.to_string(),
                                      dims_to_string(g.axes));
      // Plain values check accuracy; a second case adds NaN/Inf/extremes.
      cases.push_back({label, {x}, ReduceParams{g.axes}});
      bool small = x.values.size() < 10000;
      bool chosen_large = g.shape == Shape{300007} || g.shape == Shape{1000, 301};
      if (x.values.size() >= 2 && dtype != DType::bool_ && (small || chosen_large)) {
        insert_specials(x);
        insert_int_limits(x);
        x = make_array(dtype, g.shape, x.values);
        cases.push_back({label + " specials", {x}, ReduceParams{g.axes}});
      }
    }
  }
  return cases;
}

// The output element each input element contributes to.
struct Grouping {
  Shape out;
  std::vector<int64_t> target;  // per input element
};
Grouping group(const OpCase& c) {
  const Shape& in = c.inputs[0].aval.shape;
  const Dims& axes = std::get<ReduceParams>(c.params).axes;
  auto reduced = [&](int64_t axis) {
    for (int64_t a : axes) {
      if (a == axis) return true;
    }
    return false;
  };
  Grouping g;
  for (int64_t axis = 0; axis < in.rank(); ++axis) {
    if (!reduced(axis)) g.out.dims().push_back(in[axis]);
  }
  // Walk the input's coordinates like an odometer; the output index is the kept
  // coordinates in row-major order.
  Dims out_stride(static_cast<size_t>(in.rank()), 0);
  for (int64_t axis = in.rank() - 1, stride = 1; axis >= 0; --axis) {
    if (reduced(axis)) continue;
    out_stride[static_cast<size_t>(axis)] = stride;
    stride *= in[axis];
  }
  Dims coords(static_cast<size_t>(in.rank()), 0);
  int64_t target = 0;
  g.target.reserve(static_cast<size_t>(in.num_elements()));
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    g.target.push_back(target);
    for (int64_t axis = in.rank() - 1; axis >= 0; --axis) {
      auto a = static_cast<size_t>(axis);
      target += out_stride[a];
      if (++coords[a] < in[axis]) break;
      target -= out_stride[a] * in[axis];
      coords[a] = 0;
    }
  }
  return g;
}

Oracle reduce_oracle(Kind kind) {
  return [kind](const OpCase& c) {
    const TestArray& x = c.inputs[0];
    DType dtype = x.aval.dtype;
    Grouping g = group(c);
    auto n = static_cast<size_t>(g.out.num_elements());
    TestArray out{AbstractValue(g.out, dtype), std::vector<double>(n)};
    if (is_floating(dtype)) {
      long double identity = kind == Kind::kSum    ? 0.0L
                             : kind == Kind::kProd ? 1.0L
                             : kind == Kind::kMax  ? -INFINITY
                                                   : INFINITY;
      std::vector<long double> acc(n, identity);
      for (size_t i = 0; i < x.values.size(); ++i) {
        long double& a = acc[static_cast<size_t>(g.target[i])];
        long double v = x.values[i];
        switch (kind) {
          case Kind::kSum:
            a += v;
            break;
          case Kind::kProd:
            // In double like the kernels: with a long double's wider exponent range the
            // specials (largest * subnormal * ...) would not overflow where they do.
            a = static_cast<double>(a) * static_cast<double>(v);
            break;
          case Kind::kMax:
          case Kind::kMin:
            if (std::isnan(a)) break;
            if (std::isnan(v) || (kind == Kind::kMax ? v > a : v < a)) a = v;
            break;
        }
      }
      for (size_t k = 0; k < n; ++k) out.values[k] = static_cast<double>(acc[k]);
    } else {
      // Sums exactly in 128 bits; products modulo 2^64 (enough for any width up to 64).
      bool is_bool = dtype == DType::bool_;
      double lowest = is_bool ? 0 : -std::numeric_limits<double>::infinity();
      std::vector<__int128> sums(n, 0);
      std::vector<uint64_t> products(n, 1);
      std::vector<double> extremes(n, kind == Kind::kMax ? lowest : -lowest);
      if (is_bool && kind == Kind::kMin) std::fill(extremes.begin(), extremes.end(), 1.0);
      for (size_t i = 0; i < x.values.size(); ++i) {
        auto t = static_cast<size_t>(g.target[i]);
        double v = x.values[i];
        sums[t] += static_cast<__int128>(v);
        products[t] *= static_cast<uint64_t>(static_cast<__int128>(v));
        extremes[t] = kind == Kind::kMax ? std::max(extremes[t], v) : std::min(extremes[t], v);
      }
      for (size_t k = 0; k < n; ++k) {
        switch (kind) {
          case Kind::kSum:
            out.values[k] = wrap_to(dtype, sums[k]);
            break;
          case Kind::kProd:
            out.values[k] = wrap_to(dtype, static_cast<__int128>(products[k]));
            break;
          default:
            // An empty integer max/min is the dtype's lowest/highest value.
            if (std::isinf(extremes[k])) {
              double limit = kind == Kind::kMax ? (dtype == DType::i32   ? -2147483648.0
                                                   : dtype == DType::i64 ? -9223372036854775808.0
                                                                         : 0.0)
                                                : (dtype == DType::i32   ? 2147483647.0
                                                   : dtype == DType::i64 ? 9223372036854775807.0
                                                   : dtype == DType::u8  ? 255.0
                                                                         : 4294967295.0);
              extremes[k] = limit;
            }
            out.values[k] = extremes[k];
        }
      }
    }
    return std::vector<TestArray>{out};
  };
}

// Largest group size and largest sum of finite magnitudes over the output elements.
std::pair<double, double> group_stats(const OpCase& c) {
  Grouping g = group(c);
  std::vector<double> count(static_cast<size_t>(g.out.num_elements()), 0);
  std::vector<double> abs_sum(count.size(), 0);
  for (size_t i = 0; i < c.inputs[0].values.size(); ++i) {
    auto t = static_cast<size_t>(g.target[i]);
    count[t] += 1;
    double v = std::fabs(c.inputs[0].values[i]);
    if (std::isfinite(v)) abs_sum[t] += v;
  }
  double max_count = 0, max_abs_sum = 0;
  for (size_t k = 0; k < count.size(); ++k) {
    max_count = std::max(max_count, count[k]);
    max_abs_sum = std::max(max_abs_sum, abs_sum[k]);
  }
  return {max_count, max_abs_sum};
}

// Sums differ from the exact value by the double accumulation error (count * 2^-52 *
// sum|x|) plus the final rounding; products by a relative count * 2^-52.
ToleranceRule reduce_tolerance(Kind kind) {
  return [kind](const OpCase& c, DType dtype) -> Tolerance {
    if (kind == Kind::kMax || kind == Kind::kMin) return {0, 0};
    auto [count, abs_sum] = group_stats(c);
    if (kind == Kind::kSum) return double_sum_tolerance(dtype, count, abs_sum);
    return {epsilon_of(dtype) + count * 0x1p-52, denorm_of(dtype)};
  };
}

OpRow reduce_row(PrimId prim, Kind kind) {
  return OpRow{.prim = prim,
               .cases = [kind] { return reduce_cases(kind); },
               .oracle = reduce_oracle(kind),
               .ref_tolerance = reduce_tolerance(kind),
               .fast_tolerance = reduce_tolerance(kind)};
}

// Gradient cases for reduce_max/min: distinct f64 values (a tie has no derivative for
// finite differences to check; tests/transforms/vjp_rules_test.cc checks how ties share
// the cotangent), and no empty reductions (their constant -inf/inf results difference to
// NaN).
std::vector<OpCase> extremum_grad_cases() {
  std::vector<OpCase> cases;
  Rng rng(98);
  for (const ReduceGeometry& g : geometries(DType::f64, Kind::kMax)) {
    if (g.shape.num_elements() > 4096) continue;
    OpCase c{fmt::format("f64{} axes{}", g.shape.to_string(), dims_to_string(g.axes)),
             {random_array(DType::f64, g.shape, rng, [](Rng& r) { return uniform(r, 0.5, 1.5); })},
             ReduceParams{g.axes}};
    if (g.shape.num_elements() == 0 && group(c).out.num_elements() > 0) continue;
    cases.push_back(std::move(c));
  }
  return cases;
}

// Gradient cases for reduce_prod: f64 factors of either sign away from zero, then the same
// with one zero (mid-group, so both the products before and after it matter) and with two
// zeros in the first element's group, where dividing the product by x would fail.
std::vector<OpCase> prod_grad_cases() {
  std::vector<OpCase> cases;
  Rng rng(97);
  auto factor = [](Rng& r) {
    double magnitude = uniform(r, 0.5, 1.5);
    return uniform(r, 0, 1) < 0.5 ? -magnitude : magnitude;
  };
  for (const ReduceGeometry& g : geometries(DType::f64, Kind::kProd)) {
    if (g.shape.num_elements() > 4096) continue;
    std::string label = fmt::format("f64{} axes{}", g.shape.to_string(), dims_to_string(g.axes));
    OpCase plain{label, {random_array(DType::f64, g.shape, rng, factor)}, ReduceParams{g.axes}};
    cases.push_back(plain);
    if (plain.inputs[0].values.empty()) continue;
    Grouping grouping = group(plain);
    std::vector<size_t> first_group;
    for (size_t i = 0; i < grouping.target.size(); ++i) {
      if (grouping.target[i] == grouping.target[0]) first_group.push_back(i);
    }
    OpCase one_zero = plain;
    one_zero.label += " one zero";
    one_zero.inputs[0].values[first_group[first_group.size() / 2]] = 0;
    cases.push_back(one_zero);
    if (first_group.size() >= 2) {
      OpCase two_zeros = plain;
      two_zeros.label += " two zeros";
      two_zeros.inputs[0].values[first_group.front()] = 0;
      two_zeros.inputs[0].values[first_group.back()] = 0;
      cases.push_back(two_zeros);
    }
  }
  return cases;
}

}  // namespace

std::vector<OpRow> reduce_rows() {
  std::vector<OpRow> rows{
      reduce_row(prim::reduce_sum, Kind::kSum), reduce_row(prim::reduce_max, Kind::kMax),
      reduce_row(prim::reduce_min, Kind::kMin), reduce_row(prim::reduce_prod, Kind::kProd)};
  // reduce_sum's gradient cases are the f32 cases moved into [0.5, 1.5] (the default).
  rows[0].second_order = true;
  rows[1].second_order = true;
  rows[1].grad_cases = extremum_grad_cases;
  rows[2].grad_cases = extremum_grad_cases;
  rows[3].second_order = true;
  rows[3].grad_cases = prod_grad_cases;
  for (OpRow& row : arg_reduce_and_scan_rows()) rows.push_back(std::move(row));
  return rows;
}

}  // namespace kiln::testing
