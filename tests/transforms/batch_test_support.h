// What the hand-written batching-rule tests share: distinct deterministic values, one
// example of a batch, and vmap of a function of a list of arrays.
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <vector>

#include "kiln/ops.h"
#include "kiln/vmap.h"

namespace kiln::batch_test {

// Distinct, deterministic values (example b differs from example b + 1).
inline Array values(Shape shape, DType dtype = DType::f64, double seed = 0) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 3 * std::sin(0.7 * static_cast<double>(i) + seed);
  return astype(from_host(v, std::move(shape)), dtype);
}

// Example b of `x` batched on `axis`.
inline Array example_of(const Array& x, int64_t axis, int64_t b) {
  Dims start(static_cast<size_t>(x.rank()), 0);
  Dims limit = x.shape().dims();
  start[static_cast<size_t>(axis)] = b;
  limit[static_cast<size_t>(axis)] = b + 1;
  return squeeze(slice(x, start, limit), {axis});
}

// A function of the operands of one example.
using Fn = std::function<Array(std::span<const Array>)>;

// vmap of f over one, two or three operands with these axes.
inline Array vmapped(const Fn& f, const std::vector<Array>& xs, const std::vector<AxisSpec>& axes) {
  switch (xs.size()) {
    case 1:
      return vmap([&](const Array& a) { return f(std::vector<Array>{a}); }, axes)(xs[0]);
    case 2:
      return vmap(
          [&](const Array& a, const Array& b) {
            return f(std::vector<Array>{a, b});
          },
          axes)(xs[0], xs[1]);
    default:
      return vmap(
          [&](const Array& a, const Array& b, const Array& c) {
            return f(std::vector<Array>{a, b, c});
          },
          axes)(xs[0], xs[1], xs[2]);
  }
}

}  // namespace kiln::batch_test
