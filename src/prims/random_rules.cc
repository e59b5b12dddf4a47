// Abstract evaluation of the bit-level primitives that kiln::random is built from:
// threefry2x32 (the counter-based hash: four u32 operands of equal rank, or rank 0, that
// broadcast like binary operands; two u32 results of the broadcast shape) and bitcast_convert_type
// (reinterprets each element's bits as another dtype of the same width).
#include <ranges>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prims/cost_util.h"
#include "prims/ids/convert.h"
#include "prims/ids/random.h"
#include "prims/registry.h"

namespace kiln {
namespace {

std::string list_types(std::span<const AbstractValue> values) {
  return fmt::format("{}", fmt::join(values | std::views::transform([](const AbstractValue& v) {
                                       return v.to_string();
                                     }),
                                     ", "));
}

std::vector<AbstractValue> threefry_rule(std::span<const AbstractValue> inputs, const Params&,
                                         const RuleContext& context) {
  // The result has the rank of the ranked operands; rank-0 operands broadcast to it.
  Shape out;
  for (const AbstractValue& input : inputs) {
    if (input.dtype != DType::u32) {
      context.fail(fmt::format("operands must all be u32 (key k0, k1 and counter x0, x1), got {}",
                               list_types(inputs)),
                   "convert with astype(x, DType::u32), or use kiln::random, which makes "
                   "keys and counters for you");
    }
    if (input.shape.rank() > out.rank()) out = input.shape;
  }
  for (const AbstractValue& input : inputs) {
    if (input.shape.rank() == 0) continue;
    if (input.shape.rank() != out.rank()) {
      context.fail(fmt::format("operands must have equal rank (or rank 0) at the primitive "
                               "level, got {}",
                               list_types(inputs)),
                   "kiln::random::threefry2x32 broadcasts for you");
    }
  }
  for (const AbstractValue& input : inputs) {
    if (input.shape.rank() == 0) continue;
    for (int64_t axis = 0; axis < out.rank(); ++axis) {
      int64_t size = input.shape[axis];
      if (size == out[axis] || size == 1) continue;
      if (out[axis] != 1) {
        context.fail(fmt::format("shapes {} cannot be broadcast together (axis {}: {} vs {})",
                                 list_types(inputs), axis, out[axis], size));
      }
      out[axis] = size;
    }
  }
  AbstractValue result{out, DType::u32};
  return {result, result};
}

std::vector<AbstractValue> bitcast_rule(std::span<const AbstractValue> inputs, const Params& params,
                                        const RuleContext& context) {
  const AbstractValue& x = inputs[0];
  DType to = std::get<ConvertParams>(params).new_dtype;
  if (x.dtype == DType::bool_ || to == DType::bool_) {
    context.fail(fmt::format("cannot reinterpret {} as {}: bool has no bit pattern to reuse",
                             x.to_string(), dtype_name(to)),
                 "use astype for bool conversions (nonzero is true)");
  }
  if (dtype_size(x.dtype) != dtype_size(to)) {
    context.fail(
        fmt::format("cannot reinterpret {} ({} bits) as {} ({} bits): the widths differ",
                    x.to_string(), 8 * dtype_size(x.dtype), dtype_name(to), 8 * dtype_size(to)),
        "bitcast_convert_type keeps every element's bits, so both dtypes need one width "
        "(u32/i32/f32, i64/f64, f16/bf16); use astype to convert values");
  }
  AbstractValue out = x;
  out.dtype = to;
  out.weak_type = false;
  return {out};
}

// ----- cost rules (kiln/cost_types.h) -----

// Integer operations of one Threefry-2x32 block (one element of each result): 20 rounds of
// (add, rotate = shift + shift + or, xor) = 100, five key injections of three adds = 15,
// and two xors for the third key word. Counted as FLOPs, as XLA counts integer ops.
constexpr double kThreefryOpsPerElement = 20 * 5 + 5 * 3 + 2;

Cost threefry_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
                   const Params&) {
  return cost::moves_all(inputs, outputs, kThreefryOpsPerElement * cost::elements(outputs[0]));
}

}  // namespace

void register_random_rules(PrimTable& table) {
  table[prim::threefry2x32].abstract_eval = threefry_rule;
  // Same bytes, new dtype: flagged kAliasesOperand, so eager mode shares the operand's
  // buffer (no kernel runs there).
  table[prim::bitcast_convert_type].abstract_eval = bitcast_rule;
  table[prim::threefry2x32].cost = threefry_cost;
}

}  // namespace kiln
