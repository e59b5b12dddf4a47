// The generic JVP rules (see jvp_rules.h for which primitive takes which).
#include <memory>

#include <fmt/format.h>

#include "kiln/grad.h"
#include "kiln/ops.h"
#include "prims/bind.h"
#include "transforms/jvp_rules/jvp_rules.h"

namespace kiln::jvp_rules {
namespace {

// The tangent of operand i, or zeros of its type where it has none.
Array tangent_or_zeros(const JvpArgs& args, size_t i) {
  return args.tangents[i].defined() ? args.tangents[i] : zeros_like(args.inputs[i], args.site);
}

Array sum_of(const Array& total, const Array& term, CallSite site) {
  if (!term.defined()) return total;
  return total.defined() ? add(total, term, site) : term;
}

// Results that are not floating point have no tangent.
std::vector<Array> float_results_only(std::vector<Array> tangents, const JvpArgs& args) {
  for (size_t k = 0; k < tangents.size(); ++k) {
    if (!is_floating(args.outputs[k].dtype())) tangents[k] = Array();
  }
  return tangents;
}

}  // namespace

std::vector<Array> zero(const JvpArgs& args) {
  return std::vector<Array>(args.outputs.size());
}

std::vector<Array> linear(const JvpArgs& args) {
  // Floating operands are the linear ones; the others (indices, predicates) are fixed
  // arguments and keep their primal values.
  std::vector<Array> operands;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    operands.push_back(is_floating(args.inputs[i].dtype()) ? tangent_or_zeros(args, i)
                                                           : args.inputs[i]);
  }
  return float_results_only(bind(args.prim, operands, args.params, args.site), args);
}

std::vector<Array> linear_in_first(const JvpArgs& args) {
  if (!args.tangents[0].defined()) return zero(args);
  std::vector<Array> operands(args.inputs.begin(), args.inputs.end());
  operands[0] = args.tangents[0];
  return float_results_only(bind(args.prim, operands, args.params, args.site), args);
}

std::vector<Array> bilinear(const JvpArgs& args) {
  const Array& a = args.inputs[0];
  const Array& b = args.inputs[1];
  Array total;
  if (args.tangents[0].defined()) {
    total = bind1(args.prim, {args.tangents[0], b}, args.params, args.site);
  }
  if (args.tangents[1].defined()) {
    total =
        sum_of(total, bind1(args.prim, {a, args.tangents[1]}, args.params, args.site), args.site);
  }
  return {total};
}

std::vector<Array> elementwise(const JvpArgs& args) {
  // An elementwise primitive's Jacobian with respect to each operand is diagonal once the
  // operands are broadcast to the result's shape, and a diagonal matrix is its own
  // transpose: the VJP rule, given the tangent as the cotangent, returns J t.
  const PrimDef& prim = prim_def(args.prim);
  const Array& result = args.outputs[0];
  const Shape& shape = result.shape();
  std::vector<Array> wide;
  for (const Array& input : args.inputs) {
    wide.push_back(input.shape() == shape ? input : broadcast_to(input, shape, args.site));
  }
  size_t n = args.inputs.size();
  auto wanted = std::make_unique<bool[]>(n);
  Array total;
  for (size_t k = 0; k < n; ++k) {
    if (!args.tangents[k].defined()) continue;
    Array t = args.tangents[k];
    if (t.shape() != shape) t = broadcast_to(t, shape, args.site);
    for (size_t i = 0; i < n; ++i) wanted[i] = i == k;
    std::vector<Array> cotangent{t};
    std::vector<Array> terms = prim.vjp(VjpArgs{wide, args.outputs, cotangent, args.params,
                                                args.site, std::span<const bool>(wanted.get(), n)});
    total = sum_of(total, terms[k], args.site);
  }
  return {total};
}

std::vector<Array> transposed_vjp(const JvpArgs& args) {
  // The VJP rule maps output cotangents g to operand cotangents J^T g, linearly in g.
  // Reverse mode applied to that map, with the operands' tangents as its cotangents,
  // gives (J^T)^T t = J t. The point g at which it is linearised does not matter: zeros.
  const PrimDef& prim = prim_def(args.prim);
  CallSite site = args.site;
  size_t n = args.inputs.size();
  auto wanted = std::make_unique<bool[]>(n);
  std::vector<size_t> with_tangent;
  for (size_t i = 0; i < n; ++i) {
    wanted[i] = args.tangents[i].defined();
    if (wanted[i]) with_tangent.push_back(i);
  }
  std::vector<size_t> float_results;
  std::vector<Array> origin;
  for (size_t k = 0; k < args.outputs.size(); ++k) {
    if (!is_floating(args.outputs[k].dtype())) continue;
    float_results.push_back(k);
    origin.push_back(zeros_like(args.outputs[k], site));
  }
  detail::FlatFunction pull = [&](std::span<const Array> g) {
    std::vector<Array> cotangents(args.outputs.size());
    for (size_t j = 0; j < float_results.size(); ++j) cotangents[float_results[j]] = g[j];
    std::vector<Array> operand_cts =
        prim.vjp(VjpArgs{args.inputs, args.outputs, cotangents, args.params, site,
                         std::span<const bool>(wanted.get(), n)});
    std::vector<Array> result;
    for (size_t i : with_tangent) {
      result.push_back(operand_cts[i].defined() ? operand_cts[i]
                                                : zeros_like(args.inputs[i], site));
    }
    return result;
  };
  detail::FlatVjp transpose =
      detail::vjp_flat(pull, origin, std::vector<bool>(origin.size(), true), site);
  std::vector<Array> tangents;
  for (size_t i : with_tangent) tangents.push_back(args.tangents[i]);
  std::vector<Array> pushed = transpose.pullback(tangents);
  std::vector<Array> result(args.outputs.size());
  for (size_t j = 0; j < float_results.size(); ++j) result[float_results[j]] = pushed[j];
  return result;
}

}  // namespace kiln::jvp_rules
