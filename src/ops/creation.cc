// User-facing creation ops: full/zeros/ones (and their *_like forms) broadcast one scalar;
// iota, arange and linspace count with the iota primitive. Values are computed in f64 and
// converted once, so arange and linspace match numpy's float64 results.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/element_convert.h"
#include "kiln/device.h"
#include "ops/op_util.h"
#include "prims/ids/shape.h"

namespace kiln {
namespace {

void check_sizes(std::string_view op, const Shape& shape, CallSite site) {
  int64_t count = 1;
  for (int64_t dim : shape.dims()) {
    if (dim < 0) {
      fail(site, fmt::format("{}: shape {} has a negative size", op, shape.to_string()),
           "sizes are >= 0 (a size of 0 makes an empty array)");
    }
    // Zero sizes are skipped: row-major strides still multiply the other sizes.
    if (__builtin_mul_overflow(count, std::max<int64_t>(dim, 1), &count)) {
      fail(site, fmt::format("{}: shape {} has more elements than an int64 can count", op,
                             shape.to_string()));
    }
  }
}

void check_numeric(std::string_view op, DType dtype, CallSite site) {
  if (dtype == DType::bool_) {
    fail(site, fmt::format("{}: dtype must be numeric, got bool", op),
         "count in an integer dtype and compare, e.g. arange(n) < k");
  }
}

// A rank-0 array holding `value` in `dtype`, weakly typed if `weak`.
Array make_scalar(double value, DType dtype, bool weak, Device* device, CallSite site) {
  std::byte bytes[8] = {};
  visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S stored = convert_element<S>(value);
    std::memcpy(bytes, &stored, sizeof(S));
  });
  return from_host_bytes(bytes, AbstractValue{Shape{}, dtype, weak}, device, site);
}

Array fill(std::string_view op, const Shape& shape, double value, DType dtype, bool weak,
           Device* device, CallSite site) {
  check_sizes(op, shape, site);
  Array value_array = make_scalar(value, dtype, weak, device, site);
  if (shape.rank() == 0) return value_array;
  return bind1(prim::broadcast_in_dim, {value_array}, BroadcastInDimParams{shape, {}}, site);
}

// iota on `device` (the primitive has no operands, so it runs on the default device).
Array iota_on(DType dtype, Shape shape, int64_t dimension, Device* device, CallSite site) {
  std::optional<DefaultDeviceScope> scope;
  if (device != nullptr) scope.emplace(*device);
  return bind1(prim::iota, {}, IotaParams{dtype, std::move(shape), dimension}, site);
}

// start + i * step for i in [0, count), computed in f64 and converted to `dtype`.
Array affine_count(int64_t count, double start, double step, DType dtype, Device* device,
                   CallSite site) {
  Array values = iota_on(DType::f64, Shape{count}, 0, device, site);
  values = add(mul(values, scalar(step, DType::f64, device, site), site),
               scalar(start, DType::f64, device, site), site);
  return dtype == DType::f64 ? values : astype(values, dtype, site);
}

}  // namespace

Array full(Shape shape, double value, DType dtype, Device* device, CallSite site) {
  return fill("full", shape, value, dtype, false, device, site);
}
Array zeros(Shape shape, DType dtype, Device* device, CallSite site) {
  return fill("zeros", shape, 0, dtype, false, device, site);
}
Array ones(Shape shape, DType dtype, Device* device, CallSite site) {
  return fill("ones", shape, 1, dtype, false, device, site);
}

// Like JAX's zeros_like, the result keeps x's weak type.
Array zeros_like(const Array& x, CallSite site) {
  if (!x.defined()) fail(site, "zeros_like: the Array is empty (default-constructed)");
  return fill("zeros_like", x.shape(), 0, x.dtype(), x.weak_type(), device_of(x), site);
}
Array ones_like(const Array& x, CallSite site) {
  if (!x.defined()) fail(site, "ones_like: the Array is empty (default-constructed)");
  return fill("ones_like", x.shape(), 1, x.dtype(), x.weak_type(), device_of(x), site);
}

Array iota(Shape shape, DType dtype, int64_t dimension, Device* device, CallSite site) {
  check_numeric("iota", dtype, site);
  check_sizes("iota", shape, site);
  if (shape.rank() == 0) {
    fail(site, "iota: shape [] has no axis to count along",
         "give a shape with at least one axis, e.g. {n}");
  }
  int64_t axis = user_axis("iota", dimension, shape.rank(), site);
  return iota_on(dtype, std::move(shape), axis, device, site);
}

Array arange(double start, double stop, double step, DType dtype, Device* device, CallSite site) {
  check_numeric("arange", dtype, site);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) {
    fail(site,
         fmt::format("arange: start {}, stop {} and step {} must be finite", start, stop, step));
  }
  if (step == 0) {
    fail(site, fmt::format("arange: step must not be zero (start {}, stop {})", start, stop),
         "use a positive step to count up, a negative one to count down");
  }
  // numpy: ceil((stop - start) / step) values, none if that is not positive.
  double count = std::ceil((stop - start) / step);
  if (!(count > 0)) count = 0;
  if (count > 0x1p62) {
    fail(site, fmt::format("arange: start {}, stop {}, step {} would give {} values", start, stop,
                           step, count));
  }
  auto n = static_cast<int64_t>(count);
  if (start == 0 && step == 1) return iota_on(dtype, Shape{n}, 0, device, site);
  return affine_count(n, start, step, dtype, device, site);
}

Array arange(int64_t stop, DType dtype, Device* device, CallSite site) {
  check_numeric("arange", dtype, site);
  return iota_on(dtype, Shape{std::max<int64_t>(stop, 0)}, 0, device, site);
}

Array linspace(double start, double stop, int64_t num, DType dtype, Device* device, CallSite site) {
  if (num < 0) {
    fail(site, fmt::format("linspace: num must be >= 0, got {}", num),
         "num is the number of values, including both end points");
  }
  if (num <= 1) return fill("linspace", Shape{num}, start, dtype, false, device, site);
  // numpy: start + i * step, and the last value exactly stop.
  double delta = stop - start;
  auto divisions = static_cast<double>(num - 1);
  double step = delta / divisions;
  Array values;
  if (step == 0) {
    // delta is 0 or step underflowed: scale by delta last, as numpy does.
    Array count = iota_on(DType::f64, Shape{num}, 0, device, site);
    values = add(mul(div(count, scalar(divisions, DType::f64, device, site), site),
                     scalar(delta, DType::f64, device, site), site),
                 scalar(start, DType::f64, device, site), site);
  } else {
    values = affine_count(num, start, step, DType::f64, device, site);
  }
  values = concatenate({slice(values, {0}, {num - 1}, {}, site),
                        fill("linspace", Shape{1}, stop, DType::f64, false, device, site)},
                       0, site);
  return dtype == DType::f64 ? values : astype(values, dtype, site);
}

}  // namespace kiln
