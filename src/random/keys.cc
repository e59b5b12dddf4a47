// Keys and raw bits of kiln::random, following JAX's threefry2x32 PRNG implementation with
// jax_threefry_partitionable=True: threefry_seed (key), _threefry_split_foldlike (split),
// threefry_fold_in, and _threefry_random_bits_partitionable (bits). Everything is built
// from ordinary ops and the threefry2x32 primitive, so keys trace like any array.
#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "ops/op_util.h"
#include "prims/ids/random.h"
#include "random/random_internal.h"

namespace kiln::random {
namespace detail {

void check_key(std::string_view op, const Array& key, CallSite site) {
  if (!key.defined()) {
    fail(site, fmt::format("{}: the key is an empty Array (default-constructed)", op),
         "make keys with kiln::random::key(seed)");
  }
  if (key.dtype() == DType::u32 && key.shape() == Shape{2}) return;
  std::string hint = "make keys with kiln::random::key(seed)";
  if (key.dtype() == DType::u32 && key.rank() == 2 && key.dim(1) == 2) {
    hint = "this looks like several keys from split(); take one with random::key_at(keys, i)";
  }
  fail(site, fmt::format("{}: expects a key of type u32[2], got {}", op, key.aval().to_string()),
       hint);
}

void check_shape(std::string_view op, const Shape& shape, CallSite site) {
  for (int64_t size : shape.dims()) {
    if (size < 0) {
      fail(site, fmt::format("{}: shape {} has a negative size", op, shape.to_string()),
           "sizes are >= 0 (a size of 0 makes an empty array)");
    }
  }
}

Array constant(double value, DType dtype, const Array& like, CallSite site) {
  return scalar(value, dtype, device_of(like), site);
}

std::pair<Array, Array> hashed_counts(const Array& key, const Shape& shape, CallSite site) {
  Array k0 = reshape(slice(key, {0}, {1}, {}, site), Shape{}, site);
  Array k1 = reshape(slice(key, {1}, {2}, {}, site), Shape{}, site);
  int64_t count = shape.num_elements();
  Array high, low;
  if (count <= (int64_t{1} << 32)) {
    // Every index fits in the low word (JAX's iota_2x32_shape then has a zero high word).
    high = constant(0, DType::u32, key, site);
    low = reshape(iota(Shape{count}, DType::u32, 0, device_of(key), site), shape, site);
  } else {
    Array index = reshape(iota(Shape{count}, DType::i64, 0, device_of(key), site), shape, site);
    high = astype(shift_right_logical(index, constant(32, DType::i64, key, site), site), DType::u32,
                  site);
    low = astype(index, DType::u32, site);
  }
  return threefry2x32(k0, k1, high, low, site);
}

Array bits32(const Array& key, const Shape& shape, CallSite site) {
  auto [first, second] = hashed_counts(key, shape, site);
  return bitwise_xor(first, second, site);
}

Array bits64(const Array& key, const Shape& shape, CallSite site) {
  auto [first, second] = hashed_counts(key, shape, site);
  Array high =
      shift_left(astype(first, DType::i64, site), constant(32, DType::i64, key, site), site);
  return bitwise_or(high, astype(second, DType::i64, site), site);
}

}  // namespace detail

using detail::check_key;

Array key(uint64_t seed, Device* device, CallSite site) {
  uint32_t words[2] = {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)};
  return from_host<uint32_t>(std::span<const uint32_t>(words), Shape{2}, device, site);
}

Array split(const Array& key, int64_t n, CallSite site) {
  check_key("split", key, site);
  if (n < 0) {
    fail(site, fmt::format("split: the number of keys must be >= 0, got {}", n),
         "split(key) gives 2 keys; split(key, n) gives n");
  }
  auto [first, second] = detail::hashed_counts(key, Shape{n}, site);
  Array pair[] = {first, second};
  return stack(pair, 1, site);
}

Array key_at(const Array& keys, int64_t index, CallSite site) {
  if (!keys.defined() || keys.dtype() != DType::u32 || keys.rank() != 2 || keys.dim(1) != 2) {
    fail(site,
         fmt::format("key_at: expects keys of type u32[n,2] (from split), got {}",
                     keys.defined() ? keys.aval().to_string() : "an empty Array"),
         "split(key, n) makes n keys");
  }
  if (index < 0 || index >= keys.dim(0)) {
    fail(site, fmt::format("key_at: index {} is out of range for {} keys", index, keys.dim(0)),
         fmt::format("valid indices are 0..{}", keys.dim(0) - 1));
  }
  return reshape(slice(keys, {index, 0}, {index + 1, 2}, {}, site), Shape{2}, site);
}

Array fold_in(const Array& key, uint32_t data, CallSite site) {
  check_key("fold_in", key, site);
  // threefry_2x32(key, threefry_seed(data)): the counter pair (0, data) hashed once.
  Array k0 = reshape(slice(key, {0}, {1}, {}, site), Shape{1}, site);
  Array k1 = reshape(slice(key, {1}, {2}, {}, site), Shape{1}, site);
  auto [first, second] =
      threefry2x32(k0, k1, detail::constant(0, DType::u32, key, site),
                   detail::constant(static_cast<double>(data), DType::u32, key, site), site);
  Array pair[] = {first, second};
  return concatenate(pair, 0, site);
}

Array bits(const Array& key, Shape shape, DType dtype, CallSite site) {
  check_key("bits", key, site);
  detail::check_shape("bits", shape, site);
  if (dtype != DType::u32 && dtype != DType::u8) {
    fail(site, fmt::format("bits: dtype must be u32 or u8, got {}", dtype_name(dtype)),
         "kiln's unsigned dtypes are u8 and u32; for floats use random::uniform");
  }
  Array words = detail::bits32(key, shape, site);
  return dtype == DType::u32 ? words : astype(words, dtype, site);
}

std::pair<Array, Array> threefry2x32(const Array& k0, const Array& k1, const Array& x0,
                                     const Array& x1, CallSite site) {
  const Array* operands[] = {&k0, &k1, &x0, &x1};
  for (const Array* operand : operands) {
    if (!operand->defined()) {
      fail(site, "threefry2x32: an operand is an empty Array (default-constructed)",
           "the operands are u32 arrays: the key words k0, k1 and the counter words x0, x1");
    }
  }
  AbstractValue out = k0.aval();
  for (const Array* operand : operands) {
    out.shape = broadcast_shapes("threefry2x32", out, operand->aval(), site);
  }
  int64_t rank = out.shape.rank();
  Array lifted[] = {lift_rank(k0, rank, site), lift_rank(k1, rank, site), lift_rank(x0, rank, site),
                    lift_rank(x1, rank, site)};
  std::vector<Array> hashed = bind(prim::threefry2x32, lifted, NoParams{}, site);
  return {hashed[0], hashed[1]};
}

}  // namespace kiln::random
