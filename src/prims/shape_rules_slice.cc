// Abstract evaluation of the slicing primitives of the layout family: slice (static
// bounds and strides), dynamic_slice and dynamic_update_slice (start indices given as an
// integer vector operand, clamped at run time so the window stays inside, as in XLA).
#include <fmt/format.h>

#include "prims/cost_util.h"
#include "prims/ids/shape.h"
#include "prims/shape_rules.h"

namespace kiln {
namespace {

std::vector<AbstractValue> slice_rule(std::span<const AbstractValue> inputs, const Params& params,
                                      const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const auto& p = std::get<SliceParams>(params);
  check_list_length(p.start_indices, "start_indices", x, context);
  check_list_length(p.limit_indices, "limit_indices", x, context);
  if (!p.strides.empty()) check_list_length(p.strides, "strides", x, context);
  AbstractValue out = x;
  for (int64_t axis = 0; axis < x.shape.rank(); ++axis) {
    auto a = static_cast<size_t>(axis);
    int64_t start = p.start_indices[a], limit = p.limit_indices[a];
    int64_t stride = p.strides.empty() ? 1 : p.strides[a];
    if (stride < 1) {
      context.fail(fmt::format("strides {} must all be >= 1", dims_to_string(p.strides)),
                   "to reverse an axis, slice forward and flip it instead");
    }
    if (start < 0 || start > limit || limit > x.shape[axis]) {
      context.fail(fmt::format("start_indices {} and limit_indices {} are out of bounds for {} "
                               "on axis {} (need 0 <= start <= limit <= {})",
                               dims_to_string(p.start_indices), dims_to_string(p.limit_indices),
                               x.to_string(), axis, x.shape[axis]),
                   "slice bounds are absolute indices, not numpy's negative or clipped ones");
    }
    // ceil((limit - start) / stride) without overflow for huge strides.
    out.shape[axis] = limit == start ? 0 : 1 + (limit - start - 1) / stride;
  }
  return {out};
}

// The start-indices operand: an integer vector with one entry per axis of `x`.
void check_start_indices(const AbstractValue& start, const AbstractValue& x,
                         const RuleContext& context) {
  if (!is_integer(start.dtype) || start.shape.rank() != 1 || start.shape[0] != x.shape.rank()) {
    context.fail(fmt::format("start indices must be an integer vector with one entry per axis "
                             "of {}, i.e. of shape [{}], got {}",
                             x.to_string(), x.shape.rank(), start.to_string()),
                 "build them with from_host<int32_t>({...}, {rank}) or astype(DType::i32)");
  }
}

std::vector<AbstractValue> dynamic_slice_rule(std::span<const AbstractValue> inputs,
                                              const Params& params, const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const Dims& sizes = std::get<DynamicSliceParams>(params).slice_sizes;
  check_start_indices(inputs[1], x, context);
  check_list_length(sizes, "slice_sizes", x, context);
  for (int64_t axis = 0; axis < x.shape.rank(); ++axis) {
    int64_t size = sizes[static_cast<size_t>(axis)];
    if (size < 0 || size > x.shape[axis]) {
      context.fail(fmt::format("slice_sizes {} do not fit in {} (axis {}: need 0 <= size <= {})",
                               dims_to_string(sizes), x.to_string(), axis, x.shape[axis]),
                   "the window must fit inside the array; only its start is clamped");
    }
  }
  AbstractValue out = x;
  out.shape = Shape(sizes);
  return {out};
}

std::vector<AbstractValue> dynamic_update_slice_rule(std::span<const AbstractValue> inputs,
                                                     const Params&, const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const AbstractValue& update = inputs[1];
  if (update.dtype != x.dtype) {
    context.fail(fmt::format("the update must have the operand's dtype, got operand {} and "
                             "update {}",
                             x.to_string(), update.to_string()),
                 fmt::format("convert the update first, e.g. astype(update, DType::{})",
                             dtype_name(x.dtype)));
  }
  bool fits = update.shape.rank() == x.shape.rank();
  for (int64_t axis = 0; fits && axis < x.shape.rank(); ++axis) {
    fits = update.shape[axis] <= x.shape[axis];
  }
  if (!fits) {
    context.fail(fmt::format("the update {} must have the operand's rank and fit inside the "
                             "operand {}",
                             update.to_string(), x.to_string()),
                 "reshape or slice the update so that each axis is at most the operand's");
  }
  check_start_indices(inputs[2], x, context);
  AbstractValue out = x;
  out.weak_type = x.weak_type && update.weak_type;
  return {out};
}

// ----- cost rules (kiln/cost_types.h) -----

// slice and dynamic_slice read only the elements they keep (plus the start indices).
Cost slice_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                const Params&) {
  Cost result{.bytes_read = cost::bytes(outputs[0]), .bytes_written = cost::bytes(outputs[0])};
  for (size_t i = 1; i < inputs.size(); ++i) result.bytes_read += cost::bytes(inputs[i]);
  return result;
}

}  // namespace

void register_slice_rules(PrimTable& table) {
  table[prim::slice].abstract_eval = slice_rule;
  table[prim::dynamic_slice].abstract_eval = dynamic_slice_rule;
  table[prim::dynamic_update_slice].abstract_eval = dynamic_update_slice_rule;
  table[prim::slice].cost = slice_cost;
  table[prim::dynamic_slice].cost = slice_cost;
}

}  // namespace kiln
