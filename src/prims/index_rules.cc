// Abstract evaluation of the indexing family: gather, scatter, scatter_add (tf.gather-like
// semantics with axis and batch_dims; see GatherParams in params.h). Index values are only
// known when the kernel runs, so out-of-range indices are checked there; everything that
// depends on shapes and dtypes is checked here.
#include <algorithm>

#include <fmt/format.h>

#include "prims/cost_util.h"
#include "prims/ids/index.h"
#include "prims/registry.h"

namespace kiln {
namespace {

// The gather/scatter geometry shared by all three primitives: returns the shape of
// gather's output (= scatter's updates).
Shape gather_shape(const AbstractValue& operand, const AbstractValue& indices, int64_t axis,
                   int64_t batch_dims, IndexMode mode, const RuleContext& context) {
  if (!is_integer(indices.dtype)) {
    context.fail(fmt::format("indices must have an integer dtype, got {}", indices.to_string()),
                 "convert them first, e.g. astype(indices, DType::i32)");
  }
  if (mode != IndexMode::kError && mode != IndexMode::kClip && mode != IndexMode::kFill) {
    context.fail(fmt::format("unknown index mode {}", static_cast<int>(mode)));
  }
  int64_t rank = operand.shape.rank();
  if (axis < 0 || axis >= rank) {
    context.fail(fmt::format("axis {} is out of range for operand {}", axis, operand.to_string()),
                 rank == 0 ? "a rank-0 (scalar) array cannot be indexed"
                           : fmt::format("at the primitive level the axis is normalised to 0..{}",
                                         rank - 1));
  }
  if (batch_dims < 0 || batch_dims > axis || batch_dims > indices.shape.rank()) {
    context.fail(
        fmt::format("batch_dims {} must be in 0..min(axis, indices rank) = 0..{} "
                    "(operand {}, indices {}, axis {})",
                    batch_dims, std::min(axis, indices.shape.rank()), operand.to_string(),
                    indices.to_string(), axis));
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (operand.shape[d] != indices.shape[d]) {
      context.fail(
          fmt::format("batch axis {} differs: operand {} has {}, indices {} have {}", d,
                      operand.to_string(), operand.shape[d], indices.to_string(), indices.shape[d]),
          "the first batch_dims axes of the operand and the indices must be equal");
    }
  }
  Shape out;
  for (int64_t d = 0; d < axis; ++d) out.dims().push_back(operand.shape[d]);
  for (int64_t d = batch_dims; d < indices.shape.rank(); ++d)
    out.dims().push_back(indices.shape[d]);
  for (int64_t d = axis + 1; d < rank; ++d) out.dims().push_back(operand.shape[d]);
  if (mode == IndexMode::kClip && operand.shape[axis] == 0 && out.num_elements() > 0) {
    context.fail(fmt::format("cannot clip indices into axis {} of {}: it has size 0", axis,
                             operand.to_string()),
                 "use mode fill to read zeros / drop updates, or index a non-empty axis");
  }
  return out;
}

std::vector<AbstractValue> gather_rule(std::span<const AbstractValue> inputs, const Params& params,
                                       const RuleContext& context) {
  const auto& p = std::get<GatherParams>(params);
  const AbstractValue& operand = inputs[0];
  Shape out = gather_shape(operand, inputs[1], p.axis, p.batch_dims, p.mode, context);
  return {AbstractValue{out, operand.dtype, operand.weak_type}};
}

std::vector<AbstractValue> scatter_rule(std::span<const AbstractValue> inputs, const Params& params,
                                        const RuleContext& context) {
  const auto& p = std::get<ScatterParams>(params);
  const AbstractValue& operand = inputs[0];
  const AbstractValue& updates = inputs[2];
  if (context.prim.id == prim::scatter_add && operand.dtype == DType::bool_) {
    context.fail(fmt::format("does not accept bool operands, got {}", operand.to_string()),
                 "convert first, e.g. astype(x, DType::i32)");
  }
  Shape expected = gather_shape(operand, inputs[1], p.axis, p.batch_dims, p.mode, context);
  if (updates.dtype != operand.dtype) {
    context.fail(fmt::format("updates {} must have the operand's dtype {}", updates.to_string(),
                             operand.to_string()),
                 "convert the updates with astype");
  }
  if (updates.shape != expected) {
    context.fail(fmt::format("updates {} must have shape {} (operand {}, indices {}, axis {}, "
                             "batch_dims {})",
                             updates.to_string(), expected.to_string(), operand.to_string(),
                             inputs[1].to_string(), p.axis, p.batch_dims),
                 "updates have gather's output shape: operand.shape[:axis] + "
                 "indices.shape[batch_dims:] + operand.shape[axis+1:]");
  }
  AbstractValue out = operand;
  out.weak_type = operand.weak_type && updates.weak_type;
  return {out};
}

// ----- cost rules (kiln/cost_types.h) -----

// gather reads the operand rows it picks (as many elements as it writes) and the indices.
Cost gather_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                 const Params&) {
  return Cost{.bytes_read = cost::bytes(outputs[0]) + cost::bytes(inputs[1]),
              .bytes_written = cost::bytes(outputs[0])};
}

// kiln's scatters write a new result: the operand is copied, then the updates land on it
// (scatter moves data only; scatter_add adds each update: one FLOP per update element).
Cost scatter_add_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                      const Params&) {
  return cost::moves_all(inputs, outputs, cost::elements(inputs[2]));
}

}  // namespace

void register_index_rules(PrimTable& table) {
  table[prim::gather].abstract_eval = gather_rule;
  table[prim::scatter].abstract_eval = scatter_rule;
  table[prim::scatter_add].abstract_eval = scatter_rule;
  table[prim::gather].cost = gather_cost;
  table[prim::scatter].cost = cost::movement;
  table[prim::scatter_add].cost = scatter_add_cost;
}

}  // namespace kiln
