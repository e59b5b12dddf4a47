// VJP rules of the elementwise primitives. Binary operands may be broadcast (size-1
// axes), so their cotangents are summed back to the operand's shape. Piecewise-constant
// ops (sign, floor, ceil, round) have a zero derivative: their rules return no cotangent.
#include "prims/ids/binary.h"
#include "prims/ids/convert.h"
#include "prims/ids/select.h"
#include "prims/ids/shape.h"
#include "prims/ids/unary.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

using vjp_util::unbroadcast;

// For unary ops: d = the derivative at x (and y); the cotangent is g * d.
template <typename Derivative>
std::vector<Array> unary_rule(const VjpArgs& args, Derivative derivative) {
  const Array& x = args.inputs[0];
  const Array& y = args.outputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  return {derivative(g, x, y, args.site)};
}

std::vector<Array> zero_rule(const VjpArgs& args) {
  return vjp_util::none(args);
}

#define KILN_UNARY_VJP(name, expression)                                                           \
  std::vector<Array> name(const VjpArgs& args) {                                                   \
    return unary_rule(args,                                                                        \
                      [](const Array& g, const Array& x, const Array& y, CallSite site) -> Array { \
                        (void)x;                                                                   \
                        (void)y;                                                                   \
                        (void)site;                                                                \
                        return expression;                                                         \
                      });                                                                          \
  }

KILN_UNARY_VJP(neg_vjp, neg(g, site))
// As JAX: the slope is +1 at x >= 0 (so at 0 and -0 too), -1 elsewhere (NaN included), not
// sign(x), which would make the gradient of abs at 0 zero.
KILN_UNARY_VJP(abs_vjp, where(greater_equal(x, zeros_like(x, site), site), g, neg(g, site), site))
KILN_UNARY_VJP(exp_vjp, mul(g, y, site))
KILN_UNARY_VJP(expm1_vjp, mul(g, add(y, detail::weak_scalar_like(1, true, y, site), site), site))
KILN_UNARY_VJP(log_vjp, div(g, x, site))
KILN_UNARY_VJP(log1p_vjp, div(g, add(x, detail::weak_scalar_like(1, true, x, site), site), site))
KILN_UNARY_VJP(sqrt_vjp, div(mul(g, detail::weak_scalar_like(0.5, true, g, site), site), y, site))
// d/dx x^(-1/2) = -1/2 x^(-3/2) = -0.5 * y / x
KILN_UNARY_VJP(rsqrt_vjp,
               mul(g, div(mul(y, detail::weak_scalar_like(-0.5, true, y, site), site), x, site),
                   site))
KILN_UNARY_VJP(tanh_vjp,
               mul(g, sub(detail::weak_scalar_like(1, true, y, site), mul(y, y, site), site), site))
KILN_UNARY_VJP(logistic_vjp,
               mul(g, mul(y, sub(detail::weak_scalar_like(1, true, y, site), y, site), site), site))
KILN_UNARY_VJP(sin_vjp, mul(g, cos(x, site), site))
KILN_UNARY_VJP(cos_vjp, neg(mul(g, sin(x, site), site), site))
#undef KILN_UNARY_VJP

// For binary ops: the cotangents of both operands before unbroadcasting.
template <typename Rule>
std::vector<Array> binary_rule(const VjpArgs& args, Rule rule) {
  const Array& a = args.inputs[0];
  const Array& b = args.inputs[1];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  auto [ga, gb] = rule(g, a, b, args.outputs[0], args.site);
  std::vector<Array> cts(2);
  if (args.wanted[0] && ga.defined()) cts[0] = unbroadcast(ga, a.shape(), args.site);
  if (args.wanted[1] && gb.defined()) cts[1] = unbroadcast(gb, b.shape(), args.site);
  return cts;
}

std::vector<Array> add_vjp(const VjpArgs& args) {
  return binary_rule(args, [](const Array& g, const Array&, const Array&, const Array&, CallSite) {
    return std::pair{g, g};
  });
}

std::vector<Array> sub_vjp(const VjpArgs& args) {
  return binary_rule(args,
                     [&](const Array& g, const Array&, const Array&, const Array&, CallSite site) {
                       return std::pair{g, args.wanted[1] ? neg(g, site) : Array()};
                     });
}

std::vector<Array> mul_vjp(const VjpArgs& args) {
  return binary_rule(
      args, [&](const Array& g, const Array& a, const Array& b, const Array&, CallSite site) {
        return std::pair{args.wanted[0] ? mul(g, b, site) : Array(),
                         args.wanted[1] ? mul(g, a, site) : Array()};
      });
}

std::vector<Array> div_vjp(const VjpArgs& args) {
  // d(a/b)/da = 1/b;  d(a/b)/db = -a/b^2 = -y/b
  return binary_rule(
      args, [&](const Array& g, const Array&, const Array& b, const Array& y, CallSite site) {
        return std::pair{args.wanted[0] ? div(g, b, site) : Array(),
                         args.wanted[1] ? neg(div(mul(g, y, site), b, site), site) : Array()};
      });
}

std::vector<Array> rem_vjp(const VjpArgs& args) {
  // rem(a, b) = a - b * trunc(a / b): d/da = 1, d/db = -trunc(a / b).
  return binary_rule(
      args, [&](const Array& g, const Array& a, const Array& b, const Array&, CallSite site) {
        Array gb;
        if (args.wanted[1]) {
          Array q = div(a, b, site);
          Array truncated = where(greater_equal(q, zeros_like(q, site), site), floor(q, site),
                                  ceil(q, site), site);
          gb = neg(mul(g, truncated, site), site);
        }
        return std::pair{g, gb};
      });
}

std::vector<Array> pow_vjp(const VjpArgs& args) {
  // d(a^b)/da = b * a^(b-1);  d(a^b)/db = a^b * log(a), taken as 0 where a == 0.
  return binary_rule(
      args, [&](const Array& g, const Array& a, const Array& b, const Array& y, CallSite site) {
        Array ga, gb;
        if (args.wanted[0]) {
          Array b_minus_one = sub(b, detail::weak_scalar_like(1, true, b, site), site);
          ga = mul(g, mul(b, pow(a, b_minus_one, site), site), site);
        }
        if (args.wanted[1]) {
          Array zero = zeros_like(a, site);
          Array safe_a = where(equal(a, zero, site), ones_like(a, site), a, site);
          gb = mul(g, mul(y, log(safe_a, site), site), site);
        }
        return std::pair{ga, gb};
      });
}

// max/min: the cotangent goes to the selected operand; ties split it evenly (as in JAX).
template <bool kMax>
std::vector<Array> extremum_vjp(const VjpArgs& args) {
  return binary_rule(
      args, [&](const Array& g, const Array& a, const Array& b, const Array&, CallSite site) {
        Array a_wins = kMax ? greater(a, b, site) : less(a, b, site);
        Array tie = equal(a, b, site);
        Array one = ones_like(g, site),
              half = mul(one, detail::weak_scalar_like(0.5, true, g, site), site);
        Array zero = zeros_like(g, site);
        Array share_a = where(a_wins, one, where(tie, half, zero, site), site);
        Array share_b = sub(one, share_a, site);
        return std::pair{args.wanted[0] ? mul(g, share_a, site) : Array(),
                         args.wanted[1] ? mul(g, share_b, site) : Array()};
      });
}

std::vector<Array> select_vjp(const VjpArgs& args) {
  const Array& pred = args.inputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  Array zero = zeros_like(g, args.site);
  std::vector<Array> cts(3);
  if (args.wanted[1]) {
    cts[1] = unbroadcast(where(pred, g, zero, args.site), args.inputs[1].shape(), args.site);
  }
  if (args.wanted[2]) {
    cts[2] = unbroadcast(where(pred, zero, g, args.site), args.inputs[2].shape(), args.site);
  }
  return cts;
}

std::vector<Array> convert_vjp(const VjpArgs& args) {
  const Array& x = args.inputs[0];
  std::vector<Array> cts(1);
  if (is_floating(x.dtype()) && is_floating(args.outputs[0].dtype())) {
    cts[0] = astype(vjp_util::cotangent_or_zeros(args, 0), x.dtype(), args.site);
  }
  return cts;
}

}  // namespace

void register_vjp_elementwise(PrimTable& table) {
  table[prim::neg].vjp = neg_vjp;
  table[prim::abs].vjp = abs_vjp;
  table[prim::sign].vjp = zero_rule;
  table[prim::exp].vjp = exp_vjp;
  table[prim::expm1].vjp = expm1_vjp;
  table[prim::log].vjp = log_vjp;
  table[prim::log1p].vjp = log1p_vjp;
  table[prim::sqrt].vjp = sqrt_vjp;
  table[prim::rsqrt].vjp = rsqrt_vjp;
  table[prim::tanh].vjp = tanh_vjp;
  table[prim::logistic].vjp = logistic_vjp;
  table[prim::sin].vjp = sin_vjp;
  table[prim::cos].vjp = cos_vjp;
  table[prim::floor].vjp = zero_rule;
  table[prim::ceil].vjp = zero_rule;
  table[prim::round].vjp = zero_rule;
  table[prim::add].vjp = add_vjp;
  table[prim::sub].vjp = sub_vjp;
  table[prim::mul].vjp = mul_vjp;
  table[prim::div].vjp = div_vjp;
  table[prim::rem].vjp = rem_vjp;
  table[prim::pow].vjp = pow_vjp;
  table[prim::max].vjp = extremum_vjp<true>;
  table[prim::min].vjp = extremum_vjp<false>;
  table[prim::select].vjp = select_vjp;
  table[prim::convert_element_type].vjp = convert_vjp;
  table[prim::stop_gradient].vjp = zero_rule;
}

}  // namespace kiln
