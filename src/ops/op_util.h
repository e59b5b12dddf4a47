// Helpers shared by the user-facing ops: numpy-style broadcasting and dtype promotion
// before a primitive is bound.
#pragma once

#include <string_view>
#include <utility>

#include "kiln/ops.h"
#include "prims/bind.h"

namespace kiln {

// Promotes both operands to their common dtype (kiln/promotion.h), converting as needed.
std::pair<Array, Array> promote_operands(const Array& a, const Array& b, CallSite site);

// The numpy broadcast of two shapes, or an error naming `op` and both types.
Shape broadcast_shapes(std::string_view op, const AbstractValue& a, const AbstractValue& b,
                       CallSite site);

// Reshapes `x` to `rank` by prepending size-1 axes (free: shares the buffer). Rank-0
// arrays stay as they are: elementwise primitives broadcast them.
Array lift_rank(const Array& x, int64_t rank, CallSite site);

// Promote, broadcast-check, lift to equal rank, bind the binary primitive.
Array bind_binary(PrimId id, std::string_view op, const Array& a, const Array& b, CallSite site);

// x[start:limit] along `axis`, every other axis whole.
Array slice_axis(const Array& x, int64_t axis, int64_t start, int64_t limit, CallSite site);

// An error naming `op` when `x` is an empty (default-constructed) Array.
void require_defined(std::string_view op, const Array& x, CallSite site);
// An error naming `op` when `x` or `indices` is empty, or `indices` is not integer.
void require_index_operands(std::string_view op, const Array& x, const Array& indices,
                            CallSite site);

// Axis normalisation with a user-facing error naming `op`.
int64_t user_axis(std::string_view op, int64_t axis, int64_t rank, CallSite site);
// Sorted, de-duplicated, normalised axes; empty input means all axes.
Dims user_axes(std::string_view op, const Dims& axes, int64_t rank, CallSite site);

}  // namespace kiln
