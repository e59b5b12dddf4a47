// lax.top_k from the stable sort: the k largest along the last axis, largest first, ties in
// index order, NaN above everything and +0 above -0 (XLA's total order). The values are
// gathered with the indices, so their gradient is the gather's (a scatter-add into the
// picked places), whatever the sort does.
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "ops/op_util.h"

namespace kiln {

std::pair<Array, Array> top_k(const Array& x, int64_t k, CallSite site) {
  require_defined("top_k", x, site);
  if (x.rank() == 0) {
    fail(site, fmt::format("top_k: the operand must have at least one axis, got {}",
                           x.aval().to_string()));
  }
  int64_t last = x.rank() - 1;
  int64_t n = x.shape()[last];
  if (k < 0 || k > n) {
    fail(site, fmt::format("top_k: k = {} is outside [0, {}], the size of the last axis of {}", k,
                           n, x.aval().to_string()));
  }
  Device* device = device_of(x);
  Array position = iota(x.shape(), DType::i32, last, device, site);
  // Sorted ascending by (x, zero's sign, -position) and then reversed: largest first, and
  // among equals the lower position first.
  Array backwards =
      sub(full(Shape{}, static_cast<double>(n - 1), DType::i32, device, site), position, site);
  std::vector<Array> keys = {x};
  if (is_floating(x.dtype())) {
    // -0 and +0 compare equal in the sort; 1/x tells them apart (-inf, +inf).
    Array zero = zeros_like(x, site);
    Array sign_of_zero = where(equal(x, zero, site), div(ones_like(x, site), x, site), zero, site);
    keys.push_back(sign_of_zero);
  }
  keys.push_back(backwards);
  keys.push_back(position);
  int64_t num_keys = static_cast<int64_t>(keys.size()) - 1;
  std::vector<Array> sorted = sort(keys, last, num_keys, site);
  Array indices = slice_axis(flip(sorted.back(), {last}, site), last, 0, k, site);
  return {take_along_axis(x, indices, last, site), indices};
}

}  // namespace kiln
