// Shared pieces of kiln::random's implementation: key validation and the partitionable
// Threefry bit streams the samplers draw from (JAX's _threefry_random_bits_partitionable).
#pragma once

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

}  // namespace kiln::random::detail
