// VJP rules of the special functions erf and erf_inv (used by kiln::random's samplers):
//   d/dx erf(x)     = 2/sqrt(pi) * exp(-x^2)
//   d/dx erf_inv(x) = sqrt(pi)/2 * exp(erf_inv(x)^2)   (from the result y, as JAX does)
#include <cmath>
#include <numbers>

#include "prims/ids/unary.h"
#include "transforms/vjp_rules/vjp_rules.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln {
namespace {

std::vector<Array> erf_vjp(const VjpArgs& args) {
  const Array& x = args.inputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  double scale = 2 / std::sqrt(std::numbers::pi);
  Array slope = mul(detail::weak_scalar_like(scale, true, x, args.site),
                    exp(neg(mul(x, x, args.site), args.site), args.site), args.site);
  return {mul(g, slope, args.site)};
}

std::vector<Array> erf_inv_vjp(const VjpArgs& args) {
  const Array& y = args.outputs[0];
  Array g = vjp_util::cotangent_or_zeros(args, 0);
  double scale = std::sqrt(std::numbers::pi) / 2;
  Array slope = mul(detail::weak_scalar_like(scale, true, y, args.site),
                    exp(mul(y, y, args.site), args.site), args.site);
  return {mul(g, slope, args.site)};
}

}  // namespace

void register_vjp_special(PrimTable& table) {
  table[prim::erf].vjp = erf_vjp;
  table[prim::erf_inv].vjp = erf_inv_vjp;
}

}  // namespace kiln
