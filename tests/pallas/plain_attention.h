// The attention the flash-attention kernels are checked against: softmax(q k^T / sqrt(D)) v
// for q, k, v [batch x heads, T, D] with the T x T matrix materialised, keys after the query
// masked when `causal`. The rows' maximum is held out of the gradient (it cancels), so
// kiln's autodiff of it is the reference for the backward kernels.
#pragma once

#include <cmath>

#include "kiln/ops.h"
#include "kiln/tracing.h"

namespace kiln::pallas {

inline Array plain_attention(const Array& q, const Array& k, const Array& v, bool causal) {
  const int64_t t = q.dim(1);
  Array scores = kiln::matmul(q, swapaxes(k, 1, 2)) / std::sqrt(static_cast<double>(q.dim(2)));
  if (causal) {
    Array later = greater(iota(Shape({t, t}), DType::i32, 1), iota(Shape({t, t}), DType::i32, 0));
    scores = where(later, full(Shape({t, t}), -1e30), scores);
  }
  Array e = exp(scores - stop_gradient(max(scores, {2}, true)));
  return kiln::matmul(e / sum(e, {2}, true), v);
}

}  // namespace kiln::pallas
