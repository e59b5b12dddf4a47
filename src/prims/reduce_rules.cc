// Abstract evaluation of the reduce family: reduce_sum/max/min/prod over a set of axes,
// argmax/argmin along one axis, and cumsum. At the primitive level axes are already
// normalised (non-negative, sorted, unique); the user-level ops in src/ops/reduce.cc
// accept negative axes and keepdims and normalise before binding.
#include <fmt/format.h>

#include "prims/cost_util.h"
#include "prims/ids/reduce.h"
#include "prims/registry.h"

namespace kiln {
namespace {

// A primitive-level axis: already normalised by the op that binds it.
void check_axis(int64_t axis, int64_t rank, const RuleContext& context, std::string_view what) {
  if (axis < 0 || axis >= rank) {
    context.fail(fmt::format("{} {} is out of range for an array of rank {}", what, axis, rank),
                 rank == 0 ? "a rank-0 (scalar) array has no axes"
                           : fmt::format("at the primitive level axes are normalised to 0..{}; the "
                                         "user-level ops accept negative axes",
                                         rank - 1));
  }
}

std::vector<AbstractValue> reduce_rule(std::span<const AbstractValue> inputs, const Params& params,
                                       const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const Dims& axes = std::get<ReduceParams>(params).axes;
  bool order_only = context.prim.id == prim::reduce_max || context.prim.id == prim::reduce_min;
  if (x.dtype == DType::bool_ && !order_only) {
    context.fail(fmt::format("does not accept bool operands, got {}", x.to_string()),
                 "convert first, e.g. astype(x, DType::i32) to count the true values");
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    check_axis(axes[i], x.shape.rank(), context, "axis");
    if (i > 0 && axes[i] <= axes[i - 1]) {
      context.fail(fmt::format("axes {} must be sorted and unique (operand {})",
                               dims_to_string(axes), x.to_string()),
                   "the user-level ops (sum, max, ...) sort and check axes for you");
    }
  }
  Shape out;
  for (int64_t axis = 0, next = 0; axis < x.shape.rank(); ++axis) {
    if (next < static_cast<int64_t>(axes.size()) && axes[static_cast<size_t>(next)] == axis) {
      ++next;
    } else {
      out.dims().push_back(x.shape[axis]);
    }
  }
  return {AbstractValue{out, x.dtype, x.weak_type}};
}

std::vector<AbstractValue> arg_reduce_rule(std::span<const AbstractValue> inputs,
                                           const Params& params, const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  const auto& p = std::get<ArgReduceParams>(params);
  check_axis(p.axis, x.shape.rank(), context, "axis");
  if (p.index_dtype != DType::i32 && p.index_dtype != DType::i64) {
    context.fail(fmt::format("index_dtype must be i32 or i64, got {}", dtype_name(p.index_dtype)));
  }
  int64_t size = x.shape[p.axis];
  if (size == 0) {
    context.fail(
        fmt::format("cannot take the {} of an empty axis: axis {} of {} has size 0",
                    context.prim.id == prim::argmax ? "maximum" : "minimum", p.axis, x.to_string()),
        "an empty axis has no extreme element; check the shape, or mask the result");
  }
  if (p.index_dtype == DType::i32 && size > INT32_MAX) {
    context.fail(fmt::format("axis {} of {} has {} elements, too many for i32 indices", p.axis,
                             x.to_string(), size),
                 "use index_dtype DType::i64");
  }
  Shape out;
  for (int64_t axis = 0; axis < x.shape.rank(); ++axis) {
    if (axis != p.axis) out.dims().push_back(x.shape[axis]);
  }
  return {AbstractValue{out, p.index_dtype}};
}

std::vector<AbstractValue> cumsum_rule(std::span<const AbstractValue> inputs, const Params& params,
                                       const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  check_axis(std::get<CumsumParams>(params).axis, x.shape.rank(), context, "axis");
  if (x.dtype == DType::bool_) {
    context.fail(fmt::format("does not accept bool operands, got {}", x.to_string()),
                 "convert first, e.g. astype(x, DType::i32)");
  }
  return {x};
}

// ----- cost rules (kiln/cost_types.h) -----

// Reductions, arg-reductions and cumsum: one FLOP (an add, a max, a comparison) per
// operand element.
Cost reduce_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                 const Params&) {
  return cost::moves_all(inputs, outputs, cost::elements(inputs[0]));
}

}  // namespace

void register_reduce_rules(PrimTable& table) {
  for (PrimId id : {prim::reduce_sum, prim::reduce_max, prim::reduce_min, prim::reduce_prod}) {
    table[id].abstract_eval = reduce_rule;
  }
  for (PrimId id : {prim::argmax, prim::argmin}) {
    table[id].abstract_eval = arg_reduce_rule;
  }
  table[prim::cumsum].abstract_eval = cumsum_rule;
  for (PrimId id : {prim::reduce_sum, prim::reduce_max, prim::reduce_min, prim::reduce_prod,
                    prim::argmax, prim::argmin, prim::cumsum}) {
    table[id].cost = reduce_cost;
  }
}

}  // namespace kiln
