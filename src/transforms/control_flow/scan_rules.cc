// scan's impl, VJP and batching rules (its shape rule is in src/prims/control_flow_rules.cc).
//
// VJP: the forward scan is run again with a body that also stacks the carry each step
// receives and the results of its costly equations (residuals, as JAX's scan keeps them);
// then a scan in the opposite direction runs the VJP of the body at each step, replaying
// the body from the stacked carry with those results taken from the stack instead of
// recomputed (transforms/saved_values.h), carrying the carry's cotangent and the sum of the
// consts' cotangents, and stacking the cotangents of xs. Both are scans built with binds,
// so a gradient of a gradient differentiates them again. A body wrapped in checkpoint keeps
// only the checkpoint's operands per step, trading the replay's compute for memory.
//
// Batching: the body is vmapped with the batched operands; a carry is batched when its
// initial value or anything the body feeds it is (iterated to a fixed point, as JAX does).
// xs carry their batch on axis 1 (axis 0 is the scanned one), and so do the stacked ys.
#include <fmt/format.h>

#include "kiln/ops.h"
#include "prims/ids/binary.h"
#include "prims/ids/control_flow.h"
#include "prims/ids/convert.h"
#include "prims/ids/custom.h"
#include "prims/ids/index.h"
#include "prims/ids/reduce.h"
#include "prims/ids/select.h"
#include "prims/ids/shape.h"
#include "prims/ids/unary.h"
#include "prims/ids/window.h"
#include "transforms/batch_rules/batch_util.h"
#include "transforms/control_flow/control_flow_rules.h"
#include "transforms/control_flow/sub_programs.h"
#include "transforms/eval.h"
#include "transforms/saved_values.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln::control_flow {
namespace {

struct Layout {
  size_t consts, carry, xs, ys;
};

Layout layout_of(const ScanParams& p, size_t num_operands) {
  auto consts = static_cast<size_t>(p.num_consts);
  auto carry = static_cast<size_t>(p.num_carry);
  return Layout{consts, carry, num_operands - consts - carry,
                p.body.program->outputs.size() - carry};
}

// Element t of `xs` along axis 0.
Array step_slice(const Array& xs, int64_t t, CallSite site) {
  Dims start(static_cast<size_t>(xs.rank()), 0);
  Dims limit = xs.shape().dims();
  start[0] = t;
  limit[0] = t + 1;
  Shape rest = xs.shape();
  rest.dims().erase_at(0);
  return reshape(slice(xs, start, limit, {}, site), rest, site);
}

std::vector<Array> scan_impl(std::span<const Array> inputs, const Params& params, CallSite site) {
  const auto& p = std::get<ScanParams>(params);
  Layout n = layout_of(p, inputs.size());
  const Program& body = *p.body.program;
  std::vector<Array> carry(inputs.begin() + static_cast<std::ptrdiff_t>(n.consts),
                           inputs.begin() + static_cast<std::ptrdiff_t>(n.consts + n.carry));
  std::vector<std::vector<Array>> ys(n.ys, std::vector<Array>(static_cast<size_t>(p.length)));
  std::vector<Array> body_in(inputs.size());
  auto step = [&](int64_t k) {
    int64_t t = p.reverse ? p.length - 1 - k : k;
    for (size_t i = 0; i < n.consts; ++i) body_in[i] = inputs[i];
    for (size_t i = 0; i < n.carry; ++i) body_in[n.consts + i] = carry[i];
    for (size_t i = 0; i < n.xs; ++i) {
      body_in[n.consts + n.carry + i] = step_slice(inputs[n.consts + n.carry + i], t, site);
    }
    std::vector<Array> out = run(p.body, body_in, site);
    for (size_t i = 0; i < n.carry; ++i) carry[i] = std::move(out[i]);
    for (size_t j = 0; j < n.ys; ++j) ys[j][static_cast<size_t>(t)] = std::move(out[n.carry + j]);
  };
  // One loop iteration runs `unroll` steps (how a compiled loop would be unrolled); the
  // steps and their order are the same for every unroll.
  for (int64_t k = 0; k < p.length; k += p.unroll) {
    for (int64_t u = k; u < std::min(p.length, k + p.unroll); ++u) step(u);
  }
  std::vector<Array> results = std::move(carry);
  for (size_t j = 0; j < n.ys; ++j) {
    if (p.length == 0) {
      AbstractValue y = body.aval(body.outputs[n.carry + j]);
      results.push_back(zeros(with_batch(y, 0).shape, y.dtype, nullptr, site));
    } else {
      results.push_back(stack(ys[j], 0, site));
    }
  }
  make_strong(results, site);
  return results;
}

// ----- VJP ------------------------------------------------------------------------------

// Equations whose results each step's backward pass takes from the forward run rather than
// computing them again: those with float results that cost arithmetic (products,
// transcendentals, reductions other than sums, nested control flow). Moves, reshapes,
// broadcasts, sums and selects are recomputed in the replay: they cost a copy at most, and
// keeping a broadcast would stack its full size every step. Weakly typed results are
// recomputed too, so the replay sees the same types as the body. Custom functions
// (checkpoint among them) run again: their residuals often include the scan's constants
// (a checkpointed cell's weights), which would be stacked once per step.
std::vector<bool> residual_equations(const Program& body) {
  std::vector<bool> saved(body.equations.size(), false);
  for (size_t i = 0; i < body.equations.size(); ++i) {
    const Equation& equation = body.equations[i];
    const PrimDef& prim = prim_def(equation.prim);
    if (prim.vjp == nullptr || prim.has_flag(kNotDifferentiable) ||
        prim.has_flag(kAliasesOperand)) {
      continue;
    }
    switch (equation.prim) {
      case prim::neg:
      case prim::add:
      case prim::sub:
      case prim::sign:
      case prim::floor:
      case prim::ceil:
      case prim::round:
      case prim::select:
      case prim::convert_element_type:
      case prim::bitcast_convert_type:
      case prim::broadcast_in_dim:
      case prim::reshape:
      case prim::transpose:
      case prim::slice:
      case prim::dynamic_slice:
      case prim::dynamic_update_slice:
      case prim::concatenate:
      case prim::pad:
      case prim::gather:
      case prim::scatter:
      case prim::scatter_add:
      case prim::reduce_sum:
      case prim::cumsum:
      case prim::reduce_window_sum:
      case prim::stop_gradient:
      case prim::custom_vjp_call:
        continue;
      default:
        break;
    }
    bool has_float = false, weak = false;
    for (VarId out : equation.outputs) {
      has_float = has_float || is_floating(body.aval(out).dtype);
      weak = weak || body.aval(out).weak_type;
    }
    saved[i] = has_float && !weak;
  }
  return saved;
}

std::vector<Array> scan_vjp(const VjpArgs& args) {
  const auto& p = std::get<ScanParams>(args.params);
  CallSite site = args.site;
  Layout n = layout_of(p, args.inputs.size());
  const Program& body = *p.body.program;
  std::span<const Array> consts = args.inputs.subspan(0, n.consts);
  std::span<const Array> init = args.inputs.subspan(n.consts, n.carry);
  std::span<const Array> xs = args.inputs.subspan(n.consts + n.carry);

  // Which values take part: float carries always (cotangents flow through them); consts
  // and xs when wanted; float ys.
  auto is_float = [](const Array& a) { return is_floating(a.dtype()); };
  std::vector<size_t> wanted_consts, float_carry, wanted_xs, float_ys;
  for (size_t i = 0; i < n.consts; ++i) {
    if (args.wanted[i] && is_float(consts[i])) wanted_consts.push_back(i);
  }
  for (size_t k = 0; k < n.carry; ++k) {
    if (is_float(init[k])) float_carry.push_back(k);
  }
  for (size_t i = 0; i < n.xs; ++i) {
    if (args.wanted[n.consts + n.carry + i] && is_float(xs[i])) wanted_xs.push_back(i);
  }
  for (size_t j = 0; j < n.ys; ++j) {
    if (is_floating(body.aval(body.outputs[n.carry + j]).dtype)) float_ys.push_back(j);
  }

  // 1. The forward scan again, also stacking the carry each step receives and the results
  // the backward pass keeps.
  std::vector<int64_t> saved_ids = detail::saved_value_functions(
      p.body.program,
      p.recompute ? std::vector<bool>(body.equations.size(), false) : residual_equations(body));
  std::vector<AbstractValue> saved_types;
  for (size_t i = 0; i < body.equations.size(); ++i) {
    if (saved_ids[i] < 0) continue;
    for (VarId out : body.equations[i].outputs) saved_types.push_back(body.aval(out));
  }
  std::vector<AbstractValue> body_types = input_types(body);
  detail::FlatFunction stacking = [&](std::span<const Array> in) {
    std::vector<Array> env = eval_program_env(body, in, site);
    std::vector<Array> out;
    for (VarId var : body.outputs) out.push_back(env[static_cast<size_t>(var)]);
    for (size_t k = 0; k < n.carry; ++k) out.push_back(in[n.consts + k]);
    for (Array& value : detail::saved_results(body, saved_ids, env)) out.push_back(value);
    return out;
  };
  ClosedProgram forward = trace_closed(stacking, body_types, site);
  std::vector<Array> forward_in = forward.consts;
  forward_in.insert(forward_in.end(), args.inputs.begin(), args.inputs.end());
  ScanParams forward_params = p;
  forward_params.body = forward.program;
  forward_params.num_consts = static_cast<int64_t>(forward.consts.size() + n.consts);
  std::vector<Array> forward_out = bind(prim::scan, forward_in, forward_params, site);
  auto stacked_at = forward_out.begin() + static_cast<std::ptrdiff_t>(body.outputs.size());
  std::vector<Array> carries(stacked_at, stacked_at + static_cast<std::ptrdiff_t>(n.carry));
  std::vector<Array> saved(stacked_at + static_cast<std::ptrdiff_t>(n.carry), forward_out.end());

  // 2. The backward scan. Its operands: consts; carry = (consts' cotangent sums, float
  // carries' cotangents); xs = (stacked carries, xs, stacked saved results, float ys'
  // cotangents).
  std::vector<AbstractValue> bwd_types;
  for (const Array& c : consts) bwd_types.push_back(c.aval());
  for (size_t i : wanted_consts) bwd_types.push_back(strong_type(consts[i].aval()));
  for (size_t k : float_carry) bwd_types.push_back(strong_type(init[k].aval()));
  for (size_t k = 0; k < n.carry; ++k) bwd_types.push_back(body_types[n.consts + k]);
  for (size_t i = 0; i < n.xs; ++i) bwd_types.push_back(body_types[n.consts + n.carry + i]);
  for (const AbstractValue& type : saved_types) bwd_types.push_back(strong_type(type));
  for (size_t j : float_ys) bwd_types.push_back(strong_type(body.aval(body.outputs[n.carry + j])));

  std::vector<bool> differentiable(body.inputs.size(), false);
  for (size_t i : wanted_consts) differentiable[i] = true;
  for (size_t k : float_carry) differentiable[n.consts + k] = true;
  for (size_t i : wanted_xs) differentiable[n.consts + n.carry + i] = true;

  detail::FlatFunction backward_step = [&](std::span<const Array> in) {
    size_t at = 0;
    auto take = [&](size_t count) {
      std::span<const Array> part = in.subspan(at, count);
      at += count;
      return part;
    };
    std::span<const Array> c_consts = take(n.consts);
    std::span<const Array> sums = take(wanted_consts.size());
    std::span<const Array> carry_cts = take(float_carry.size());
    std::span<const Array> carry = take(n.carry);
    std::span<const Array> x = take(n.xs);
    std::span<const Array> kept = take(saved_types.size());
    std::span<const Array> y_cts = take(float_ys.size());
    std::vector<Array> primal(c_consts.begin(), c_consts.end());
    primal.insert(primal.end(), carry.begin(), carry.end());
    primal.insert(primal.end(), x.begin(), x.end());
    detail::FlatFunction step = [&](std::span<const Array> values) {
      return detail::replay_with_saved(body, saved_ids, values, kept);
    };
    detail::FlatVjp vjp = detail::vjp_flat(step, primal, differentiable, site);
    std::vector<Array> out_cts(body.outputs.size());
    for (size_t q = 0; q < float_carry.size(); ++q) out_cts[float_carry[q]] = carry_cts[q];
    for (size_t q = 0; q < float_ys.size(); ++q) out_cts[n.carry + float_ys[q]] = y_cts[q];
    std::vector<Array> in_cts = vjp.pullback(out_cts);
    std::vector<Array> out;
    for (size_t q = 0; q < wanted_consts.size(); ++q) {
      out.push_back(strong(add(sums[q], in_cts[wanted_consts[q]], site), site));
    }
    for (size_t k : float_carry) out.push_back(strong(in_cts[n.consts + k], site));
    for (size_t i : wanted_xs) out.push_back(strong(in_cts[n.consts + n.carry + i], site));
    return out;
  };
  ClosedProgram backward = trace_closed(backward_step, bwd_types, site);

  std::vector<Array> backward_in = backward.consts;
  backward_in.insert(backward_in.end(), consts.begin(), consts.end());
  for (size_t i : wanted_consts) backward_in.push_back(strong(zeros_like(consts[i], site), site));
  for (size_t k : float_carry) {
    backward_in.push_back(strong(vjp_util::cotangent_or_zeros(args, k), site));
  }
  backward_in.insert(backward_in.end(), carries.begin(), carries.end());
  backward_in.insert(backward_in.end(), xs.begin(), xs.end());
  backward_in.insert(backward_in.end(), saved.begin(), saved.end());
  for (size_t j : float_ys) {
    backward_in.push_back(strong(vjp_util::cotangent_or_zeros(args, n.carry + j), site));
  }
  ScanParams backward_params = p;
  backward_params.body = backward.program;
  backward_params.num_consts = static_cast<int64_t>(backward.consts.size() + n.consts);
  backward_params.num_carry = static_cast<int64_t>(wanted_consts.size() + float_carry.size());
  backward_params.reverse = !p.reverse;
  std::vector<Array> backward_out = bind(prim::scan, backward_in, backward_params, site);

  std::vector<Array> cts = vjp_util::none(args);
  size_t at = 0;
  for (size_t i : wanted_consts) cts[i] = backward_out[at++];
  for (size_t k : float_carry) {
    Array& ct = backward_out[at++];
    if (args.wanted[n.consts + k]) cts[n.consts + k] = ct;
  }
  for (size_t i : wanted_xs) cts[n.consts + n.carry + i] = backward_out[at++];
  return cts;
}

// ----- batching -------------------------------------------------------------------------

BatchResult scan_batch(const BatchArgs& args) {
  const auto& p = std::get<ScanParams>(args.params);
  CallSite site = args.site;
  Layout n = layout_of(p, args.inputs.size());
  const Program& body = *p.body.program;
  std::vector<bool> in_batched;
  for (int64_t dim : args.dims) in_batched.push_back(dim != kNotBatched);
  // A carry is batched when its initial value is or the body makes it so; repeat until
  // nothing changes (at most num_carry rounds).
  std::vector<bool> out_batched;
  for (;;) {
    out_batched = batched_outputs(body, in_batched);
    bool changed = false;
    for (size_t k = 0; k < n.carry; ++k) {
      if (out_batched[k] && !in_batched[n.consts + k]) {
        in_batched[n.consts + k] = true;
        changed = true;
      }
    }
    if (!changed) break;
  }
  for (size_t k = 0; k < n.carry; ++k) out_batched[k] = in_batched[n.consts + k];
  ClosedProgram batched = batch_program(body, in_batched, out_batched, args.size, site);

  std::vector<Array> operands = batched.consts;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const Array& value = args.inputs[i];
    int64_t dim = args.dims[i];
    bool is_xs = i >= n.consts + n.carry;
    if (!in_batched[i]) {
      operands.push_back(value);
    } else if (is_xs) {
      operands.push_back(batch_util::batch_at(value, dim, 1, args.size, site));
    } else {
      operands.push_back(batch_util::batch_at(value, dim, 0, args.size, site));
    }
  }
  ScanParams params = p;
  params.body = batched.program;
  params.num_consts = static_cast<int64_t>(batched.consts.size() + n.consts);
  BatchResult result;
  result.outputs = bind(prim::scan, operands, params, site);
  for (size_t k = 0; k < result.outputs.size(); ++k) {
    bool is_y = k >= n.carry;
    result.dims.push_back(!out_batched[k] ? kNotBatched : (is_y ? 1 : 0));
  }
  return result;
}

}  // namespace

void register_scan_rules(PrimTable& table) {
  PrimDef& def = table[prim::scan];
  def.impl = scan_impl;
  def.vjp = scan_vjp;
  def.batch = scan_batch;
}

}  // namespace kiln::control_flow
