// User-facing layout ops: reshape, transpose, broadcasting, slicing, concatenation, pad.
#include <fmt/format.h>

#include "ops/op_util.h"

namespace kiln {

Array reshape(const Array& x, Shape shape, CallSite site) {
  int64_t inferred = -1;
  int64_t known = 1;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (shape[axis] == -1) {
      if (inferred >= 0) {
        fail(site, fmt::format("reshape: only one size may be -1, got {}", shape.to_string()));
      }
      inferred = axis;
    } else if (shape[axis] < 0) {
      fail(site, fmt::format("reshape: size {} in {} is negative", shape[axis], shape.to_string()));
    } else {
      known *= shape[axis];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.size() % known != 0) {
      fail(site, fmt::format("reshape: cannot infer the -1 in {} for {} ({} elements)",
                             shape.to_string(), x.aval().to_string(), x.size()));
    }
    shape[inferred] = x.size() / known;
  }
  if (shape.num_elements() != x.size()) {
    fail(site,
         fmt::format("reshape: cannot reshape {} ({} elements) to {} ({} elements)",
                     x.aval().to_string(), x.size(), shape.to_string(), shape.num_elements()),
         "the new shape must hold the same number of elements; use -1 for one inferred size");
  }
  if (shape == x.shape()) return x;
  return bind1(PrimId::reshape, {x}, ReshapeParams{shape}, site);
}

}  // namespace kiln
