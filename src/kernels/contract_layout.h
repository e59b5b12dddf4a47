// How dot_general's general dimension numbers map onto memory: the operands' axes fall into
// groups (batch, lhs free, rhs free, contracting), each with its sizes and the operand's
// row-major strides. The reference kernel walks these groups with offset tables; the fast
// kernel uses them to view each operand as a (batched, maybe transposed) matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/shape.h"
#include "prims/params.h"

namespace kiln {

struct AxisGroup {
  Dims sizes;
  Dims lhs_strides;  // unused (empty) for the rhs free group
  Dims rhs_strides;  // unused (empty) for the lhs free group

  int64_t count() const {
    int64_t n = 1;
    for (int64_t size : sizes) n *= size;
    return n;
  }
};

struct DotLayout {
  AxisGroup batch;     // in lhs_batch order
  AxisGroup lhs_free;  // lhs axes that are neither batch nor contracting, in order
  AxisGroup rhs_free;
  AxisGroup contract;  // in lhs_contracting order
};

inline DotLayout dot_layout(const Shape& lhs, const Shape& rhs, const DotGeneralParams& p) {
  Dims lhs_strides = lhs.strides(), rhs_strides = rhs.strides();
  DotLayout layout;
  std::vector<bool> lhs_used(static_cast<size_t>(lhs.rank()), false);
  std::vector<bool> rhs_used(static_cast<size_t>(rhs.rank()), false);
  auto add_pair = [&](AxisGroup& group, int64_t l, int64_t r) {
    group.sizes.push_back(lhs[l]);
    group.lhs_strides.push_back(lhs_strides[static_cast<size_t>(l)]);
    group.rhs_strides.push_back(rhs_strides[static_cast<size_t>(r)]);
    lhs_used[static_cast<size_t>(l)] = true;
    rhs_used[static_cast<size_t>(r)] = true;
  };
  for (size_t i = 0; i < p.lhs_batch.size(); ++i)
    add_pair(layout.batch, p.lhs_batch[i], p.rhs_batch[i]);
  for (size_t i = 0; i < p.lhs_contracting.size(); ++i) {
    add_pair(layout.contract, p.lhs_contracting[i], p.rhs_contracting[i]);
  }
  for (int64_t axis = 0; axis < lhs.rank(); ++axis) {
    if (lhs_used[static_cast<size_t>(axis)]) continue;
    layout.lhs_free.sizes.push_back(lhs[axis]);
    layout.lhs_free.lhs_strides.push_back(lhs_strides[static_cast<size_t>(axis)]);
  }
  for (int64_t axis = 0; axis < rhs.rank(); ++axis) {
    if (rhs_used[static_cast<size_t>(axis)]) continue;
    layout.rhs_free.sizes.push_back(rhs[axis]);
    layout.rhs_free.rhs_strides.push_back(rhs_strides[static_cast<size_t>(axis)]);
  }
  return layout;
}

// The element offset of every multi-index of `sizes`, in row-major order of the indices.
inline std::vector<int64_t> offset_table(const Dims& sizes, const Dims& strides) {
  std::vector<int64_t> offsets{0};
  for (size_t axis = 0; axis < sizes.size(); ++axis) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<size_t>(sizes[axis]));
    for (int64_t base : offsets) {
      for (int64_t i = 0; i < sizes[axis]; ++i) next.push_back(base + i * strides[axis]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

}  // namespace kiln
