// op_table rows for the window family: reduce_window_max, reduce_window_sum and
// select_and_scatter_add. The oracles walk each output cell's window over the conceptually
// padded operand (padding is -inf for max, 0 for sum) in double, integers exactly and
// wrapped; select_and_scatter_add's finds each window's first maximum and adds its source.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "prims/ids/window.h"
#include "prims/op_table.h"

namespace kiln::testing {
namespace {

struct WindowSpec {
  std::string label;
  Shape shape;
  ReduceWindowParams params;
  bool large = false;
};

// NHWC pooling over H and W.
ReduceWindowParams hw(Dims window, Dims strides, Dims low = {0, 0}, Dims high = {0, 0}) {
  return ReduceWindowParams{Dims{1, window[0], window[1], 1}, Dims{1, strides[0], strides[1], 1},
                            Dims{0, low[0], low[1], 0}, Dims{0, high[0], high[1], 0}};
}

std::vector<WindowSpec> window_specs() {
  return {
      {"2x2 stride 2", Shape{2, 6, 6, 3}, hw({2, 2}, {2, 2})},
      {"2x2 stride 2 odd sizes", Shape{2, 7, 5, 3}, hw({2, 2}, {2, 2})},
      {"3x3 stride 1 padded", Shape{1, 5, 5, 2}, hw({3, 3}, {1, 1}, {1, 1}, {1, 1})},
      {"3x3 stride 2 asymmetric", Shape{2, 6, 7, 4}, hw({3, 3}, {2, 2}, {0, 1}, {1, 1})},
      {"3x2 stride 3x1", Shape{1, 8, 6, 5}, hw({3, 2}, {3, 1})},
      {"windows of padding only", Shape{1, 2, 2, 1}, hw({2, 2}, {1, 1}, {3, 3}, {0, 0})},
      {"negative padding", Shape{1, 6, 6, 2}, hw({2, 2}, {1, 1}, {-1, -1}, {0, -2})},
      {"window larger than input", Shape{1, 2, 3, 2}, hw({3, 3}, {1, 1})},
      {"N=0", Shape{0, 4, 4, 2}, hw({2, 2}, {2, 2})},
      {"C=1", Shape{3, 5, 5, 1}, hw({2, 2}, {1, 1})},
      {"1-D", Shape{10}, ReduceWindowParams{{3}, {2}, {0}, {0}}},
      {"1-D padded", Shape{7}, ReduceWindowParams{{4}, {1}, {2}, {1}}},
      {"2-D", Shape{5, 7}, ReduceWindowParams{{2, 3}, {1, 2}, {0, 1}, {1, 0}}},
      {"3-D over all axes", Shape{3, 4, 5},
       ReduceWindowParams{{2, 2, 2}, {1, 2, 2}, {0, 0, 1}, {1, 0, 0}}},
      {"NHWC window over C too", Shape{1, 4, 4, 6},
       ReduceWindowParams{{1, 2, 2, 3}, {1, 2, 2, 3}, {0, 0, 0, 0}, {0, 0, 0, 0}}},
      {"rank 0", Shape{}, ReduceWindowParams{}},
      {"empty axis", Shape{0}, ReduceWindowParams{{1}, {1}, {0}, {0}}},
      {"large cnn pool", Shape{16, 26, 26, 32}, hw({2, 2}, {2, 2}), true},
      {"large same 3x3", Shape{4, 33, 31, 17}, hw({3, 3}, {2, 2}, {1, 1}, {1, 1}), true},
  };
}

double window_value(Rng& rng, DType dtype) {
  switch (dtype) {
    case DType::u8:
      return std::floor(uniform(rng, 0, 256));
    case DType::i32:
      return std::floor(uniform(rng, -2147483648.0, 2147483647.0));
    default:
      return uniform(rng, -4, 4);
  }
}

std::vector<OpCase> window_cases() {
  std::vector<OpCase> cases;
  Rng rng(31);
  std::vector<DType> dtypes{std::begin(kFloatDTypes), std::end(kFloatDTypes)};
  dtypes.push_back(DType::i32);
  dtypes.push_back(DType::u8);
  for (DType dtype : dtypes) {
    for (const WindowSpec& spec : window_specs()) {
      if (spec.large && !wants_large_cases(dtype)) continue;
      TestArray x =
          random_array(dtype, spec.shape, rng, [&](Rng& r) { return window_value(r, dtype); });
      insert_specials(x);
      cases.push_back(
          {fmt::format("{} {} {}", dtype_name(dtype), spec.label, spec.shape.to_string()),
           {x},
           spec.params});
    }
  }
  return cases;
}

double lowest_of(DType dtype) {
  switch (dtype) {
    case DType::u8:
      return 0;
    case DType::i32:
      return -2147483648.0;
    default:
      return -std::numeric_limits<double>::infinity();
  }
}

Oracle window_oracle(bool is_max) {
  return [is_max](const OpCase& c) {
    const auto& p = std::get<ReduceWindowParams>(c.params);
    const TestArray& x = c.inputs[0];
    const Shape& in = x.aval.shape;
    int64_t rank = in.rank();
    std::vector<int64_t> out_sizes;
    for (int64_t axis = 0; axis < rank; ++axis) {
      size_t a = static_cast<size_t>(axis);
      int64_t padded = in[axis] + p.padding_low[a] + p.padding_high[a];
      out_sizes.push_back(padded < p.window_dimensions[a]
                              ? 0
                              : (padded - p.window_dimensions[a]) / p.window_strides[a] + 1);
    }
    Shape out_shape{std::span<const int64_t>(out_sizes)};
    TestArray out{AbstractValue(out_shape, x.aval.dtype), {}};
    bool ints = !is_floating(x.aval.dtype);
    int64_t window_cells = 1;
    for (int64_t size : p.window_dimensions) window_cells *= size;
    for (int64_t flat = 0; flat < out_shape.num_elements(); ++flat) {
      std::vector<int64_t> at(static_cast<size_t>(rank));
      for (int64_t axis = rank - 1, rest = flat; axis >= 0; --axis) {
        at[static_cast<size_t>(axis)] = rest % out_sizes[static_cast<size_t>(axis)];
        rest /= out_sizes[static_cast<size_t>(axis)];
      }
      double best = lowest_of(x.aval.dtype), sum = 0;
      bool saw_nan = false;
      __int128 exact = 0;
      for (int64_t cell = 0; cell < window_cells; ++cell) {
        int64_t offset = 0;
        bool inside = true;
        for (int64_t axis = rank - 1, rest = cell, stride = 1; axis >= 0; --axis) {
          size_t a = static_cast<size_t>(axis);
          int64_t tap = rest % p.window_dimensions[a];
          rest /= p.window_dimensions[a];
          int64_t pos = at[a] * p.window_strides[a] + tap - p.padding_low[a];
          if (pos < 0 || pos >= in[axis]) inside = false;
          offset += pos * stride;
          stride *= in[axis];
        }
        if (!inside) continue;  // padding: -inf for max, 0 for sum
        double value = x.values[static_cast<size_t>(offset)];
        if (std::isnan(value)) saw_nan = true;
        best = std::max(best, value);
        sum += value;
        exact += static_cast<__int128>(ints ? value : 0);
      }
      if (is_max) {
        out.values.push_back(saw_nan ? NAN : best);
      } else {
        out.values.push_back(ints ? wrap_to(x.aval.dtype, exact) : sum);
      }
    }
    return std::vector<TestArray>{out};
  };
}

// ----- gradient cases ---------------------------------------------------------------------

// f64 values that are all distinct and at least 4 / size apart, so that no window's maximum
// is tied or changes under the finite-difference step.
TestArray distinct_values(const Shape& shape, Rng& rng) {
  auto size = static_cast<size_t>(shape.num_elements());
  std::vector<double> values(size);
  for (size_t i = 0; i < size; ++i)
    values[i] = -2.0 + 4.0 * static_cast<double>(i) / static_cast<double>(size);
  std::shuffle(values.begin(), values.end(), rng);
  return make_array(DType::f64, shape, values);
}

// Every spec that has no window made only of padding (whose maximum is -inf), plus
// overlapping windows that share their maximum.
std::vector<OpCase> window_grad_cases(bool is_max) {
  std::vector<WindowSpec> specs;
  for (const WindowSpec& spec : window_specs()) {
    if (!spec.large && (!is_max || spec.label != "windows of padding only")) specs.push_back(spec);
  }
  specs.push_back({"3x3 stride 1 overlapping", Shape{2, 5, 6, 2}, hw({3, 3}, {1, 1})});
  specs.push_back({"2x3 stride 1x2 padded, overlapping", Shape{1, 6, 7, 3},
                   hw({2, 3}, {1, 2}, {1, 1}, {0, 1})});
  std::vector<OpCase> cases;
  Rng rng(606);
  for (const WindowSpec& spec : specs) {
    TestArray x = is_max ? distinct_values(spec.shape, rng)
                         : random_array(DType::f64, spec.shape, rng,
                                        [](Rng& r) { return uniform(r, -1, 1); });
    cases.push_back(
        {fmt::format("f64 {} {}", spec.label, spec.shape.to_string()), {x}, spec.params});
  }
  if (is_max) {
    // Ties below every window's maximum: each window holds at least one cell at even (h, w),
    // which hold distinct values above 3; every other cell is -1.
    for (const auto& [label, params] :
         {std::pair{"ties below the maximum, 2x2 stride 2", hw({2, 2}, {2, 2})},
          std::pair{"ties below the maximum, 3x3 padded", hw({3, 3}, {1, 1}, {1, 1}, {1, 1})}}) {
      Shape shape{1, 6, 6, 2};
      TestArray x = distinct_values(shape, rng);
      for (size_t i = 0; i < x.values.size(); ++i) {
        int64_t h = static_cast<int64_t>(i) / 12, w = static_cast<int64_t>(i) / 2 % 6;
        x.values[i] = h % 2 == 0 && w % 2 == 0 ? 5.0 + x.values[i] : -1.0;
      }
      cases.push_back({fmt::format("f64 {} {}", label, shape.to_string()), {x}, params});
    }
  }
  return cases;
}

// ----- select_and_scatter_add ------------------------------------------------------------

Shape windows_shape(const Shape& in, const ReduceWindowParams& p) {
  std::vector<int64_t> sizes;
  for (int64_t axis = 0; axis < in.rank(); ++axis) {
    size_t a = static_cast<size_t>(axis);
    int64_t padded = in[axis] + p.padding_low[a] + p.padding_high[a];
    int64_t window = p.window_dimensions[a];
    sizes.push_back(padded < window ? 0 : (padded - window) / p.window_strides[a] + 1);
  }
  return Shape{std::span<const int64_t>(sizes)};
}

// The window specs plus strides beyond the window, size-1 axes and hand-made windows: all
// -inf with padding around, several NaNs, ties between +0 and -0.
std::vector<std::pair<WindowSpec, std::vector<double>>> scatter_specs() {
  std::vector<std::pair<WindowSpec, std::vector<double>>> specs;
  for (const WindowSpec& spec : window_specs()) specs.push_back({spec, {}});
  specs.push_back({{"2x2 stride 3", Shape{2, 8, 7, 3}, hw({2, 2}, {3, 3})}, {}});
  specs.push_back({{"3x3 stride 1 overlapping", Shape{2, 5, 6, 2}, hw({3, 3}, {1, 1})}, {}});
  specs.push_back({{"size-1 axes", Shape{1, 1, 5, 1}, hw({1, 2}, {1, 1}, {0, 1}, {0, 0})}, {}});
  double inf = std::numeric_limits<double>::infinity();
  specs.push_back({{"-inf with padding", Shape{1, 2, 2, 1}, hw({3, 3}, {1, 1}, {1, 1}, {1, 1})},
                   {-inf, -inf, -inf, -inf}});
  specs.push_back({{"NaNs and signed zeros", Shape{1, 3, 3, 1}, hw({2, 2}, {1, 1})},
                   {0.0, -0.0, NAN, -0.0, NAN, 1.0, 0.0, -1.0, NAN}});
  return specs;
}

std::vector<OpCase> scatter_cases() {
  std::vector<OpCase> cases;
  Rng rng(77);
  size_t index = 0;
  for (DType dtype : kFloatDTypes) {
    for (const auto& [spec, values] : scatter_specs()) {
      if (spec.large && !wants_large_cases(dtype)) continue;
      TestArray x;
      if (!values.empty()) {
        x = make_array(dtype, spec.shape, values);
      } else {
        // Every other spec draws from few values, so windows hold ties.
        bool ties = index++ % 2 == 0;
        x = random_array(dtype, spec.shape, rng, [&](Rng& r) {
          return ties ? std::floor(uniform(r, -2, 2)) : uniform(r, -4, 4);
        });
        insert_specials(x);
      }
      TestArray source = random_array(dtype, windows_shape(spec.shape, spec.params), rng,
                                      [](Rng& r) { return uniform(r, -4, 4); });
      cases.push_back(
          {fmt::format("{} {} {}", dtype_name(dtype), spec.label, spec.shape.to_string()),
           {source, x},
           spec.params});
    }
  }
  return cases;
}

// Each window's source value goes to the window's first maximum in row-major window
// order, a NaN maximum being the window's first NaN; padding never receives.
std::vector<TestArray> select_and_scatter_oracle(const OpCase& c) {
  const auto& p = std::get<ReduceWindowParams>(c.params);
  const TestArray& source = c.inputs[0];
  const TestArray& x = c.inputs[1];
  const Shape& in = x.aval.shape;
  const Shape& windows = source.aval.shape;
  int64_t rank = in.rank();
  int64_t window_cells = 1;
  for (int64_t size : p.window_dimensions) window_cells *= size;
  TestArray out{x.aval, std::vector<double>(x.values.size(), 0.0)};
  for (int64_t flat = 0; flat < windows.num_elements(); ++flat) {
    std::vector<int64_t> at(static_cast<size_t>(rank));
    for (int64_t axis = rank - 1, rest = flat; axis >= 0; --axis) {
      at[static_cast<size_t>(axis)] = rest % windows[axis];
      rest /= windows[axis];
    }
    // The maximum first (NaN if any), then its first occurrence.
    std::vector<int64_t> cells;
    for (int64_t cell = 0; cell < window_cells; ++cell) {
      int64_t offset = 0;
      bool inside = true;
      for (int64_t axis = rank - 1, rest = cell, stride = 1; axis >= 0; --axis) {
        size_t a = static_cast<size_t>(axis);
        int64_t pos =
            at[a] * p.window_strides[a] + rest % p.window_dimensions[a] - p.padding_low[a];
        rest /= p.window_dimensions[a];
        if (pos < 0 || pos >= in[axis]) inside = false;
        offset += pos * stride;
        stride *= in[axis];
      }
      if (inside) cells.push_back(offset);
    }
    if (cells.empty()) continue;
    double best = -std::numeric_limits<double>::infinity();
    bool saw_nan = false;
    for (int64_t cell : cells) {
      double value = x.values[static_cast<size_t>(cell)];
      saw_nan = saw_nan || std::isnan(value);
      best = std::max(best, value);
    }
    for (int64_t cell : cells) {
      double value = x.values[static_cast<size_t>(cell)];
      if (saw_nan ? std::isnan(value) : value == best) {
        out.values[static_cast<size_t>(cell)] += source.values[static_cast<size_t>(flat)];
        break;
      }
    }
  }
  return {out};
}

// f64 operands with distinct values (the selection, and so the result, does not move under
// the finite-difference step: the operand's cotangent is zero) and random sources.
std::vector<OpCase> scatter_grad_cases() {
  std::vector<OpCase> cases;
  Rng rng(808);
  for (const auto& [spec, values] : scatter_specs()) {
    if (spec.large || !values.empty()) continue;
    TestArray x = distinct_values(spec.shape, rng);
    TestArray source = random_array(DType::f64, windows_shape(spec.shape, spec.params), rng,
                                    [](Rng& r) { return uniform(r, -1, 1); });
    cases.push_back(
        {fmt::format("f64 {} {}", spec.label, spec.shape.to_string()), {source, x}, spec.params});
  }
  return cases;
}

}  // namespace

std::vector<OpRow> window_rows() {
  auto exact = [](const OpCase&, DType) { return Tolerance{0, 0}; };
  return {
      OpRow{.prim = prim::reduce_window_max,
            .cases = window_cases,
            .oracle = window_oracle(true),
            .ref_tolerance = exact,
            .fast_tolerance = exact,
            .grad_cases = [] { return window_grad_cases(true); }},
      OpRow{.prim = prim::reduce_window_sum,
            .cases = window_cases,
            .oracle = window_oracle(false),
            .grad_cases = [] { return window_grad_cases(false); },
            .second_order = true},
      OpRow{.prim = prim::select_and_scatter_add,
            .cases = scatter_cases,
            .oracle = select_and_scatter_oracle,
            .fast_tolerance = exact,
            .grad_cases = scatter_grad_cases,
            .second_order = true},
  };
}

}  // namespace kiln::testing
