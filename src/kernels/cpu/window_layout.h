// The layout the fast window kernels (pooling and its gradient) handle: a rank-4 NHWC
// array whose windows span only H and W (batch and channel windows of 1, no padding
// there). Anything else runs the reference kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/shape.h"
#include "prims/params.h"

namespace kiln {

// Calls fn(ih * w + iw) for each cell of window (oh, ow) that lies inside an H x W image,
// in row-major window order (the reference kernels' order, which decides ties).
template <typename Fn>
void for_each_window_cell(const ReduceWindowParams& p, int64_t h, int64_t w, int64_t oh, int64_t ow,
                          Fn&& fn) {
  for (int64_t kh = 0; kh < p.window_dimensions[1]; ++kh) {
    int64_t ih = oh * p.window_strides[1] + kh - p.padding_low[1];
    if (ih < 0 || ih >= h) continue;
    for (int64_t kw = 0; kw < p.window_dimensions[2]; ++kw) {
      int64_t iw = ow * p.window_strides[2] + kw - p.padding_low[2];
      if (iw >= 0 && iw < w) fn(ih * w + iw);
    }
  }
}

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
