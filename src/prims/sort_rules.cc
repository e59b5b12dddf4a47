// Abstract evaluation of sort: one or more operands of one shape (any dtypes), sorted
// together along `dimension` by the first `num_keys` of them. Results have the operands'
// types. This is lax.sort; sort_key_val and argsort are sort with two operands.
#include <ranges>

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prims/cost_util.h"
#include "prims/ids/sort.h"
#include "prims/registry.h"

namespace kiln {
namespace {

std::vector<AbstractValue> sort_rule(std::span<const AbstractValue> inputs, const Params& params,
                                     const RuleContext& context) {
  const auto& sort = std::get<SortParams>(params);
  if (inputs.empty()) context.fail("needs at least one operand");
  auto types = [&] {
    return fmt::format("{}", fmt::join(inputs | std::views::transform([](const AbstractValue& v) {
                                         return v.to_string();
                                       }),
                                       ", "));
  };
  for (const AbstractValue& input : inputs) {
    if (input.shape != inputs[0].shape) {
      context.fail(fmt::format("operands must have one shape, got {}", types()),
                   "broadcast the values to the keys' shape first (broadcast_to)");
    }
  }
  if (inputs[0].shape.rank() == 0) {
    context.fail(fmt::format("cannot sort a rank-0 array ({})", inputs[0].to_string()),
                 "reshape to rank 1 first, e.g. reshape(x, {1})");
  }
  normalize_axis(sort.dimension, inputs[0].shape.rank(), context, "dimension");
  if (sort.num_keys < 1 || sort.num_keys > static_cast<int64_t>(inputs.size())) {
    context.fail(
        fmt::format("num_keys is {} but there are {} operands", sort.num_keys, inputs.size()),
        "num_keys counts the leading operands that order the sort: 1 to the number of "
        "operands");
  }
  std::vector<AbstractValue> out(inputs.begin(), inputs.end());
  for (AbstractValue& value : out) value.weak_type = false;
  return out;
}

// ----- cost rules (kiln/cost_types.h) -----

// n log2 n comparisons per line of n elements along the sorted dimension.
Cost sort_cost(std::span<const AbstractValue> inputs, std::span<const AbstractValue> outputs,
               const Params& params) {
  const auto& p = std::get<SortParams>(params);
  const Shape& shape = inputs[0].shape;
  Cost result = cost::moves_all(inputs, outputs);
  if (shape.rank() == 0) return result;
  int64_t dimension = p.dimension < 0 ? p.dimension + shape.rank() : p.dimension;
  if (dimension < 0 || dimension >= shape.rank()) return result;
  double n = static_cast<double>(shape[dimension]);
  if (n < 2) return result;
  double lines = cost::elements(inputs[0]) / n;
  result.flops = lines * n * std::log2(n);
  return result;
}

}  // namespace

void register_sort_rules(PrimTable& table) {
  table[prim::sort].abstract_eval = sort_rule;
  // Its gradient (a gather of the cotangent by the sorting permutation) comes with the
  // transformations.
  table[prim::sort].cost = sort_cost;
}

}  // namespace kiln
