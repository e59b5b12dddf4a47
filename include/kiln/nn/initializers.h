// Parameter initializers: functions of (key, shape, dtype) returning a new array, as in
// jax.nn.initializers. The variance-scaling ones read fan-in and fan-out from the shape
// the way JAX does: the last axis is the output features, the one before it the input
// features, and any leading axes (a convolution's window, HWIO) multiply both.
//
//   Array w = nn::he_normal()(key, {784, 512}, DType::f32);   // stddev sqrt(2 / 784)
#pragma once

#include <functional>

#include "kiln/array.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::nn {

using Initializer = std::function<Array(const Array& key, const Shape& shape, DType dtype)>;

// Constants.
Initializer zeros_init();
Initializer ones_init();
Initializer constant_init(double value);

// Normal with this standard deviation, truncated to two standard deviations (and rescaled
// so that the standard deviation is `stddev`), as jax.nn.initializers.truncated_normal.
Initializer truncated_normal(double stddev = 1e-2, CallSite site = {});
Initializer normal_init(double stddev = 1e-2, CallSite site = {});

// Variance scaling: scale / fan, fan = fan_in, fan_out or their average.
//   uniform:          U(-sqrt(3 * variance), sqrt(3 * variance))
//   normal:           truncated normal on (-2, 2) rescaled to the variance (as JAX)
enum class FanMode { kFanIn, kFanOut, kFanAvg };
enum class Distribution { kTruncatedNormal, kUniform, kUntruncatedNormal };
Initializer variance_scaling(double scale, FanMode mode, Distribution distribution,
                             CallSite site = {});

Initializer glorot_uniform();  // scale 1, fan_avg, uniform
Initializer glorot_normal();   // scale 1, fan_avg, truncated normal
Initializer he_uniform();      // scale 2, fan_in, uniform
Initializer he_normal();       // scale 2, fan_in, truncated normal
Initializer lecun_uniform();   // scale 1, fan_in, uniform
Initializer lecun_normal();    // scale 1, fan_in, truncated normal

// The fan-in and fan-out variance_scaling uses for `shape` (as JAX: rank 1 has fan_in =
// fan_out = its size, rank 0 has both 1). Exposed for tests and for users' own initializers.
struct Fans {
  double fan_in = 0;
  double fan_out = 0;
};
Fans compute_fans(const Shape& shape, CallSite site = {});

}  // namespace kiln::nn
