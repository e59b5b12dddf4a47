// A recurrent cell under scan, shared by the scan tests and the merge_scans pass tests:
// h_t = tanh(w * h_{t-1} + x_t), loss = sum over steps of h_t * h_t, plus the last carry.
#pragma once

#include <utility>

#include "kiln/control_flow.h"
#include "kiln/ops.h"

namespace kiln::testing {

inline Array rnn_loss_scan(const Array& w, const Array& h0, const Array& xs) {
  auto step = [&w](const Array& h, const Array& x) {
    Array next = tanh(w * h + x);
    return std::pair{next, next * next};
  };
  auto [h, ys] = scan(step, h0, xs);
  return sum(ys) + sum(h);
}

}  // namespace kiln::testing
