// Which JVP rule each differentiable primitive takes (jvp_rules.h describes the rules).
// The op table checks that every differentiable primitive has one and that each agrees
// with finite differences (tests/prims/op_table_jvp.cc).
#include "prims/ids/all.h"
#include "transforms/jvp_rules/jvp_rules.h"

namespace kiln {

void register_jvp_rules(PrimTable& table) {
  using namespace jvp_rules;
  for (PrimId id : {prim::add,
                    prim::sub,
                    prim::neg,
                    prim::select,
                    prim::convert_element_type,
                    prim::broadcast_in_dim,
                    prim::reshape,
                    prim::transpose,
                    prim::slice,
                    prim::dynamic_slice,
                    prim::dynamic_update_slice,
                    prim::concatenate,
                    prim::pad,
                    prim::gather,
                    prim::scatter,
                    prim::scatter_add,
                    prim::reduce_sum,
                    prim::cumsum,
                    prim::reduce_window_sum,
                    prim::optimization_barrier,
                    prim::checkpoint_name,
                    prim::psum,
                    prim::pmean,
                    prim::all_gather,
                    prim::psum_scatter,
                    prim::all_to_all,
                    prim::ppermute}) {
    table[id].jvp = linear;
  }
  for (PrimId id : {prim::mul, prim::dot_general, prim::conv_general_dilated}) {
    table[id].jvp = bilinear;
  }
  for (PrimId id : {prim::div, prim::rem, prim::pow, prim::max, prim::min, prim::abs, prim::exp,
                    prim::expm1, prim::log, prim::log1p, prim::sqrt, prim::rsqrt, prim::tanh,
                    prim::logistic, prim::sin, prim::cos, prim::erf, prim::erf_inv}) {
    table[id].jvp = elementwise;
  }
  // Piecewise constant, and stop_gradient by definition.
  for (PrimId id : {prim::sign, prim::floor, prim::ceil, prim::round, prim::stop_gradient}) {
    table[id].jvp = zero;
  }
  // The window's maximum does not move under a small change of the operand, so only the
  // source carries a tangent.
  table[prim::select_and_scatter_add].jvp = linear_in_first;
  for (PrimId id : {prim::reduce_max, prim::reduce_min, prim::reduce_prod, prim::sort,
                    prim::reduce_window_max, prim::pmax, prim::shard_map}) {
    table[id].jvp = transposed_vjp;
  }
  table[prim::scan].jvp = control_flow::scan_jvp;
  table[prim::cond].jvp = control_flow::cond_jvp;
  table[prim::while_loop].jvp = control_flow::while_jvp;
  // custom_vjp_call's rule is with the custom functions (src/transforms/custom_vjp.cc).
}

}  // namespace kiln
