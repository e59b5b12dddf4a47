// The layout the fast window kernels (pooling and its gradient) handle: a rank-4 NHWC
// array whose windows span only H and W (batch and channel windows of 1, no padding
// there). Anything else runs the reference kernel.
#pragma once

#include <cstddef>

#include "kiln/shape.h"
#include "prims/params.h"

namespace kiln {

inline bool windows_span_hw_only(const ReduceWindowParams& p, const Shape& shape) {
  if (shape.rank() != 4) return false;
  for (size_t axis : {size_t{0}, size_t{3}}) {
    if (p.window_dimensions[axis] != 1 || p.window_strides[axis] != 1 || p.padding_low[axis] != 0 ||
        p.padding_high[axis] != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace kiln
