// op_table rows for the slicing primitives of the layout family: slice, dynamic_slice,
// dynamic_update_slice and pad. As in rows_shape.cc, each oracle maps output indices back
// to operand elements in plain index arithmetic, and the tolerances are exact.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prims/ids/shape.h"
#include "prims/rows_shape.h"

namespace kiln::testing {
namespace shape_rows_util {
namespace {

// ----- slice ----------------------------------------------------------------------------
struct SliceCase {
  Shape shape;
  Dims start, limit, strides;
};

std::vector<OpCase> slice_cases() {
  std::vector<SliceCase> small{
      {{}, {}, {}, {}},
      {{7}, {2}, {5}, {}},
      {{7}, {0}, {7}, {3}},
      {{7}, {3}, {3}, {}},
      {{0}, {0}, {0}, {}},
      {{5, 6}, {1, 0}, {4, 6}, {1, 1}},
      {{5, 6}, {0, 1}, {5, 6}, {2, 2}},
      {{2, 3, 4}, {0, 1, 1}, {2, 3, 4}, {1, 1, 2}},
      {{33, 17}, {1, 2}, {32, 17}, {}},
      {{4, 1, 5}, {1, 0, 0}, {3, 1, 5}, {}},
      {{3, 4}, {0, 0}, {3, 4}, {}},
      {{9, 8}, {1, 7}, {9, 8}, {4, 100}},
      {{4, 2}, {1, 0}, {4, 2}, {std::numeric_limits<int64_t>::max(), 1}},
  };
  std::vector<SliceCase> large{{{700, 900}, {10, 3}, {690, 899}, {1, 1}},
                               {{300, 1000}, {0, 0}, {300, 1000}, {3, 7}},
                               {{100, 2000}, {0, 5}, {100, 1999}, {1, 2}}};
  std::vector<OpCase> cases;
  Rng rng(14);
  auto add = [&](DType dtype, const SliceCase& s) {
    cases.push_back({label(dtype, {s.shape},
                           fmt::format("{}:{}:{}", dims_to_string(s.start), dims_to_string(s.limit),
                                       dims_to_string(s.strides))),
                     {values_for(dtype, s.shape, rng)},
                     SliceParams{s.start, s.limit, s.strides}});
  };
  for (DType dtype : every_dtype()) {
    for (const auto& s : small) add(dtype, s);
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& s : large) add(dtype, s);
  }
  return cases;
}

std::vector<TestArray> slice_oracle(const OpCase& c) {
  const auto& p = std::get<SliceParams>(c.params);
  const TestArray& x = c.inputs[0];
  auto stride = [&](size_t k) { return p.strides.empty() ? int64_t{1} : p.strides[k]; };
  Shape out;
  for (size_t k = 0; k < p.start_indices.size(); ++k) {
    double span = static_cast<double>(p.limit_indices[k] - p.start_indices[k]);
    out.dims().push_back(static_cast<int64_t>(std::ceil(span / static_cast<double>(stride(k)))));
  }
  std::vector<int64_t> source(static_cast<size_t>(out.rank()));
  return build(out, x.aval.dtype, [&](const std::vector<int64_t>& index) {
    for (size_t k = 0; k < index.size(); ++k) source[k] = p.start_indices[k] + index[k] * stride(k);
    return at(x, source);
  });
}

// ----- dynamic_slice / dynamic_update_slice ---------------------------------------------
constexpr DType kIndexDTypes[] = {DType::i32, DType::i64, DType::u8, DType::u32};

TestArray start_vector(const std::vector<double>& starts, size_t which) {
  DType dtype = kIndexDTypes[which % std::size(kIndexDTypes)];
  std::vector<double> values = starts;
  // Unsigned start vectors cannot hold negative starts; use the clamped value they imply.
  if (is_unsigned(dtype)) {
    for (double& value : values) value = std::max(value, 0.0);
  }
  return make_array(dtype, Shape{static_cast<int64_t>(values.size())}, values);
}

// The XLA clamp: start in [0, size - window].
int64_t clamp_start(double start, int64_t size, int64_t window) {
  return static_cast<int64_t>(std::min(std::max(start, 0.0), static_cast<double>(size - window)));
}

struct DynamicCase {
  Shape shape;
  std::vector<double> starts;
  Shape window;  // slice_sizes, or the update's shape
};

std::vector<DynamicCase> dynamic_small() {
  return {
      {{}, {}, {}},
      {{7}, {2}, {3}},
      {{7}, {-5}, {3}},
      {{7}, {100}, {3}},
      {{7}, {3}, {0}},
      {{7}, {0}, {7}},
      {{5, 6}, {4, 1}, {2, 5}},
      {{2, 3, 4}, {1, 1, 1}, {1, 2, 3}},
      {{2, 3, 4}, {1, 1, 5}, {1, 2, 3}},
      {{33, 17}, {10, -3}, {20, 17}},
      {{33, 17}, {30, 3}, {10, 5}},
      {{0, 3}, {0, 1}, {0, 2}},
  };
}
std::vector<DynamicCase> dynamic_large() {
  return {{{700, 900}, {50, 100}, {600, 700}}, {{300, 400}, {100, 200}, {150, 300}}};
}

std::vector<OpCase> dynamic_slice_cases() {
  std::vector<OpCase> cases;
  Rng rng(15);
  size_t n = 0;
  auto add = [&](DType dtype, const DynamicCase& d) {
    TestArray starts = start_vector(d.starts, n++);
    cases.push_back({label(dtype, {d.shape, d.window}, fmt::format("start {}", starts.values)),
                     {values_for(dtype, d.shape, rng), starts},
                     DynamicSliceParams{d.window.dims()}});
  };
  for (DType dtype : every_dtype()) {
    for (const auto& d : dynamic_small()) add(dtype, d);
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& d : dynamic_large()) add(dtype, d);
  }
  return cases;
}

std::vector<TestArray> dynamic_slice_oracle(const OpCase& c) {
  const TestArray& x = c.inputs[0];
  Shape out(std::get<DynamicSliceParams>(c.params).slice_sizes);
  std::vector<int64_t> source(static_cast<size_t>(out.rank()));
  return build(out, x.aval.dtype, [&](const std::vector<int64_t>& index) {
    for (size_t k = 0; k < index.size(); ++k) {
      auto axis = static_cast<int64_t>(k);
      source[k] = clamp_start(c.inputs[1].values[k], x.aval.shape[axis], out[axis]) + index[k];
    }
    return at(x, source);
  });
}

std::vector<OpCase> dynamic_update_slice_cases() {
  std::vector<OpCase> cases;
  Rng rng(16);
  size_t n = 0;
  auto add = [&](DType dtype, const DynamicCase& d) {
    TestArray starts = start_vector(d.starts, n++);
    cases.push_back({label(dtype, {d.shape, d.window}, fmt::format("start {}", starts.values)),
                     {values_for(dtype, d.shape, rng), values_for(dtype, d.window, rng), starts},
                     NoParams{}});
  };
  for (DType dtype : every_dtype()) {
    for (const auto& d : dynamic_small()) add(dtype, d);
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& d : dynamic_large()) add(dtype, d);
  }
  return cases;
}

std::vector<TestArray> dynamic_update_slice_oracle(const OpCase& c) {
  const TestArray& x = c.inputs[0];
  const TestArray& update = c.inputs[1];
  const Shape& shape = x.aval.shape;
  std::vector<int64_t> within(static_cast<size_t>(shape.rank()));
  return build(shape, x.aval.dtype, [&](const std::vector<int64_t>& index) {
    for (size_t k = 0; k < index.size(); ++k) {
      auto axis = static_cast<int64_t>(k);
      within[k] =
          index[k] - clamp_start(c.inputs[2].values[k], shape[axis], update.aval.shape[axis]);
      if (within[k] < 0 || within[k] >= update.aval.shape[axis]) return at(x, index);
    }
    return at(update, within);
  });
}
// ----- pad ------------------------------------------------------------------------------
struct PadCase {
  Shape shape;
  Dims low, high, interior;
};

std::vector<OpCase> pad_cases() {
  std::vector<PadCase> small{
      {{}, {}, {}, {}},
      {{5}, {2}, {3}, {0}},
      {{5}, {0}, {0}, {2}},
      {{5}, {-2}, {-1}, {0}},
      {{5}, {-3}, {2}, {1}},
      {{0}, {2}, {1}, {3}},
      {{0}, {0}, {0}, {0}},
      {{4}, {-4}, {0}, {0}},
      {{3}, {-7}, {5}, {2}},
      {{3, 4}, {1, -1}, {0, 2}, {1, 0}},
      {{2, 3, 4}, {0, 1, 2}, {1, 0, -1}, {0, 2, 1}},
      {{33, 17}, {2, 3}, {4, 5}, {0, 0}},
      {{2, 0, 3}, {1, 1, 1}, {0, 2, 0}, {1, 1, 1}},
      // Huge params stay legal where they cancel out; kernels must not overflow on them.
      {{1, 3}, {0, 1}, {2, 0}, {int64_t{1} << 62, 0}},
      {{2}, {1 - (int64_t{1} << 62)}, {0}, {int64_t{1} << 62}},
      {{2}, {-(int64_t{1} << 61)}, {-(int64_t{1} << 61) - 2}, {int64_t{1} << 62}},
  };
  std::vector<PadCase> large{{{700, 900}, {5, -3}, {2, 7}, {0, 0}},
                             {{300, 301}, {1, 1}, {1, 1}, {1, 1}}};
  std::vector<OpCase> cases;
  Rng rng(18);
  size_t n = 0;
  auto add = [&](DType dtype, const PadCase& p) {
    TestArray value = values_for(dtype, Shape{}, rng);
    // Sometimes pad with a special value (NaN, -inf, -0 ...) of float dtypes.
    std::vector<double> specials = special_values(dtype);
    if (!specials.empty() && n % 3 == 0) value.values[0] = specials[n / 3 % specials.size()];
    ++n;
    cases.push_back(
        {label(dtype, {p.shape},
               fmt::format("{} {} {} value {}", dims_to_string(p.low), dims_to_string(p.high),
                           dims_to_string(p.interior), value.values[0])),
         {values_for(dtype, p.shape, rng), value},
         PadParams{p.low, p.high, p.interior}});
  };
  for (DType dtype : every_dtype()) {
    for (const auto& p : small) add(dtype, p);
  }
  for (DType dtype : large_dtypes()) {
    for (const auto& p : large) add(dtype, p);
  }
  return cases;
}

std::vector<TestArray> pad_oracle(const OpCase& c) {
  const auto& p = std::get<PadParams>(c.params);
  const TestArray& x = c.inputs[0];
  Shape out;
  for (int64_t axis = 0; axis < x.aval.shape.rank(); ++axis) {
    auto a = static_cast<size_t>(axis);
    int64_t size = x.aval.shape[axis];
    out.dims().push_back(p.low[a] + p.high[a] + size +
                         std::max<int64_t>(size - 1, 0) * p.interior[a]);
  }
  std::vector<int64_t> source(static_cast<size_t>(out.rank()));
  return build(out, x.aval.dtype, [&](const std::vector<int64_t>& index) {
    for (size_t k = 0; k < index.size(); ++k) {
      // Output position low + i * (interior + 1) holds operand element i.
      int64_t offset = index[k] - p.low[k];
      int64_t step = p.interior[k] + 1;
      if (offset < 0 || offset % step != 0 ||
          offset / step >= x.aval.shape[static_cast<int64_t>(k)]) {
        return c.inputs[1].values[0];
      }
      source[k] = offset / step;
    }
    return at(x, source);
  });
}
}  // namespace
}  // namespace shape_rows_util

std::vector<OpRow> shape_slice_rows() {
  namespace u = shape_rows_util;
  return {
      u::second_order(u::copy_row(prim::slice, u::slice_cases, u::slice_oracle)),
      u::copy_row(prim::dynamic_slice, u::dynamic_slice_cases, u::dynamic_slice_oracle),
      u::copy_row(prim::dynamic_update_slice, u::dynamic_update_slice_cases,
                  u::dynamic_update_slice_oracle),
      u::second_order(u::copy_row(prim::pad, u::pad_cases, u::pad_oracle)),
  };
}

}  // namespace kiln::testing
