// jax.numpy's elementwise predicates and the reductions composed from other reductions
// (kiln/array_functions.h): square, isnan, isinf, isfinite, clip with array bounds, any,
// all, var, std, logsumexp and the norms.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kiln/array_functions.h"
#include "ops/op_util.h"
#include "prims/ids/shape.h"

namespace kiln {
namespace {

Array weak(double value, const Array& like, CallSite site) {
  return detail::weak_scalar_like(value, is_floating(like.dtype()), like, site);
}

// The dtype a statistic is computed in, as jax.numpy does: integers and bools as f32,
// f16 and bf16 widened to f32 (and the result narrowed back).
DType statistic_dtype(const Array& x) {
  DType dtype = x.dtype();
  return is_floating(dtype) && dtype != DType::f16 && dtype != DType::bf16 ? dtype : DType::f32;
}

DType result_dtype(const Array& x) {
  return is_floating(x.dtype()) ? x.dtype() : DType::f32;
}

// The product of the sizes of `axes` (already normalised).
int64_t count_over(const Array& x, const Dims& axes) {
  int64_t count = 1;
  for (int64_t axis : axes) count *= x.shape()[axis];
  return count;
}

// Elements that are nonzero, as i32 (1 or 0), for max and min to reduce.
Array nonzero_as_count(const Array& x, CallSite site) {
  Array truth = x.dtype() == DType::bool_ ? x : not_equal(x, zeros_like(x, site), site);
  return astype(truth, DType::i32, site);
}

}  // namespace

Array square(const Array& x, CallSite site) {
  require_defined("square", x, site);
  return mul(x, x, site);
}

Array isnan(const Array& x, CallSite site) {
  require_defined("isnan", x, site);
  return not_equal(x, x, site);  // only NaN differs from itself; never for integers
}

Array isinf(const Array& x, CallSite site) {
  require_defined("isinf", x, site);
  if (!is_floating(x.dtype())) return not_equal(x, x, site);
  return equal(abs(x, site), weak(std::numeric_limits<double>::infinity(), x, site), site);
}

Array isfinite(const Array& x, CallSite site) {
  require_defined("isfinite", x, site);
  return is_floating(x.dtype()) ? is_finite(x, site) : equal(x, x, site);
}

Array clip(const Array& x, const Array& low, const Array& high, CallSite site) {
  require_defined("clip", x, site);
  require_defined("clip (low)", low, site);
  require_defined("clip (high)", high, site);
  return minimum(maximum(x, low, site), high, site);
}

Array any(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("any", x, site);
  // An empty reduction's max is the lowest i32, which is not > 0: false, as numpy says.
  return greater(max(nonzero_as_count(x, site), axes, keepdims, site),
                 full(Shape{}, 0, DType::i32, device_of(x), site), site);
}

Array all(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("all", x, site);
  // An empty reduction's min is the highest i32: true.
  return greater(min(nonzero_as_count(x, site), axes, keepdims, site),
                 full(Shape{}, 0, DType::i32, device_of(x), site), site);
}

Array var(const Array& x, Dims axes, int64_t ddof, bool keepdims, CallSite site) {
  require_defined("var", x, site);
  if (ddof < 0) fail(site, fmt::format("var: ddof must be >= 0, got {}", ddof));
  Dims reduced = user_axes("var", axes, x.rank(), site);
  Array wide = astype(x, statistic_dtype(x), site);
  Array centered = sub(wide, mean(wide, reduced, true, site), site);
  // As numpy and jax.numpy: the sum of squares over max(N - ddof, 0), so an N <= ddof
  // gives inf (or NaN where every deviation is 0).
  double divisor = static_cast<double>(std::max<int64_t>(count_over(x, reduced) - ddof, 0));
  Array out = div(sum(mul(centered, centered, site), reduced, keepdims, site),
                  weak(divisor, wide, site), site);
  return astype(out, result_dtype(x), site);
}

Array std(const Array& x, Dims axes, int64_t ddof, bool keepdims, CallSite site) {
  require_defined("std", x, site);
  Array variance = var(x, std::move(axes), ddof, keepdims, site);
  return astype(sqrt(astype(variance, statistic_dtype(variance), site), site), variance.dtype(),
                site);
}

Array logsumexp(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("logsumexp", x, site);
  Dims reduced = user_axes("logsumexp", axes, x.rank(), site);
  Array wide = astype(x, statistic_dtype(x), site);
  // The largest element taken out keeps exp from overflowing; an infinite or empty one is
  // replaced by 0, and it is a constant for the gradient (which is then softmax).
  Array peak = max(wide, reduced, true, site);
  peak = where(is_finite(peak, site), peak, zeros_like(peak, site), site);
  peak = bind1(prim::stop_gradient, {peak}, NoParams{}, site);
  Array total = sum(exp(sub(wide, peak, site), site), reduced, keepdims, site);
  Array shift = keepdims ? peak : reshape(peak, total.shape(), site);
  return astype(add(log(total, site), shift, site), result_dtype(x), site);
}

namespace linalg {

Array norm(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("linalg::norm", x, site);
  Array wide = astype(x, result_dtype(x), site);
  return sqrt(sum(mul(wide, wide, site), axes, keepdims, site), site);
}

Array vector_norm(const Array& x, double ord, Dims axes, bool keepdims, CallSite site) {
  require_defined("linalg::vector_norm", x, site);
  if (std::isnan(ord)) fail(site, "linalg::vector_norm: ord is NaN");
  Array wide = astype(x, result_dtype(x), site);
  if (ord == 2) return norm(wide, axes, keepdims, site);
  if (std::isinf(ord)) {
    Array magnitude = abs(wide, site);
    return ord > 0 ? max(magnitude, axes, keepdims, site) : min(magnitude, axes, keepdims, site);
  }
  if (ord == 0) {
    return sum(astype(not_equal(wide, zeros_like(wide, site), site), wide.dtype(), site), axes,
               keepdims, site);
  }
  if (ord == 1) return sum(abs(wide, site), axes, keepdims, site);
  Array powered = pow(abs(wide, site), weak(ord, wide, site), site);
  return pow(sum(powered, axes, keepdims, site), weak(1.0 / ord, wide, site), site);
}

}  // namespace linalg
}  // namespace kiln
