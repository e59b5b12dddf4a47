// Helpers for VJP rules (see vjp_util.h).
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln::vjp_util {

Array unbroadcast(const Array& ct, const Shape& operand_shape, CallSite site) {
  if (ct.shape() == operand_shape) return ct;
  if (operand_shape.rank() == 0) return sum(ct, {}, /*keepdims=*/false, site);
  Dims axes;
  for (int64_t axis = 0; axis < operand_shape.rank(); ++axis) {
    if (operand_shape[axis] == 1 && ct.shape()[axis] != 1) axes.push_back(axis);
  }
  Array summed = axes.empty() ? ct : sum(ct, axes, /*keepdims=*/true, site);
  return reshape(summed, operand_shape, site);
}

Array cotangent_or_zeros(const VjpArgs& args, size_t i) {
  return args.cotangents[i].defined() ? args.cotangents[i] : zeros_like(args.outputs[i], args.site);
}

}  // namespace kiln::vjp_util
