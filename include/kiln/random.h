// kiln::random: counter-based pseudo-random numbers compatible with JAX's default
// generator (Threefry-2x32, jax_threefry_partitionable=True, the default since JAX 0.5.0).
// A key is an ordinary u32[2] array: split it or fold data into it to get independent
// keys, and pass a key to a sampler. The same key always gives the same numbers, on any
// number of threads; nothing is hidden state. See docs/random.md.
//
//   using namespace kiln;
//   Array key = random::key(42);
//   Array keys = random::split(key, 2);                  // u32[2,2]
//   Array w = random::normal(random::key_at(keys, 0), {784, 512});
//   Array mask = random::bernoulli(random::key_at(keys, 1), 0.9, {512});
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "kiln/array.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::random {

// ----- keys -----------------------------------------------------------------------------
// JAX's threefry_seed: the key (seed >> 32, seed & 0xffffffff), on `device` (default: the
// default device). Equals jax.random.key_data(jax.random.key(seed)) for 0 <= seed < 2^32,
// and for every 64-bit seed (negative ones as their two's complement) with jax_enable_x64.
Array key(uint64_t seed, Device* device = nullptr, CallSite site = {});
// n new keys, u32[n,2]; row i equals fold_in(key, i).
Array split(const Array& key, int64_t n = 2, CallSite site = {});
// Row `index` of a u32[n,2] array of keys (from split), as a key.
Array key_at(const Array& keys, int64_t index, CallSite site = {});
// A new key that depends on `key` and `data` (e.g. a step or layer number).
Array fold_in(const Array& key, uint32_t data, CallSite site = {});

// ----- samplers -------------------------------------------------------------------------
// Uniform random bits: u32, or u8 (the low byte of each u32 draw), as jax.random.bits.
Array bits(const Array& key, Shape shape = {}, DType dtype = DType::u32, CallSite site = {});
// Uniform floats in [minval, maxval): the mantissa bits of a draw give a float in [1, 2),
// from which 1 is subtracted, then scaled in `dtype` (jax.random.uniform). The bounds are
// rounded to `dtype` and must be finite and ordered there.
Array uniform(const Array& key, Shape shape = {}, DType dtype = DType::f32, double minval = 0,
              double maxval = 1, CallSite site = {});
// Standard normal: sqrt(2) * erf_inv(u) for u uniform in (-1, 1).
Array normal(const Array& key, Shape shape = {}, DType dtype = DType::f32, CallSite site = {});
// Standard normal truncated to the open interval (lower, upper); bounds may be infinite.
Array truncated_normal(const Array& key, double lower, double upper, Shape shape = {},
                       DType dtype = DType::f32, CallSite site = {});
// bool array, true with probability p (0 <= p <= 1): uniform(key, shape, f32) < p.
Array bernoulli(const Array& key, double p = 0.5, Shape shape = {}, CallSite site = {});
// Per-element probabilities of a float dtype (the uniform is drawn in that dtype); the
// result has `shape` (which p must broadcast to), or p's shape. Values of p are not
// checked: below 0 is never true, above 1 always.
Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape = std::nullopt,
                CallSite site = {});
// Samples one index per distribution along `axis` of the unnormalised log-probabilities
// `logits` (Gumbel-max trick); i32 with `axis` removed.
Array categorical(const Array& key, const Array& logits, int64_t axis = -1, CallSite site = {});
// A random permutation of 0..n-1 (i32; i64 when n does not fit in i32).
Array permutation(const Array& key, int64_t n, CallSite site = {});
// Integers in [minval, maxval), bit for bit jax.random.randint: i32, u32 or u8 (sampled at
// 32 bits, as JAX does). Bounds outside the dtype are clipped to it (a maxval past its
// largest value includes that value); maxval <= minval gives minval everywhere. As in JAX,
// the draw is (high mod span) * m + (low mod span) of two 32-bit draws, m = (2^16 mod
// span)^2 in wrapping u32 arithmetic (so for spans above 2^16 only the low draw counts):
// biased when the span is not a power of 2, by up to span / 2^32.
Array randint(const Array& key, Shape shape, int64_t minval, int64_t maxval,
              DType dtype = DType::i32, CallSite site = {});
// x with its entries along `axis` randomly permuted.
Array permutation(const Array& key, const Array& x, int64_t axis = 0, CallSite site = {});

// ----- the hash -------------------------------------------------------------------------
// Threefry-2x32 (20 rounds) of the counters (x0, x1) under the key (k0, k1); u32 operands
// broadcast like add. Matches Random123's threefry2x32_20.
std::pair<Array, Array> threefry2x32(const Array& k0, const Array& k1, const Array& x0,
                                     const Array& x1, CallSite site = {});

}  // namespace kiln::random
