// jax.random.randint, bit for bit: two 32-bit draws from the two halves of a split key,
// combined as (high mod span) * m + (low mod span), all mod span, in u32 arithmetic that
// wraps as XLA's does, m being JAX's computation of 2^32 mod span. Biased when the span is not a
// power of 2, as JAX's is (docs/random.md); u8 samples at 32 bits with its bounds clipped, then
// narrows. Everything about the bounds is worked out on the host, so each element costs a few
// integer ops.
#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/random.h"
#include "random/random_internal.h"

namespace kiln::random {
namespace {

Array u32_scalar(uint32_t value, const Array& like, CallSite site) {
  return full(Shape{}, static_cast<double>(value), DType::u32, device_of(like), site);
}

}  // namespace

Array randint(const Array& key, Shape shape, int64_t minval, int64_t maxval, DType dtype,
              CallSite site) {
  detail::check_key("randint", key, site);
  detail::check_shape("randint", shape, site);
  if (dtype != DType::i32 && dtype != DType::u32 && dtype != DType::u8) {
    fail(site, fmt::format("randint: dtype must be i32, u32 or u8, got {}", dtype_name(dtype)),
         dtype == DType::i64 ? "i64 draws need 64-bit unsigned arithmetic, which kiln does not "
                               "have yet; draw i32 and convert"
                             : "randint draws integers; random::uniform draws floats");
  }
  // The dtype the bits are combined in: u8 samples at 32 bits, as JAX does.
  DType sampled = dtype == DType::u8 ? DType::i32 : dtype;
  if (dtype == DType::u8) {
    minval = std::clamp<int64_t>(minval, 0, 255);
    maxval = std::clamp<int64_t>(maxval, 0, 256);
  }
  int64_t lowest = sampled == DType::i32 ? std::numeric_limits<int32_t>::min() : 0;
  int64_t highest = sampled == DType::i32 ? std::numeric_limits<int32_t>::max()
                                          : std::numeric_limits<uint32_t>::max();
  bool maxval_out_of_range = maxval > highest;
  int64_t lo = std::clamp(minval, lowest, highest);
  int64_t hi = std::clamp(maxval, lowest, highest);
  // maxval - minval in the sampled dtype, then read as u32 (both wrap modulo 2^32).
  auto span = static_cast<uint32_t>(static_cast<uint64_t>(hi - lo));
  if (hi <= lo) span = 1;                         // an empty range gives minval
  if (maxval_out_of_range && hi > lo) span += 1;  // maxval past the dtype: one more value
  Array keys = split(key, 2, site);
  Array higher = bits(key_at(keys, 0, site), shape, DType::u32, site);
  Array lower = bits(key_at(keys, 1, site), shape, DType::u32, site);
  Array offset = lower;  // span 0 is all 2^32 values: every mod is the identity
  if (span != 0) {
    // 2^32 mod span as JAX computes it: (2^16 mod span)^2 in u32 arithmetic, which wraps
    // to 0 once span > 2^16 (so the high draw then adds nothing), and then mod span.
    uint32_t multiplier = static_cast<uint32_t>((uint64_t{1} << 16) % span);
    multiplier = static_cast<uint32_t>(multiplier * multiplier) % span;
    Array s = u32_scalar(span, key, site);
    Array high_part = mul(rem(higher, s, site), u32_scalar(multiplier, key, site), site);
    offset = rem(add(high_part, rem(lower, s, site), site), s, site);
  }
  // minval + offset in the sampled dtype: u32 -> i32 keeps the bits, the add wraps.
  Array start = full(Shape{}, static_cast<double>(lo), sampled, device_of(key), site);
  Array value = add(
      start, sampled == DType::u32 ? offset : bitcast_convert_type(offset, sampled, site), site);
  return sampled == dtype ? value : astype(value, dtype, site);
}

}  // namespace kiln::random
