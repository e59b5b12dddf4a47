// Shared pieces of kiln::random's implementation: key validation and the partitionable
// Threefry bit streams the samplers draw from (JAX's _threefry_random_bits_partitionable).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

#include "kiln/random.h"

namespace kiln::random::detail {

// Fails unless `key` is a u32[2] array, naming `op` and the key's type.
void check_key(std::string_view op, const Array& key, CallSite site);
// Fails unless `shape` has no negative size.
void check_shape(std::string_view op, const Shape& shape, CallSite site);

// The two u32 words Threefry gives for each element of `shape`: the hash of the element's
// row-major index i, as the counter (i >> 32, i & 0xffffffff), under `key`.
std::pair<Array, Array> hashed_counts(const Array& key, const Shape& shape, CallSite site);
// 32 random bits per element: the xor of the two words.
Array bits32(const Array& key, const Shape& shape, CallSite site);
// 64 random bits per element as i64 (kiln has no u64): the first word above the second.
Array bits64(const Array& key, const Shape& shape, CallSite site);

// Floats in [0, 1) built from the mantissa bits of one draw per element (JAX's _uniform
// before scaling).
Array unit_floats(const Array& key, const Shape& shape, DType dtype, CallSite site);
// max(lo, unit * (hi - lo) + lo) in `dtype`; lo and hi are rank-0 arrays of `dtype`.
Array scale_uniform(const Array& unit, const Array& lo, const Array& hi, CallSite site);

// A rank-0 constant next to `like` (on its device when it is committed to one).
Array constant(double value, DType dtype, const Array& like, CallSite site);

// What one draw computes besides its key: the shape, the dtype and two bounds (what they
// mean is the sampler's). A static argument of the compiled draws, so hashable.
struct DrawSpec {
  Shape shape;
  DType dtype = DType::f32;
  double a = 0, b = 0;
  bool operator==(const DrawSpec&) const = default;
};
using DrawBody = Array (*)(const Array& key, const DrawSpec& spec, CallSite site);

// body(key, spec) as one compiled program per (body, spec) when called eagerly, as JAX's
// samplers are jitted: the hash, the float conversion and the transform run as one fused
// pass, and the only buffer left behind is the result (one eager op per step would hold
// every intermediate alive until the device reached it: 13x the result's bytes for
// normal). Inside a transformation the body is traced in place, keeping the caller's sites.
Array compiled_draw(DrawBody body, const Array& key, DrawSpec spec, CallSite site);

}  // namespace kiln::random::detail

template <>
struct std::hash<kiln::random::detail::DrawSpec> {
  size_t operator()(const kiln::random::detail::DrawSpec& spec) const {
    size_t h = std::hash<int>{}(static_cast<int>(spec.dtype));
    auto mix = [&h](size_t value) { h ^= value + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
    for (int64_t size : spec.shape.dims()) mix(std::hash<int64_t>{}(size));
    mix(std::hash<double>{}(spec.a));
    mix(std::hash<double>{}(spec.b));
    return h;
  }
};
