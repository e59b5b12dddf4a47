// Walks an output shape in row-major order while tracking the matching element offset in
// each rank-equal operand that broadcasts to it (stride 0 on its size-1 axes).
#pragma once

#include <array>
#include <cstdint>

#include "kiln/shape.h"

namespace kiln {

// Row-major element strides of `operand` seen through broadcasting to `out`.
inline Dims broadcast_strides(const Shape& operand, const Shape& out) {
  if (operand.rank() == 0) return Dims(static_cast<size_t>(out.rank()), 0);  // a scalar
  Dims strides = operand.strides();
  for (int64_t axis = 0; axis < out.rank(); ++axis) {
    if (operand[axis] == 1 && out[axis] != 1) strides[static_cast<size_t>(axis)] = 0;
  }
  return strides;
}

// Calls fn(i, offsets) for each output element i, where offsets[k] is operand k's offset.
template <size_t K, typename Fn>
void for_each_broadcast(const Shape& out, const std::array<Dims, K>& strides, Fn&& fn) {
  int64_t total = out.num_elements();
  if (total == 0) return;
  int64_t rank = out.rank();
  Dims index(static_cast<size_t>(rank), 0);
  std::array<int64_t, K> offsets{};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offsets);
    // Increment the multi-index, adjusting each operand's offset incrementally.
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      auto a = static_cast<size_t>(axis);
      if (++index[a] < out[axis]) {
        for (size_t k = 0; k < K; ++k) offsets[k] += strides[k][a];
        break;
      }
      index[a] = 0;
      for (size_t k = 0; k < K; ++k) offsets[k] -= strides[k][a] * (out[axis] - 1);
    }
  }
}

}  // namespace kiln
