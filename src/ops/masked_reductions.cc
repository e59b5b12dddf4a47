// jax.numpy's reductions with where=: the elements outside the mask are replaced by the
// reduction's identity (0 for sum, 1 for prod, the caller's `initial` for max and min, as
// jax.numpy requires one there) and the plain reduction runs on the result. As in
// jax.numpy, `initial` takes part in max and min even where every element is selected.
#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "kiln/device.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

// `where` broadcast to x's shape, or an error naming `op`.
Array mask_for(std::string_view op, const Array& x, const Array& where, CallSite site) {
  require_defined(op, x, site);
  if (!where.defined()) fail(site, fmt::format("{}: where is an empty Array", op));
  if (where.dtype() != DType::bool_) {
    fail(site, fmt::format("{}: where must be a bool mask, got {}", op, where.aval().to_string()));
  }
  broadcast_shapes(op, x.aval(), where.aval(), site);
  return broadcast_to(where, x.shape(), site);
}

Array scalar_like(const Array& x, double value, CallSite site) {
  return full(Shape{}, value, x.dtype(), device_of(x), site);
}

// x where `where` holds, `fill` (a scalar of x's dtype) elsewhere.
Array filled(std::string_view op, const Array& x, const Array& where, const Array& fill,
             CallSite site) {
  Array mask = mask_for(op, x, where, site);
  return kiln::where(mask, x, broadcast_to(fill, x.shape(), site), site);
}

}  // namespace

Array sum(const Array& x, Dims axes, bool keepdims, const Array& where, CallSite site) {
  return sum(filled("sum", x, where, scalar_like(x, 0, site), site), axes, keepdims, site);
}

Array prod(const Array& x, Dims axes, bool keepdims, const Array& where, CallSite site) {
  return prod(filled("prod", x, where, scalar_like(x, 1, site), site), axes, keepdims, site);
}

Array mean(const Array& x, Dims axes, bool keepdims, const Array& where, CallSite site) {
  require_defined("mean", x, site);
  // Integers average in f32, as mean() does.
  Array values = is_floating(x.dtype()) ? x : astype(x, DType::f32, site);
  Array mask = mask_for("mean", values, where, site);
  Array total =
      sum(filled("mean", values, where, scalar_like(values, 0, site), site), axes, keepdims, site);
  Array count = sum(astype(mask, values.dtype(), site), axes, keepdims, site);
  return div(total, count, site);
}

Array max(const Array& x, Dims axes, bool keepdims, const Array& where, double initial,
          CallSite site) {
  Array bound = scalar_like(x, initial, site);
  return maximum(max(filled("max", x, where, bound, site), axes, keepdims, site), bound, site);
}

Array min(const Array& x, Dims axes, bool keepdims, const Array& where, double initial,
          CallSite site) {
  Array bound = scalar_like(x, initial, site);
  return minimum(min(filled("min", x, where, bound, site), axes, keepdims, site), bound, site);
}

}  // namespace kiln
