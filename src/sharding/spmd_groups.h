// Which devices of a mesh a collective combines: those that agree on every axis it does not
// name form a group, whose members are indexed by their coordinates along the named axes
// (the first named axis the most significant digit, as JAX's axis_index of a tuple).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prims/spmd_text.h"

namespace kiln::spmd {

struct Groups {
  // Each group's mesh device indices, in group-index order.
  std::vector<std::vector<int64_t>> members;
  std::vector<int64_t> group_of;  // per mesh device
  std::vector<int64_t> index_of;  // per mesh device: its index in its group
  int64_t size() const { return members.empty() ? 1 : static_cast<int64_t>(members[0].size()); }
};

// The groups of `mesh` over `axes` (each a mesh axis, at most once: the caller checked).
Groups groups_over(const std::vector<AxisText>& mesh, const std::vector<std::string>& axes);

// The position of mesh device `index` along each axis (row-major, the last axis fastest).
std::vector<int64_t> coordinates(const std::vector<AxisText>& mesh, int64_t index);

}  // namespace kiln::spmd
