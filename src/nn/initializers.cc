// Parameter initializers (include/kiln/nn/initializers.h), bit-compatible with
// jax.nn.initializers: the same key, shape and dtype give the same values as JAX, because
// each draws through kiln::random exactly as JAX draws through jax.random.
// An initializer is called long after it was made, through a std::function, so its errors
// carry no call site; they name the initializer and the shape instead.
#include "kiln/nn/initializers.h"

#include <cmath>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "kiln/random.h"

namespace kiln::nn {
namespace {

// Standard deviation of a standard normal truncated to (-2, 2): dividing by it makes the
// truncated draw have the requested standard deviation (JAX's constant).
constexpr double kTruncatedStddev = .87962566103423978;

void check_float(std::string_view name, const Shape& shape, DType dtype) {
  if (!is_floating(dtype)) {
    fail(kUnknownSite,
         fmt::format("{}: cannot initialize an array of dtype {} (shape {}); random "
                     "initializers make floating-point values",
                     name, dtype_name(dtype), shape.to_string()),
         "ask for f32 (or another floating dtype), or use zeros_init / ones_init / "
         "constant_init for integer arrays");
  }
}

Initializer constant_named(double value) {
  return [value](const Array& key, const Shape& shape, DType dtype) {
    // The key only says where the parameter lives: a committed key's device.
    return full(shape, value, dtype, key.defined() ? device_of(key) : nullptr);
  };
}

double fan_for(const Fans& fans, FanMode mode) {
  switch (mode) {
    case FanMode::kFanIn:
      return fans.fan_in;
    case FanMode::kFanOut:
      return fans.fan_out;
    case FanMode::kFanAvg:
      return (fans.fan_in + fans.fan_out) / 2;
  }
  return fans.fan_in;
}

Initializer variance_scaling_named(std::string name, double scale, FanMode mode,
                                   Distribution distribution, CallSite site = kUnknownSite) {
  if (!(scale > 0) || !std::isfinite(scale)) {
    fail(site, fmt::format("{}: scale must be positive and finite, got {}", name, scale));
  }
  return [name = std::move(name), scale, mode, distribution](const Array& key, const Shape& shape,
                                                             DType dtype) {
    check_float(name, shape, dtype);
    // An empty array has no fan to speak of (and a zero fan would give an infinite bound).
    if (shape.num_elements() == 0) return zeros(shape, dtype, device_of(key));
    Fans fans = compute_fans(shape, kUnknownSite);
    double variance = scale / fan_for(fans, mode);
    switch (distribution) {
      case Distribution::kTruncatedNormal:
        return random::truncated_normal(key, -2, 2, shape, dtype) *
               (std::sqrt(variance) / kTruncatedStddev);
      case Distribution::kUntruncatedNormal:
        return random::normal(key, shape, dtype) * std::sqrt(variance);
      case Distribution::kUniform:
        return random::uniform(key, shape, dtype, -1, 1) * std::sqrt(3 * variance);
    }
    return random::normal(key, shape, dtype) * std::sqrt(variance);
  };
}

void check_stddev(std::string_view name, double stddev, CallSite site) {
  if (!(stddev >= 0) || !std::isfinite(stddev)) {
    fail(site, fmt::format("{}: stddev must be non-negative and finite, got {}", name, stddev));
  }
}

}  // namespace

Fans compute_fans(const Shape& shape, CallSite site) {
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] < 0) {
      fail(site, fmt::format("compute_fans: shape {} has a negative size", shape.to_string()));
    }
  }
  if (shape.rank() == 0) return {.fan_in = 1, .fan_out = 1};  // a scalar, as JAX
  if (shape.rank() == 1) {
    auto size = static_cast<double>(shape[0]);
    return {.fan_in = size, .fan_out = size};
  }
  // The product of the leading axes (a convolution's window), computed directly rather
  // than as size / (in * out), which would divide by zero for an empty axis.
  double receptive_field = 1;
  for (int64_t d = 0; d + 2 < shape.rank(); ++d) receptive_field *= static_cast<double>(shape[d]);
  return {.fan_in = static_cast<double>(shape[shape.rank() - 2]) * receptive_field,
          .fan_out = static_cast<double>(shape[shape.rank() - 1]) * receptive_field};
}

Initializer zeros_init() {
  return constant_named(0);
}
Initializer ones_init() {
  return constant_named(1);
}
Initializer constant_init(double value) {
  return constant_named(value);
}

Initializer truncated_normal(double stddev, CallSite site) {
  check_stddev("truncated_normal", stddev, site);
  return [stddev](const Array& key, const Shape& shape, DType dtype) {
    check_float("truncated_normal", shape, dtype);
    return random::truncated_normal(key, -2, 2, shape, dtype) * (stddev / kTruncatedStddev);
  };
}

Initializer normal_init(double stddev, CallSite site) {
  check_stddev("normal_init", stddev, site);
  return [stddev](const Array& key, const Shape& shape, DType dtype) {
    check_float("normal_init", shape, dtype);
    return random::normal(key, shape, dtype) * stddev;
  };
}

Initializer variance_scaling(double scale, FanMode mode, Distribution distribution, CallSite site) {
  return variance_scaling_named("variance_scaling", scale, mode, distribution, site);
}

Initializer glorot_uniform() {
  return variance_scaling_named("glorot_uniform", 1, FanMode::kFanAvg, Distribution::kUniform);
}
Initializer glorot_normal() {
  return variance_scaling_named("glorot_normal", 1, FanMode::kFanAvg,
                                Distribution::kTruncatedNormal);
}
Initializer he_uniform() {
  return variance_scaling_named("he_uniform", 2, FanMode::kFanIn, Distribution::kUniform);
}
Initializer he_normal() {
  return variance_scaling_named("he_normal", 2, FanMode::kFanIn, Distribution::kTruncatedNormal);
}
Initializer lecun_uniform() {
  return variance_scaling_named("lecun_uniform", 1, FanMode::kFanIn, Distribution::kUniform);
}
Initializer lecun_normal() {
  return variance_scaling_named("lecun_normal", 1, FanMode::kFanIn, Distribution::kTruncatedNormal);
}

}  // namespace kiln::nn
