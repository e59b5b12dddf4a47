// Shared helpers for the VJP rules (src/transforms/vjp_rules/<family>.cc). Rules are
// written with ordinary ops so they trace; these helpers keep them short.
#pragma once

#include <vector>

#include "kiln/ops.h"
#include "prims/registry.h"

namespace kiln::vjp_util {

// The cotangent of an operand that was broadcast (equal rank with size-1 axes, or rank 0)
// to `ct`'s shape: sums over the broadcast axes.
Array unbroadcast(const Array& ct, const Shape& operand_shape, CallSite site);

// The cotangent for result `i` or, when it is zero (empty), zeros of the result's type.
Array cotangent_or_zeros(const VjpArgs& args, size_t i);

// Size of `size` cells with `dilation - 1` holes between neighbours.
inline int64_t dilated_size(int64_t size, int64_t dilation) {
  return size == 0 ? 0 : (size - 1) * dilation + 1;
}

// A rule's answer: one entry per operand, all empty (zero) to begin with.
inline std::vector<Array> none(const VjpArgs& args) {
  return std::vector<Array>(args.inputs.size());
}

}  // namespace kiln::vjp_util
