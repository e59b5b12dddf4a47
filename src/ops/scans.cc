// lax.cumprod, cummax and cummin as log-depth scans of the binary op (Hillis and Steele):
// at step s every element from the 2^s-th on combines with the one 2^s before it. log2(n)
// elementwise steps instead of a primitive of their own: grad, vmap and jit go through the ops, and
// the gradient is the same as JAX's associative scan (both differentiate the same binary ops).
#include <string_view>

#include "kiln/array_functions.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

enum class ScanOp { kProd, kMax, kMin };

Array combine(ScanOp op, const Array& a, const Array& b, CallSite site) {
  switch (op) {
    case ScanOp::kProd:
      return mul(a, b, site);
    case ScanOp::kMax:
      return maximum(a, b, site);
    case ScanOp::kMin:
      return minimum(a, b, site);
  }
  return a;
}

Array scan(ScanOp op, std::string_view name, const Array& input, int64_t axis, bool reverse,
           CallSite site) {
  require_defined(name, input, site);
  int64_t a = user_axis(name, axis, input.rank(), site);
  // Bool products count in i32 (as cumsum and numpy do).
  Array x = op == ScanOp::kProd && input.dtype() == DType::bool_ ? astype(input, DType::i32, site)
                                                                 : input;
  if (reverse) x = flip(x, {a}, site);
  int64_t n = x.shape()[a];
  for (int64_t shift = 1; shift < n; shift *= 2) {
    // The first `shift` elements are final; each later one takes in the one `shift` before.
    Array later =
        combine(op, slice_axis(x, a, shift, n, site), slice_axis(x, a, 0, n - shift, site), site);
    x = concatenate({slice_axis(x, a, 0, shift, site), later}, a, site);
  }
  return reverse ? flip(x, {a}, site) : x;
}

}  // namespace

Array cumprod(const Array& x, int64_t axis, bool reverse, CallSite site) {
  return scan(ScanOp::kProd, "cumprod", x, axis, reverse, site);
}

Array cummax(const Array& x, int64_t axis, bool reverse, CallSite site) {
  return scan(ScanOp::kMax, "cummax", x, axis, reverse, site);
}

Array cummin(const Array& x, int64_t axis, bool reverse, CallSite site) {
  return scan(ScanOp::kMin, "cummin", x, axis, reverse, site);
}

}  // namespace kiln
