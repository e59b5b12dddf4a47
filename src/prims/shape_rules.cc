// Abstract evaluation of the layout family: broadcast_in_dim, reshape, transpose,
// concatenate, pad and iota here; the slicing rules in shape_rules_slice.cc. At the
// primitive level axes are normalised (non-negative) and every list has one entry per
// axis; the user-level ops in src/ops/layout.cc accept numpy conventions and normalise.
#include "prims/shape_rules.h"
#include "prims/cost_util.h"
#include "prims/ids/shape.h"

#include <algorithm>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {

void check_result_shape(const Shape& shape, std::string_view what, const RuleContext& context) {
  int64_t count = 1;
  for (int64_t dim : shape.dims()) {
    if (dim < 0) context.fail(fmt::format("{} {} has a negative size", what, shape.to_string()));
    // Zero sizes are skipped: row-major strides still multiply the other sizes.
    if (__builtin_mul_overflow(count, std::max<int64_t>(dim, 1), &count)) {
      context.fail(
          fmt::format("{} {} has more elements than an int64 can count", what, shape.to_string()));
    }
  }
}

void check_list_length(const Dims& list, std::string_view name, const AbstractValue& operand,
                       const RuleContext& context) {
  if (static_cast<int64_t>(list.size()) != operand.shape.rank()) {
    context.fail(
        fmt::format("{} {} has {} entries but the operand {} has rank {}", name,
                    dims_to_string(list), list.size(), operand.to_string(), operand.shape.rank()),
        "give one entry per axis of the operand");
  }
}

void check_primitive_axis(int64_t axis, int64_t rank, std::string_view what,
                          const RuleContext& context) {
  if (axis < 0 || axis >= rank) {
    context.fail(fmt::format("{} {} is out of range for rank {}", what, axis, rank),
                 rank == 0 ? "a rank-0 (scalar) array has no axes"
                           : fmt::format("at the primitive level axes are normalised to 0..{}; the "
                                         "user-level ops accept negative axes",
                                         rank - 1));
  }
}

namespace {

std::vector<AbstractValue> broadcast_in_dim_rule(std::span<const AbstractValue> inputs,
                                                 const Params& params, const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const auto& p = std::get<BroadcastInDimParams>(params);
  check_result_shape(p.shape, "shape", context);
  const Dims& dims = p.broadcast_dimensions;
  if (static_cast<int64_t>(dims.size()) != x.shape.rank()) {
    context.fail(
        fmt::format("broadcast_dimensions {} has {} entries but the operand {} has rank {}",
                    dims_to_string(dims), dims.size(), x.to_string(), x.shape.rank()),
        "name the output axis of each operand axis");
  }
  if (x.shape.rank() > p.shape.rank()) {
    context.fail(fmt::format("cannot broadcast {} to the lower rank shape {}", x.to_string(),
                             p.shape.to_string()));
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t axis = dims[i];
    if (axis < 0 || axis >= p.shape.rank()) {
      context.fail(
          fmt::format("broadcast_dimensions {} names axis {}, out of range for the "
                      "output shape {}",
                      dims_to_string(dims), axis, p.shape.to_string()));
    }
    if (i > 0 && axis <= dims[i - 1]) {
      context.fail(
          fmt::format("broadcast_dimensions {} must be strictly increasing", dims_to_string(dims)),
          "transpose the operand first to reorder its axes");
    }
    int64_t size = x.shape[static_cast<int64_t>(i)];
    if (size != 1 && size != p.shape[axis]) {
      context.fail(fmt::format("operand {} axis {} has size {}, which is neither 1 nor the size "
                               "{} of output axis {} in {}",
                               x.to_string(), i, size, p.shape[axis], axis, p.shape.to_string()),
                   "an operand axis broadcasts only from size 1");
    }
  }
  return {AbstractValue{p.shape, x.dtype, x.weak_type}};
}

std::vector<AbstractValue> reshape_rule(std::span<const AbstractValue> inputs, const Params& params,
                                        const RuleContext& context) {
  const Shape& new_sizes = std::get<ReshapeParams>(params).new_sizes;
  check_result_shape(new_sizes, "new_sizes", context);
  if (new_sizes.num_elements() != inputs[0].num_elements()) {
    context.fail(fmt::format("cannot reshape {} ({} elements) to {} ({} elements)",
                             inputs[0].to_string(), inputs[0].num_elements(), new_sizes.to_string(),
                             new_sizes.num_elements()));
  }
  AbstractValue out = inputs[0];
  out.shape = new_sizes;
  return {out};
}

std::vector<AbstractValue> transpose_rule(std::span<const AbstractValue> inputs,
                                          const Params& params, const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const Dims& permutation = std::get<TransposeParams>(params).permutation;
  int64_t rank = x.shape.rank();
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool valid = static_cast<int64_t>(permutation.size()) == rank;
  for (int64_t axis : permutation) {
    if (!valid) break;
    valid = axis >= 0 && axis < rank && !seen[static_cast<size_t>(axis)];
    if (valid) seen[static_cast<size_t>(axis)] = true;
  }
  if (!valid) {
    context.fail(fmt::format("permutation {} is not a permutation of the {} axes of {}",
                             dims_to_string(permutation), rank, x.to_string()),
                 rank == 0 ? std::string("a rank-0 array takes the empty permutation")
                           : fmt::format("list each of the axes 0..{} exactly once", rank - 1));
  }
  AbstractValue out = x;
  for (int64_t i = 0; i < rank; ++i) out.shape[i] = x.shape[permutation[static_cast<size_t>(i)]];
  return {out};
}

std::string types_of(std::span<const AbstractValue> inputs) {
  std::vector<std::string> names;
  for (const AbstractValue& input : inputs) names.push_back(input.to_string());
  return fmt::format("{}", fmt::join(names, ", "));
}

std::vector<AbstractValue> concatenate_rule(std::span<const AbstractValue> inputs,
                                            const Params& params, const RuleContext& context) {
  if (inputs.empty()) {
    context.fail("needs at least one operand", "pass one or more arrays");
  }
  int64_t dimension = std::get<ConcatenateParams>(params).dimension;
  const AbstractValue& first = inputs[0];
  int64_t rank = first.shape.rank();
  check_primitive_axis(dimension, rank, "dimension", context);
  AbstractValue out = first;
  for (const AbstractValue& input : inputs.subspan(1)) {
    if (input.dtype != first.dtype) {
      context.fail(fmt::format("operands must have one dtype, got {}", types_of(inputs)),
                   "convert the operands to a common dtype with astype first");
    }
    bool compatible = input.shape.rank() == rank;
    for (int64_t axis = 0; compatible && axis < rank; ++axis) {
      compatible = axis == dimension || input.shape[axis] == first.shape[axis];
    }
    if (!compatible) {
      context.fail(
          fmt::format("operands {} must have equal rank and equal sizes on every axis "
                      "except dimension {}",
                      types_of(inputs), dimension));
    }
    if (__builtin_add_overflow(out.shape[dimension], input.shape[dimension],
                               &out.shape[dimension])) {
      context.fail(fmt::format("the result of joining {} is too large", types_of(inputs)));
    }
    out.weak_type = out.weak_type && input.weak_type;
  }
  check_result_shape(out.shape, "result shape", context);
  return {out};
}

std::vector<AbstractValue> pad_rule(std::span<const AbstractValue> inputs, const Params& params,
                                    const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const AbstractValue& value = inputs[1];
  const auto& p = std::get<PadParams>(params);
  if (value.shape.rank() != 0 || value.dtype != x.dtype) {
    context.fail(fmt::format("the padding value must be a rank-0 array of the operand's dtype "
                             "{}, got {}",
                             dtype_name(x.dtype), value.to_string()),
                 "the user-level pad() takes the padding value as a number");
  }
  check_list_length(p.low, "low", x, context);
  check_list_length(p.high, "high", x, context);
  check_list_length(p.interior, "interior", x, context);
  AbstractValue out{Shape{}, x.dtype, x.weak_type && value.weak_type};
  for (int64_t axis = 0; axis < x.shape.rank(); ++axis) {
    auto a = static_cast<size_t>(axis);
    int64_t size = x.shape[axis];
    if (p.interior[a] < 0) {
      context.fail(fmt::format("interior {} has a negative entry", dims_to_string(p.interior)),
                   "interior padding inserts that many values between elements; use 0 for none");
    }
    // Wide arithmetic: the params come from users and may be huge.
    __int128 padded = static_cast<__int128>(p.low[a]) + p.high[a] + size +
                      static_cast<__int128>(size > 0 ? size - 1 : 0) * p.interior[a];
    if (padded < 0) {
      context.fail(fmt::format("padding low {} high {} interior {} of {} gives axis {} a "
                               "negative size",
                               dims_to_string(p.low), dims_to_string(p.high),
                               dims_to_string(p.interior), x.to_string(), axis),
                   "negative low/high crop the axis; they cannot remove more than it holds");
    }
    if (padded > std::numeric_limits<int64_t>::max()) {
      context.fail(fmt::format("padding low {} high {} interior {} of {} is too large",
                               dims_to_string(p.low), dims_to_string(p.high),
                               dims_to_string(p.interior), x.to_string()));
    }
    out.shape.dims().push_back(static_cast<int64_t>(padded));
  }
  check_result_shape(out.shape, "result shape", context);
  return {out};
}

std::vector<AbstractValue> iota_rule(std::span<const AbstractValue>, const Params& params,
                                     const RuleContext& context) {
  const auto& p = std::get<IotaParams>(params);
  if (p.dtype == DType::bool_) {
    context.fail("dtype must be numeric, got bool", "make an integer iota and compare it");
  }
  check_result_shape(p.shape, "shape", context);
  check_primitive_axis(p.dimension, p.shape.rank(), "dimension", context);
  return {AbstractValue{p.shape, p.dtype}};
}

// ----- cost rules (kiln/cost_types.h) -----

Cost iota_cost(std::span<const AbstractValue>, std::span<const AbstractValue> outputs,
               const Params&) {
  return Cost{.bytes_written = cost::bytes(outputs[0])};
}

}  // namespace

void register_shape_rules(PrimTable& table) {
  table[prim::broadcast_in_dim].abstract_eval = broadcast_in_dim_rule;
  table[prim::reshape].abstract_eval = reshape_rule;
  table[prim::transpose].abstract_eval = transpose_rule;
  table[prim::concatenate].abstract_eval = concatenate_rule;
  table[prim::pad].abstract_eval = pad_rule;
  table[prim::iota].abstract_eval = iota_rule;
  // stop_gradient is the identity on values; its VJP rule gives no cotangent.
  table[prim::stop_gradient].abstract_eval = [](std::span<const AbstractValue> inputs,
                                                const Params&, const RuleContext&) {
    return std::vector<AbstractValue>{inputs[0]};
  };
  // Its zero derivative is a definition, not the identity's: finite differences cannot
  // check it, so prims/ids/shape.def flags it kNotDifferentiable (and the Gradient column skips
  // it) while its VJP rule stays.
  register_slice_rules(table);
  table[prim::iota].cost = iota_cost;
  for (PrimId id : {prim::broadcast_in_dim, prim::transpose, prim::dynamic_update_slice,
                    prim::concatenate, prim::pad}) {
    table[id].cost = cost::movement;
  }
}

}  // namespace kiln
