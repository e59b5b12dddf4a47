// Small helpers shared by the reduce and index op_table rows (rows_reduce*.cc,
// rows_index.cc): multi-index arithmetic for the oracles, exact integer wrapping, value
// generators per dtype and the precision figures their tolerances are built from.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "prims/op_table.h"

namespace kiln::testing {

// Row-major coordinates of element `index` of `shape`.
inline Dims unravel(const Shape& shape, int64_t index) {
  Dims coords(static_cast<size_t>(shape.rank()), 0);
  for (int64_t axis = shape.rank() - 1; axis >= 0; --axis) {
    coords[static_cast<size_t>(axis)] = index % shape[axis];
    index /= shape[axis];
  }
  return coords;
}

inline int64_t ravel(const Shape& shape, const Dims& coords) {
  int64_t index = 0;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    index = index * shape[axis] + coords[static_cast<size_t>(axis)];
  }
  return index;
}

inline std::vector<DType> numeric_test_dtypes() {
  return {DType::f32, DType::f64, DType::f16, DType::bf16,
          DType::i32, DType::i64, DType::u8,  DType::u32};
}

// A random value of `dtype`: floats in [-3, 3), integers over a wide part of their range.
inline double random_value(Rng& rng, DType dtype) {
  switch (dtype) {
    case DType::bool_:
      return uniform(rng, 0, 1) < 0.5 ? 0 : 1;
    case DType::u8:
      return std::floor(uniform(rng, 0, 256));
    case DType::u32:
      return std::floor(uniform(rng, 0, 4294967296.0));
    case DType::i32:
      return std::floor(uniform(rng, -2147483648.0, 2147483648.0));
    case DType::i64:
      return std::floor(uniform(rng, -1e15, 1e15));
    default:
      return uniform(rng, -3, 3);
  }
}

// The extreme integers of `dtype`, placed to make sums and products wrap.
inline void insert_int_limits(TestArray& array) {
  std::vector<double> limits;
  switch (array.aval.dtype) {
    case DType::i32:
      limits = {-2147483648.0, 2147483647.0, 2147483647.0};
      break;
    case DType::i64:
      limits = {-9223372036854775808.0, -9223372036854775808.0};
      break;
    case DType::u8:
      limits = {255, 255, 0};
      break;
    case DType::u32:
      limits = {4294967295.0, 4294967295.0, 0};
      break;
    default:
      return;
  }
  for (size_t i = 0; i < limits.size() && i < array.values.size(); ++i) {
    array.values[(i * 104729 + 1) % array.values.size()] = limits[i];
  }
}

// The spacing of 1.0 in a float dtype, and its smallest subnormal (0 for integers).
inline double epsilon_of(DType dtype) {
  return ulp_tolerance(dtype, 1).rtol;
}
inline double denorm_of(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return std::numeric_limits<double>::denorm_min();
    case DType::f32:
      return std::numeric_limits<float>::denorm_min();
    case DType::f16:
      return 0x1p-24;
    case DType::bf16:
      return 0x1p-133;
    default:
      return 0;
  }
}

// A sum of `count` terms whose magnitudes add up to `abs_sum`, accumulated in double and
// rounded once to `dtype`, is within this of the exact sum rounded to `dtype`.
inline Tolerance double_sum_tolerance(DType dtype, double count, double abs_sum) {
  return Tolerance{epsilon_of(dtype), std::max(count, 1.0) * 0x1p-52 * abs_sum + denorm_of(dtype)};
}

}  // namespace kiln::testing
