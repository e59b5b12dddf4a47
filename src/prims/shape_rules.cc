// Abstract evaluation of the layout family: broadcast_in_dim, reshape, transpose, slice,
// dynamic_slice, dynamic_update_slice, concatenate, pad, iota.
#include <fmt/format.h>

#include "prims/registry.h"

namespace kiln {
namespace {

std::vector<AbstractValue> reshape_rule(std::span<const AbstractValue> inputs, const Params& params,
                                        const RuleContext& context) {
  const Shape& new_sizes = std::get<ReshapeParams>(params).new_sizes;
  for (int64_t dim : new_sizes.dims()) {
    if (dim < 0)
      context.fail(fmt::format("new_sizes {} has a negative size", new_sizes.to_string()));
  }
  if (new_sizes.num_elements() != inputs[0].num_elements()) {
    context.fail(fmt::format("cannot reshape {} ({} elements) to {} ({} elements)",
                             inputs[0].to_string(), inputs[0].num_elements(), new_sizes.to_string(),
                             new_sizes.num_elements()));
  }
  AbstractValue out = inputs[0];
  out.shape = new_sizes;
  return {out};
}

}  // namespace

void register_shape_rules(PrimTable& table) {
  table[PrimId::reshape].abstract_eval = reshape_rule;
  table[PrimId::reshape].flags |= kAliasesOperand;
}

}  // namespace kiln
