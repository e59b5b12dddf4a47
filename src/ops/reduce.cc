// User-facing reductions and scans: sum, mean, max, min, prod, argmax, argmin, cumsum.
// They accept negative axes and keepdims, normalise the axes (empty = all) and bind the
// reduce primitives. Empty max/min reductions give the identity (-inf/+inf, or the
// integer's lowest/highest value) like lax.reduce_max, rather than raising as numpy does.
#include <fmt/format.h>

#include "ops/op_util.h"
#include "prims/ids/reduce.h"

namespace kiln {
namespace {

// Bool sums and products count in i32, as numpy does.
Array counting_dtype(const Array& x, CallSite site) {
  return x.dtype() == DType::bool_ ? astype(x, DType::i32, site) : x;
}

// `reduced` reshaped to keep each reduced axis as size 1.
Array keep_dims(const Array& reduced, const Shape& in_shape, const Dims& axes, CallSite site) {
  Shape kept = in_shape;
  for (int64_t axis : axes) kept[axis] = 1;
  return reshape(reduced, kept, site);
}

Array reduce(PrimId id, std::string_view op, const Array& x, const Dims& axes, bool keepdims,
             CallSite site) {
  require_defined(op, x, site);
  Dims normalised = user_axes(op, axes, x.rank(), site);
  Array out = bind1(id, {x}, ReduceParams{normalised}, site);
  return keepdims ? keep_dims(out, x.shape(), normalised, site) : out;
}

Array arg_reduce(PrimId id, std::string_view op, const Array& x, int64_t axis, DType index_dtype,
                 CallSite site) {
  require_defined(op, x, site);
  int64_t normalised = user_axis(op, axis, x.rank(), site);
  if (x.shape()[normalised] == 0) {
    fail(site,
         fmt::format("{}: axis {} of {} has size 0, so it has no {} element", op, axis,
                     x.aval().to_string(), id == prim::argmax ? "largest" : "smallest"),
         "check the shape; an empty axis has no index to return");
  }
  if (index_dtype != DType::i32 && index_dtype != DType::i64) {
    fail(site,
         fmt::format("{}: index_dtype must be i32 or i64, got {}", op, dtype_name(index_dtype)));
  }
  return bind1(id, {x}, ArgReduceParams{normalised, index_dtype}, site);
}

}  // namespace

Array sum(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("sum", x, site);
  return reduce(prim::reduce_sum, "sum", counting_dtype(x, site), axes, keepdims, site);
}

Array prod(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("prod", x, site);
  return reduce(prim::reduce_prod, "prod", counting_dtype(x, site), axes, keepdims, site);
}

Array max(const Array& x, Dims axes, bool keepdims, CallSite site) {
  return reduce(prim::reduce_max, "max", x, axes, keepdims, site);
}

Array min(const Array& x, Dims axes, bool keepdims, CallSite site) {
  return reduce(prim::reduce_min, "min", x, axes, keepdims, site);
}

// Integers and bool average in f32; 16-bit floats sum in f32 (so the sum cannot overflow
// where the mean would not) and round back once, as jnp.mean does. An empty reduction
// divides 0 by 0 and gives NaN, like numpy.
Array mean(const Array& x, Dims axes, bool keepdims, CallSite site) {
  require_defined("mean", x, site);
  Dims normalised = user_axes("mean", axes, x.rank(), site);
  int64_t count = 1;
  for (int64_t axis : normalised) count *= x.shape()[axis];
  DType out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::f32;
  bool narrow = out_dtype == DType::f16 || out_dtype == DType::bf16;
  DType compute = narrow ? DType::f32 : out_dtype;
  Array wide = x.dtype() == compute ? x : astype(x, compute, site);
  Array total = bind1(prim::reduce_sum, {wide}, ReduceParams{normalised}, site);
  Array out =
      div(total, detail::weak_scalar_like(static_cast<double>(count), true, total, site), site);
  if (narrow) out = astype(out, out_dtype, site);
  return keepdims ? keep_dims(out, x.shape(), normalised, site) : out;
}

Array argmax(const Array& x, int64_t axis, DType index_dtype, CallSite site) {
  return arg_reduce(prim::argmax, "argmax", x, axis, index_dtype, site);
}

Array argmin(const Array& x, int64_t axis, DType index_dtype, CallSite site) {
  return arg_reduce(prim::argmin, "argmin", x, axis, index_dtype, site);
}

Array cumsum(const Array& x, int64_t axis, bool reverse, CallSite site) {
  require_defined("cumsum", x, site);
  int64_t normalised = user_axis("cumsum", axis, x.rank(), site);
  return bind1(prim::cumsum, {counting_dtype(x, site)}, CumsumParams{normalised, reverse}, site);
}

}  // namespace kiln
