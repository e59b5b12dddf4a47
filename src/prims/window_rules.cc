// Abstract evaluation of the window family: reduce_window_max, reduce_window_sum and
// select_and_scatter_add (reduce_window_max's transpose). One window size, stride and
// low/high padding per operand axis; output axis size is floor((padded - window) / stride)
// + 1, or 0 when the window is larger than the padded axis (as XLA's shape inference does).
#include <cstdint>

#include <fmt/format.h>

#include "prims/cost_util.h"
#include "prims/ids/window.h"
#include "prims/registry.h"

namespace kiln {
namespace {

void check_entries(const Dims& values, std::string_view name, const AbstractValue& operand,
                   int64_t minimum, const RuleContext& context) {
  if (static_cast<int64_t>(values.size()) != operand.shape.rank()) {
    context.fail(fmt::format("{} {} needs one entry per axis of {} ({} entries)", name,
                             dims_to_string(values), operand.to_string(), operand.shape.rank()),
                 "use window 1, stride 1 and padding 0 on axes that are not pooled");
  }
  for (int64_t value : values) {
    if (value < minimum || value > kParamLimit) {
      context.fail(fmt::format("{} {} has an entry out of range (allowed: {}..{}) for {}", name,
                               dims_to_string(values), minimum, kParamLimit, operand.to_string()));
    }
  }
}

std::vector<AbstractValue> window_rule(std::span<const AbstractValue> inputs, const Params& params,
                                       const RuleContext& context) {
  const auto& p = std::get<ReduceWindowParams>(params);
  const AbstractValue& x = inputs[0];
  if (x.dtype == DType::bool_) {
    context.fail(fmt::format("does not accept bool operands, got {}", x.to_string()),
                 "convert first, e.g. astype(x, DType::i32)");
  }
  check_entries(p.window_dimensions, "window_dimensions", x, 1, context);
  check_entries(p.window_strides, "window_strides", x, 1, context);
  check_entries(p.padding_low, "padding_low", x, -kParamLimit, context);
  check_entries(p.padding_high, "padding_high", x, -kParamLimit, context);
  AbstractValue out = x;
  for (int64_t axis = 0; axis < x.shape.rank(); ++axis) {
    size_t a = static_cast<size_t>(axis);
    int64_t padded = x.shape[axis] + p.padding_low[a] + p.padding_high[a];
    if (padded < 0) {
      context.fail(
          fmt::format("negative padding {}/{} crops more than the {} cells of axis {} "
                      "of {}",
                      p.padding_low[a], p.padding_high[a], x.shape[axis], axis, x.to_string()));
    }
    int64_t window = p.window_dimensions[a];
    out.shape[axis] = padded < window ? 0 : (padded - window) / p.window_strides[a] + 1;
  }
  return {out};
}

// select_and_scatter_add(source, operand): operand is a float reduce_window_max input,
// source a cotangent shaped like that reduce_window_max's result; the result is shaped
// like operand.
std::vector<AbstractValue> select_and_scatter_add_rule(std::span<const AbstractValue> inputs,
                                                       const Params& params,
                                                       const RuleContext& context) {
  const AbstractValue& source = inputs[0];
  const AbstractValue& operand = inputs[1];
  if (!is_floating(operand.dtype) || source.dtype != operand.dtype) {
    context.fail(fmt::format("needs float source and operand of one dtype, got source {} and "
                             "operand {}",
                             source.to_string(), operand.to_string()),
                 "convert first, e.g. astype(source, operand.dtype())");
  }
  AbstractValue windows = window_rule(inputs.subspan(1, 1), params, context)[0];
  if (source.shape != windows.shape) {
    context.fail(fmt::format("source {} must have the windows' shape {} (windows of operand {})",
                             source.to_string(), windows.shape.to_string(), operand.to_string()),
                 "source is the cotangent of reduce_window_max(operand) with the same params");
  }
  return {operand};
}

// ----- cost rules (kiln/cost_types.h) -----

// One max or add per window element per result element.
Cost reduce_window_cost(std::span<const AbstractValue> inputs,
                        std::span<const AbstractValue> outputs, const Params& params) {
  const auto& p = std::get<ReduceWindowParams>(params);
  double window = 1;
  for (int64_t size : p.window_dimensions) window *= static_cast<double>(size);
  return cost::moves_all(inputs, outputs, cost::elements(outputs[0]) * window);
}

// One comparison per window element per source element, then one add per source element.
Cost select_and_scatter_add_cost(std::span<const AbstractValue> inputs,
                                 std::span<const AbstractValue> outputs, const Params& params) {
  const auto& p = std::get<ReduceWindowParams>(params);
  double window = 1;
  for (int64_t size : p.window_dimensions) window *= static_cast<double>(size);
  return cost::moves_all(inputs, outputs, cost::elements(inputs[0]) * (window + 1));
}

}  // namespace

void register_window_rules(PrimTable& table) {
  table[prim::reduce_window_max].abstract_eval = window_rule;
  table[prim::reduce_window_sum].abstract_eval = window_rule;
  table[prim::select_and_scatter_add].abstract_eval = select_and_scatter_add_rule;
  table[prim::reduce_window_max].cost = reduce_window_cost;
  table[prim::reduce_window_sum].cost = reduce_window_cost;
  table[prim::select_and_scatter_add].cost = select_and_scatter_add_cost;
}

}  // namespace kiln
