// Forward-mode (JVP) rules. Most primitives share one of a few generic rules, chosen per
// primitive in register.cc by what the primitive is:
//   linear       f(x + t) - f(x) = f(t): the primitive applied to the tangents (reshape,
//                slice, gather, reduce_sum, the collectives, ...);
//   bilinear     f(a, b): f(ta, b) + f(a, tb) (mul, dot_general, conv_general_dilated);
//   elementwise  a diagonal Jacobian is its own transpose, so the VJP rule applied to the
//                tangent is the JVP (exp, div, pow, max, ...);
//   transposed   the transpose of the VJP rule, which is linear in the cotangent: reverse
//                mode applied to the VJP rule (reduce_max, sort, reduce_window_max, ...),
//                correct for any primitive whose VJP rule is differentiable, at the cost of
//                tracing that rule.
// The control-flow primitives get a loop or branch of the JVPs of their bodies
// (src/transforms/control_flow/jvp_rules.cc).
#pragma once

#include <vector>

#include "prims/registry.h"

namespace kiln::jvp_rules {

std::vector<Array> zero(const JvpArgs& args);
std::vector<Array> linear(const JvpArgs& args);
// Linear in operand 0, piecewise constant in the others (select_and_scatter_add).
std::vector<Array> linear_in_first(const JvpArgs& args);
std::vector<Array> bilinear(const JvpArgs& args);
std::vector<Array> elementwise(const JvpArgs& args);
std::vector<Array> transposed_vjp(const JvpArgs& args);

}  // namespace kiln::jvp_rules

namespace kiln::control_flow {

std::vector<Array> scan_jvp(const JvpArgs& args);
std::vector<Array> cond_jvp(const JvpArgs& args);
std::vector<Array> while_jvp(const JvpArgs& args);

}  // namespace kiln::control_flow
