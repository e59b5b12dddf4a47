// kiln::random::permutation, following JAX's _shuffle: a few rounds of sorting by fresh
// random 32-bit keys (stable sort_key_val). Ties between equal sort keys keep the current
// order, and enough rounds make a collision in every round negligible (the round count is
// JAX's: ceil(3 ln n / ln(2^32 - 1)), one round for n up to ~1600, two up to ~2.6e6).
#include <cmath>

#include <fmt/format.h>

#include "kiln/device.h"
#include "kiln/ops.h"
#include "ops/op_util.h"
#include "random/random_internal.h"

namespace kiln::random {
namespace {

Array shuffle(Array key, Array x, int64_t axis, CallSite site) {
  double size = static_cast<double>(std::max<int64_t>(1, x.size()));
  auto rounds = static_cast<int>(std::ceil(3 * std::log(size) / std::log(4294967295.0)));
  for (int round = 0; round < rounds; ++round) {
    Array keys = split(key, 2, site);
    key = key_at(keys, 0, site);
    Array sort_keys = detail::bits32(key_at(keys, 1, site), x.shape(), site);
    x = sort_key_val(sort_keys, x, axis, site).second;
  }
  return x;
}

}  // namespace

Array permutation(const Array& key, int64_t n, CallSite site) {
  detail::check_key("permutation", key, site);
  if (n < 0) {
    fail(site, fmt::format("permutation: n must be >= 0, got {}", n),
         "permutation(key, n) permutes 0..n-1");
  }
  DType dtype = n <= int64_t{2147483647} ? DType::i32 : DType::i64;
  return shuffle(key, arange(n, dtype, device_of(key), site), 0, site);
}

Array permutation(const Array& key, const Array& x, int64_t axis, CallSite site) {
  detail::check_key("permutation", key, site);
  if (!x.defined()) {
    fail(site, "permutation: x is an empty Array (default-constructed)",
         "to permute 0..n-1 call permutation(key, n) with an integer n");
  }
  if (x.rank() == 0) {
    fail(site,
         fmt::format("permutation: x must have at least one axis, got {}", x.aval().to_string()),
         "to permute 0..n-1 call permutation(key, n) with an integer n");
  }
  int64_t dimension = user_axis("permutation", axis, x.rank(), site);
  if (x.rank() == 1) return shuffle(key, x, dimension, site);
  // Higher ranks permute whole slices: shuffle their indices, then gather.
  Array order = shuffle(key, arange(x.dim(dimension), DType::i32, device_of(key), site), 0, site);
  return take(x, order, dimension, std::nullopt, site);
}

}  // namespace kiln::random
