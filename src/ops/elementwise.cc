// User-facing elementwise ops, operators, where/clip/astype and weakly typed scalars.
#include <cmath>

#include <fmt/format.h>

#include "core/element_convert.h"
#include "kiln/promotion.h"
#include "ops/op_util.h"
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/unary.h"

namespace kiln {
namespace {

Array unary(PrimId id, const Array& x, CallSite site) {
  return bind1(id, {x}, NoParams{}, site);
}

// The value stored with `dtype`'s representation.
std::vector<std::byte> encode_scalar(double value, DType dtype) {
  std::vector<std::byte> bytes(static_cast<size_t>(dtype_size(dtype)));
  visit_dtype(dtype, [&](auto tag) {
    using S = storage_t<decltype(tag)::value>;
    S stored = convert_element<S>(value);
    std::memcpy(bytes.data(), &stored, sizeof(S));
  });
  return bytes;
}

}  // namespace

Array scalar(double value, DType dtype, Device* device, CallSite site) {
  std::vector<std::byte> bytes = encode_scalar(value, dtype);
  return from_host_bytes(bytes.data(), AbstractValue{Shape{}, dtype}, device, site);
}

Array detail::weak_scalar_like(double value, bool is_float, const Array& like, CallSite site) {
  // Create the literal directly in the dtype it will promote to, so `x_f64 * 0.1` uses the
  // double 0.1 rather than a float rounding of it.
  PromotedType literal{is_float ? DType::f32 : DType::i32, true};
  PromotedType common = promote({like.dtype(), like.weak_type()}, literal);
  if (!is_float && std::trunc(value) != value) common = {DType::f32, true};
  std::vector<std::byte> bytes = encode_scalar(value, common.dtype);
  return from_host_bytes(bytes.data(), AbstractValue{Shape{}, common.dtype, common.weak},
                         device_of(like), site);
}

Array neg(const Array& x, CallSite site) {
  return unary(prim::neg, x, site);
}
Array abs(const Array& x, CallSite site) {
  return unary(prim::abs, x, site);
}
Array sign(const Array& x, CallSite site) {
  return unary(prim::sign, x, site);
}
Array exp(const Array& x, CallSite site) {
  return unary(prim::exp, x, site);
}
Array expm1(const Array& x, CallSite site) {
  return unary(prim::expm1, x, site);
}
Array log(const Array& x, CallSite site) {
  return unary(prim::log, x, site);
}
Array log1p(const Array& x, CallSite site) {
  return unary(prim::log1p, x, site);
}
Array sqrt(const Array& x, CallSite site) {
  return unary(prim::sqrt, x, site);
}
Array rsqrt(const Array& x, CallSite site) {
  return unary(prim::rsqrt, x, site);
}
Array tanh(const Array& x, CallSite site) {
  return unary(prim::tanh, x, site);
}
Array logistic(const Array& x, CallSite site) {
  return unary(prim::logistic, x, site);
}
Array sin(const Array& x, CallSite site) {
  return unary(prim::sin, x, site);
}
Array cos(const Array& x, CallSite site) {
  return unary(prim::cos, x, site);
}
Array floor(const Array& x, CallSite site) {
  return unary(prim::floor, x, site);
}
Array ceil(const Array& x, CallSite site) {
  return unary(prim::ceil, x, site);
}
Array round(const Array& x, CallSite site) {
  return unary(prim::round, x, site);
}
Array is_finite(const Array& x, CallSite site) {
  return unary(prim::is_finite, x, site);
}
Array logical_not(const Array& x, CallSite site) {
  return unary(prim::not_, x, site);
}

Array add(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::add, "add", a, b, site);
}
Array sub(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::sub, "sub", a, b, site);
}
Array mul(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::mul, "mul", a, b, site);
}
Array div(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::div, "div", a, b, site);
}
Array rem(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::rem, "rem", a, b, site);
}
Array pow(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::pow, "pow", a, b, site);
}
Array maximum(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::max, "maximum", a, b, site);
}
Array minimum(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::min, "minimum", a, b, site);
}
Array bitwise_and(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::and_, "bitwise_and", a, b, site);
}
Array bitwise_or(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::or_, "bitwise_or", a, b, site);
}
Array bitwise_xor(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::xor_, "bitwise_xor", a, b, site);
}
Array equal(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::eq, "equal", a, b, site);
}
Array not_equal(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::ne, "not_equal", a, b, site);
}
Array less(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::lt, "less", a, b, site);
}
Array less_equal(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::le, "less_equal", a, b, site);
}
Array greater(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::gt, "greater", a, b, site);
}
Array greater_equal(const Array& a, const Array& b, CallSite site) {
  return bind_binary(prim::ge, "greater_equal", a, b, site);
}

Array where(const Array& pred, const Array& on_true, const Array& on_false, CallSite site) {
  if (pred.defined() && pred.dtype() != DType::bool_) {
    fail(site, fmt::format("where: the condition must be bool, got {}", pred.aval().to_string()),
         "compare to get a condition, e.g. where(x > 0, a, b)");
  }
  Shape branches = broadcast_shapes("where", on_true.aval(), on_false.aval(), site);
  Shape out = broadcast_shapes("where", pred.aval(), AbstractValue{branches, DType::f32}, site);
  auto [t, f] = promote_operands(on_true, on_false, site);
  int64_t rank = out.rank();
  return bind1(prim::select,
               {lift_rank(pred, rank, site), lift_rank(t, rank, site), lift_rank(f, rank, site)},
               NoParams{}, site);
}

Array clip(const Array& x, double low, double high, CallSite site) {
  if (low > high) {
    fail(site, fmt::format("clip: low ({}) is greater than high ({})", low, high));
  }
  bool is_float = is_floating(x.dtype());
  return minimum(maximum(x, detail::weak_scalar_like(low, is_float, x, site), site),
                 detail::weak_scalar_like(high, is_float, x, site), site);
}

Array astype(const Array& x, DType dtype, CallSite site) {
  if (x.defined() && x.dtype() == dtype && !x.weak_type()) return x;
  return bind1(prim::convert_element_type, {x}, ConvertParams{dtype}, site);
}

namespace {

// The number as a weakly typed scalar beside `like`, or an error naming the operator.
Array weak_operand(const WeakScalar& number, const Array& like, std::string_view op,
                   CallSite site) {
  if (!number.exact) {
    fail(site,
         fmt::format("operator{}: the integer beside the array is {:.0f} after rounding: a "
                     "double holds integers exactly only up to 2^53",
                     op, number.value),
         "pass the integer as an array (from_host<int64_t>({n}, {})) to use its exact value");
  }
  return detail::weak_scalar_like(number.value, number.is_float, like, site);
}

}  // namespace

#define KILN_DEFINE_BINARY_OPERATOR(op, function)                            \
  Array operator op(Operand a, const Array& b) {                             \
    return function(a.array, b, a.site);                                     \
  }                                                                          \
  Array operator op(Operand a, WeakScalar b) {                               \
    return function(a.array, weak_operand(b, a.array, #op, a.site), a.site); \
  }                                                                          \
  Array operator op(WeakScalar a, Operand b) {                               \
    return function(weak_operand(a, b.array, #op, b.site), b.array, b.site); \
  }
KILN_DEFINE_BINARY_OPERATOR(+, add)
KILN_DEFINE_BINARY_OPERATOR(-, sub)
KILN_DEFINE_BINARY_OPERATOR(*, mul)
KILN_DEFINE_BINARY_OPERATOR(/, div)
KILN_DEFINE_BINARY_OPERATOR(%, rem)
KILN_DEFINE_BINARY_OPERATOR(&, bitwise_and)
KILN_DEFINE_BINARY_OPERATOR(|, bitwise_or)
KILN_DEFINE_BINARY_OPERATOR(^, bitwise_xor)
KILN_DEFINE_BINARY_OPERATOR(==, equal)
KILN_DEFINE_BINARY_OPERATOR(!=, not_equal)
KILN_DEFINE_BINARY_OPERATOR(<, less)
KILN_DEFINE_BINARY_OPERATOR(<=, less_equal)
KILN_DEFINE_BINARY_OPERATOR(>, greater)
KILN_DEFINE_BINARY_OPERATOR(>=, greater_equal)
#undef KILN_DEFINE_BINARY_OPERATOR

Array operator-(Operand x) {
  return neg(x.array, x.site);
}
Array operator!(Operand x) {
  return logical_not(x.array, x.site);
}
Array operator~(Operand x) {
  return logical_not(x.array, x.site);
}

}  // namespace kiln
