// User-facing bit-level and special-function ops: shifts, bitcast_convert_type, erf and
// erf_inv (the building blocks of kiln::random's samplers).
#include <fmt/format.h>

#include "ops/op_util.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/unary.h"

namespace kiln {

Array shift_left(const Array& x, const Array& amount, CallSite site) {
  return bind_binary(prim::shift_left, "shift_left", x, amount, site);
}
Array shift_right_logical(const Array& x, const Array& amount, CallSite site) {
  return bind_binary(prim::shift_right_logical, "shift_right_logical", x, amount, site);
}
Array shift_right_arithmetic(const Array& x, const Array& amount, CallSite site) {
  return bind_binary(prim::shift_right_arithmetic, "shift_right_arithmetic", x, amount, site);
}

Array bitcast_convert_type(const Array& x, DType dtype, CallSite site) {
  if (x.defined() && x.dtype() == dtype && !x.weak_type()) return x;
  return bind1(prim::bitcast_convert_type, {x}, ConvertParams{dtype}, site);
}

Array erf(const Array& x, CallSite site) {
  return bind1(prim::erf, {x}, NoParams{}, site);
}
Array erf_inv(const Array& x, CallSite site) {
  return bind1(prim::erf_inv, {x}, NoParams{}, site);
}

}  // namespace kiln
