// Helpers for tests that make and look at arrays: f32 arrays from values, the values as
// doubles, one example of a batch, and bit-for-bit equality (NaN payloads and the sign of
// zero included).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/array.h"
#include "kiln/ops.h"
#include "kiln/random.h"

namespace kiln::testing {

inline std::vector<double> values(const Array& x) {
  return astype(x, DType::f64).to_vector<double>();
}

// An f32 array of `values` in `shape`.
inline Array floats(std::vector<float> values, Shape shape) {
  return from_host(values, std::move(shape));
}

// start, start + 1, ... in `shape`, as f32.
inline Array counting(Shape shape, float start = 0) {
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<float>(i);
  return floats(values, std::move(shape));
}

// An f64 array of `values` in `shape`.
inline Array f64(std::vector<double> values, Shape shape) {
  return from_host(values, std::move(shape));
}

// A u32 vector of `values`.
inline Array u32s(std::vector<uint32_t> values) {
  Shape shape{static_cast<int64_t>(values.size())};
  return from_host<uint32_t>(values, shape);
}

// Standard normal f32 values in `shape` from the key of `seed`.
inline Array random_f32(uint32_t seed, Shape shape) {
  return random::normal(random::key(seed), shape, DType::f32);
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
