// Helpers for tests that make and look at arrays: f32 arrays from values, the values as
// doubles, one example of a batch, and bit-for-bit equality (NaN payloads and the sign of
// zero included).
#pragma once

#include <cstring>
#include <vector>

#include "kiln/array.h"
#include "kiln/ops.h"

namespace kiln::testing {

inline std::vector<double> values(const Array& x) {
  return astype(x, DType::f64).to_vector<double>();
}

// An f32 array of `values` in `shape`.
inline Array floats(std::vector<float> values, Shape shape) {
  return from_host(values, std::move(shape));
}

// Entry `b` of `x` along axis 0.
inline Array example(const Array& x, int64_t b) {
  Dims start(static_cast<size_t>(x.rank()), 0), limit = x.shape().dims();
  start[0] = b;
  limit[0] = b + 1;
  return squeeze(slice(x, start, limit), {0});
}

inline bool same_bits(const Array& a, const Array& b) {
  if (a.aval() != b.aval()) return false;
  HostArray x = a.to_host();
  HostArray y = b.to_host();
  return x.bytes.size() == y.bytes.size() &&
         (x.bytes.empty() || std::memcmp(x.bytes.data(), y.bytes.data(), x.bytes.size()) == 0);
}

}  // namespace kiln::testing
