// while_loop's impl, VJP and batching rules (its shape rule is in
// src/prims/control_flow_rules.cc).
//
// Reverse-mode differentiation is rejected, as in JAX: the number of iterations is known
// only at run time, so there is nothing static to reverse (fori_loop with static bounds is
// a scan, which is differentiable).
// Batching: with an unbatched predicate, a while_loop of the batched cond and body. With a
// batched predicate every carry is batched and the loop runs while any example continues;
// examples whose predicate is false keep their carry (a per-example select), as JAX does.
#include <fmt/format.h>

#include "kiln/ops.h"
#include "prims/ids/control_flow.h"
#include "transforms/batch_rules/batch_util.h"
#include "transforms/control_flow/control_flow_rules.h"
#include "transforms/control_flow/sub_programs.h"

namespace kiln::control_flow {
namespace {

std::vector<Array> while_impl(std::span<const Array> inputs, const Params& params, CallSite site) {
  const auto& p = std::get<WhileParams>(params);
  auto cond_consts = static_cast<size_t>(p.cond_num_consts);
  auto body_consts = static_cast<size_t>(p.body_num_consts);
  std::vector<Array> cond_in(inputs.begin(),
                             inputs.begin() + static_cast<std::ptrdiff_t>(cond_consts));
  std::vector<Array> body_in(
      inputs.begin() + static_cast<std::ptrdiff_t>(cond_consts),
      inputs.begin() + static_cast<std::ptrdiff_t>(cond_consts + body_consts));
  std::vector<Array> carry(inputs.begin() + static_cast<std::ptrdiff_t>(cond_consts + body_consts),
                           inputs.end());
  for (;;) {
    cond_in.resize(cond_consts);
    cond_in.insert(cond_in.end(), carry.begin(), carry.end());
    if (!run(p.cond, cond_in, site)[0].item<bool>(site)) break;
    body_in.resize(body_consts);
    body_in.insert(body_in.end(), carry.begin(), carry.end());
    carry = run(p.body, body_in, site);
  }
  make_strong(carry, site);
  return carry;
}

std::vector<Array> while_vjp(const VjpArgs& args) {
  fail(args.site,
       "reverse-mode differentiation of while_loop is not supported: use scan or fori_loop with "
       "static bounds",
       "the number of iterations of a while_loop is known only when it runs; kiln::fori_loop "
       "with integer bounds (or kiln::scan) is differentiable, or apply stop_gradient to the "
       "loop's inputs if no gradient should flow through it");
}

// Whether any example's predicate holds.
Array any_example(const Array& pred, CallSite site) {
  return greater(max(astype(pred, DType::i32, site), {0}, false, site),
                 scalar(0, DType::i32, nullptr, site), site);
}

BatchResult while_batch(const BatchArgs& args) {
  const auto& p = std::get<WhileParams>(args.params);
  CallSite site = args.site;
  int64_t size = args.size;
  const Program& cond = *p.cond.program;
  const Program& body = *p.body.program;
  auto num_cc = static_cast<size_t>(p.cond_num_consts);
  auto num_bc = static_cast<size_t>(p.body_num_consts);
  size_t num_carry = args.inputs.size() - num_cc - num_bc;
  std::vector<bool> batched;
  for (int64_t dim : args.dims) batched.push_back(dim != kNotBatched);
  std::vector<bool> cc_b(batched.begin(), batched.begin() + static_cast<std::ptrdiff_t>(num_cc));
  std::vector<bool> bc_b(batched.begin() + static_cast<std::ptrdiff_t>(num_cc),
                         batched.begin() + static_cast<std::ptrdiff_t>(num_cc + num_bc));
  std::vector<bool> carry_b(batched.begin() + static_cast<std::ptrdiff_t>(num_cc + num_bc),
                            batched.end());
  auto concat = [](std::vector<bool> a, const std::vector<bool>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<bool> out = batched_outputs(body, concat(bc_b, carry_b));
    for (size_t k = 0; k < num_carry; ++k) {
      if (out[k] && !carry_b[k]) carry_b[k] = changed = true;
    }
  }
  bool pred_batched = batched_outputs(cond, concat(cc_b, carry_b))[0];
  // Examples stop at different iterations, so every carry differs between examples.
  if (pred_batched) carry_b.assign(num_carry, true);

  std::vector<Array> cc, bc, carry;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    Array value = batched[i] || (i >= num_cc + num_bc && carry_b[i - num_cc - num_bc])
                      ? batch_util::batch_at(args.inputs[i], args.dims[i], 0, size, site)
                      : args.inputs[i];
    (i < num_cc ? cc : i < num_cc + num_bc ? bc : carry).push_back(std::move(value));
  }
  std::vector<AbstractValue> carry_types = types_of(carry);
  WhileParams params = p;
  std::vector<Array> operands;
  if (!pred_batched) {
    ClosedProgram new_cond = batch_program(cond, concat(cc_b, carry_b), {false}, size, site);
    ClosedProgram new_body = batch_program(body, concat(bc_b, carry_b), carry_b, size, site);
    params.cond = new_cond.program;
    params.body = new_body.program;
    params.cond_num_consts = static_cast<int64_t>(new_cond.consts.size() + num_cc);
    params.body_num_consts = static_cast<int64_t>(new_body.consts.size() + num_bc);
    operands = new_cond.consts;
    operands.insert(operands.end(), cc.begin(), cc.end());
    operands.insert(operands.end(), new_body.consts.begin(), new_body.consts.end());
    operands.insert(operands.end(), bc.begin(), bc.end());
  } else {
    std::vector<bool> cond_in_b = concat(cc_b, carry_b);
    std::vector<bool> body_in_b = concat(bc_b, carry_b);
    auto cond_types = types_of(cc);
    cond_types.insert(cond_types.end(), carry_types.begin(), carry_types.end());
    detail::FlatFunction any_continues = [&](std::span<const Array> in) {
      Array pred = run_batched(cond, in, cond_in_b, {true}, size, site)[0];
      return std::vector<Array>{any_example(pred, site)};
    };
    ClosedProgram new_cond = trace_closed(any_continues, cond_types, site);
    // The body sees cond's consts too, to know which examples continue.
    auto body_types = types_of(cc);
    for (const Array& value : bc) body_types.push_back(value.aval());
    body_types.insert(body_types.end(), carry_types.begin(), carry_types.end());
    detail::FlatFunction step = [&](std::span<const Array> in) {
      std::span<const Array> c_consts = in.subspan(0, num_cc);
      std::span<const Array> b_consts = in.subspan(num_cc, num_bc);
      std::span<const Array> c = in.subspan(num_cc + num_bc);
      std::vector<Array> cond_values(c_consts.begin(), c_consts.end());
      cond_values.insert(cond_values.end(), c.begin(), c.end());
      Array pred = run_batched(cond, cond_values, cond_in_b, {true}, size, site)[0];
      std::vector<Array> body_values(b_consts.begin(), b_consts.end());
      body_values.insert(body_values.end(), c.begin(), c.end());
      std::vector<Array> next = run_batched(body, body_values, body_in_b, carry_b, size, site);
      for (size_t k = 0; k < next.size(); ++k) {
        Array keep = broadcast_in_dim(pred, next[k].shape(), {0}, site);
        next[k] = strong(where(keep, next[k], c[k], site), site);
      }
      return next;
    };
    ClosedProgram new_body = trace_closed(step, body_types, site);
    params.cond = new_cond.program;
    params.body = new_body.program;
    params.cond_num_consts = static_cast<int64_t>(new_cond.consts.size() + num_cc);
    params.body_num_consts = static_cast<int64_t>(new_body.consts.size() + num_cc + num_bc);
    operands = new_cond.consts;
    operands.insert(operands.end(), cc.begin(), cc.end());
    operands.insert(operands.end(), new_body.consts.begin(), new_body.consts.end());
    operands.insert(operands.end(), cc.begin(), cc.end());
    operands.insert(operands.end(), bc.begin(), bc.end());
  }
  operands.insert(operands.end(), carry.begin(), carry.end());
  BatchResult result;
  result.outputs = bind(prim::while_loop, operands, params, site);
  for (bool b : carry_b) result.dims.push_back(b ? 0 : kNotBatched);
  return result;
}

}  // namespace

void register_while_rules(PrimTable& table) {
  PrimDef& def = table[prim::while_loop];
  def.impl = while_impl;
  def.vjp = while_vjp;
  def.batch = while_batch;
}

}  // namespace kiln::control_flow
