// The total order the sort primitive uses, and how its operands split into 1-D lines.
// Floats order -inf < ... < -0 == 0 < ... < inf < NaN with every NaN equal (numpy and
// XLA's order, so a stable sort never splits zeros or NaNs by their bits); integers and
// bool order as numbers. Shared by the reference and fast sort kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/element_convert.h"
#include "kiln/shape.h"

namespace kiln::sorting {

// -1, 0 or 1 as a orders before, with or after b.
template <typename S>
int compare(S a_stored, S b_stored) {
  auto a = widen(a_stored);
  auto b = widen(b_stored);
  if constexpr (std::is_floating_point_v<decltype(a)>) {
    bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) return static_cast<int>(a_nan) - static_cast<int>(b_nan);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Element i and j of a typed buffer compared with compare<S>.
inline int compare_at(DType dtype, const void* data, int64_t i, int64_t j) {
  return visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    const S* values = static_cast<const S*>(data);
    return compare(values[i], values[j]);
  });
}

// The operand seen as outer x length x inner: line (o, i) holds the elements
// (o * length + k) * inner + i for k in [0, length).
struct Lines {
  int64_t outer = 1;
  int64_t length = 1;
  int64_t inner = 1;
  int64_t count() const { return outer * inner; }
  // Offset of element k of line `line` (numbered o * inner + i).
  int64_t at(int64_t line, int64_t k) const {
    return ((line / inner) * length + k) * inner + line % inner;
  }
};

inline Lines lines_of(const Shape& shape, int64_t dimension) {
  if (dimension < 0) dimension += shape.rank();
  Lines lines;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (axis < dimension) lines.outer *= shape[axis];
    if (axis == dimension) lines.length = shape[axis];
    if (axis > dimension) lines.inner *= shape[axis];
  }
  return lines;
}

}  // namespace kiln::sorting
