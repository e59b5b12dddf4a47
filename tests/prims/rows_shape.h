// Helpers shared by the layout family's op_table rows (rows_shape.cc and
// rows_shape_slice.cc): test values, case labels and the index arithmetic of the oracles.
#pragma once

#include <string>
#include <vector>

#include "prims/op_table.h"

namespace kiln::testing::shape_rows_util {

// Flat row-major position of a multi-index, and the element of `array` there.
int64_t ravel(const std::vector<int64_t>& index, const Shape& shape);
double at(const TestArray& array, const std::vector<int64_t>& index);

// Output of `shape` whose element at each multi-index is value(index), in row-major order.
template <typename Fn>
std::vector<TestArray> build(const Shape& shape, DType dtype, Fn&& value) {
  TestArray out{AbstractValue(shape, dtype), {}};
  int64_t count = shape.num_elements();
  out.values.reserve(static_cast<size_t>(count));
  std::vector<int64_t> index(static_cast<size_t>(shape.rank()), 0);
  for (int64_t i = 0; i < count; ++i) {
    out.values.push_back(value(index));
    for (int64_t axis = shape.rank() - 1; axis >= 0; --axis) {
      auto a = static_cast<size_t>(axis);
      if (++index[a] < shape[axis]) break;
      index[a] = 0;
    }
  }
  return {out};
}

// Every dtype, and those that also get the large cases.
std::vector<DType> every_dtype();
std::vector<DType> large_dtypes();

// Values that use every byte of the element (so a copy of the wrong width shows), with
// NaN/Inf/-0/subnormals in float arrays.
TestArray values_for(DType dtype, const Shape& shape, Rng& rng);
std::string label(DType dtype, const std::vector<Shape>& shapes, const std::string& what);

// A row with exact tolerances: the layout primitives copy elements.
OpRow copy_row(PrimId prim, CaseGenerator cases, Oracle oracle);
// `row` with its gradient of the gradient checked as well.
OpRow second_order(OpRow row);

}  // namespace kiln::testing::shape_rows_util

namespace kiln::testing {
// The slicing rows (rows_shape_slice.cc): slice, dynamic_slice, dynamic_update_slice, pad.
std::vector<OpRow> shape_slice_rows();
}  // namespace kiln::testing
