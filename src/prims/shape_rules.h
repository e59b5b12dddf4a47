// Checks shared by the layout family's abstract-evaluation rules (shape_rules.cc and
// shape_rules_slice.cc), which report errors through the RuleContext of the primitive.
#pragma once

#include <string_view>

#include "prims/registry.h"

namespace kiln {

// Every size is >= 0 and the element count fits an int64. `what` names the shape.
void check_result_shape(const Shape& shape, std::string_view what, const RuleContext& context);
// A per-axis parameter list has one entry per axis of `operand`.
void check_list_length(const Dims& list, std::string_view name, const AbstractValue& operand,
                       const RuleContext& context);
// A normalised (non-negative) axis of an array of `rank`.
void check_primitive_axis(int64_t axis, int64_t rank, std::string_view what,
                          const RuleContext& context);

// slice, dynamic_slice, dynamic_update_slice (shape_rules_slice.cc).
void register_slice_rules(PrimTable& table);

}  // namespace kiln
