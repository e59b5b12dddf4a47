// JVP rules of scan, cond and while_loop: the same primitive over the JVP of its body or
// branches, carrying each floating-point value's tangent beside it.
//
// The body of the new primitive takes the tangents of the operands that have one (every
// floating-point carry gets one, zeros where the operand had none, since a carry's tangent
// must keep one type across iterations) and returns the tangent of every floating-point
// result. The walk that calls these rules has already computed the primal results; the new
// primitive computes them again beside the tangents (JAX interleaves the two and does not).
// Unlike reverse mode, while_loop is differentiable forward: nothing needs reversing.
#include "transforms/jvp_rules/jvp_rules.h"
#include "kiln/ops.h"
#include "prims/ids/control_flow.h"
#include "transforms/control_flow/sub_programs.h"
#include "transforms/forward.h"

namespace kiln::control_flow {
namespace {

using Values = std::vector<Array>;

// Positions in [begin, end) whose tangent is set.
std::vector<size_t> with_tangent(std::span<const Array> tangents, size_t begin, size_t end) {
  std::vector<size_t> positions;
  for (size_t i = begin; i < end; ++i) {
    if (tangents[i].defined()) positions.push_back(i);
  }
  return positions;
}

// Positions in [begin, end) of `types` that are floating point.
std::vector<size_t> floating(std::span<const AbstractValue> types, size_t begin, size_t end) {
  std::vector<size_t> positions;
  for (size_t i = begin; i < end; ++i) {
    if (is_floating(types[i].dtype)) positions.push_back(i);
  }
  return positions;
}

void append(Values& to, std::span<const Array> values) {
  to.insert(to.end(), values.begin(), values.end());
}

// The tangent for a loop carry: strongly typed, zeros where there is none.
Array carry_tangent(const Array& tangent, const Array& primal, CallSite site) {
  return strong(tangent.defined() ? tangent : zeros_like(primal, site), site);
}

// A sub-program's JVP as a function for trace_closed. Its inputs: the program's inputs,
// then one tangent per position of `tangent_inputs`; its outputs: the program's outputs,
// then one tangent per position of `tangent_outputs` (zeros where there is none).
detail::FlatFunction program_jvp(const ProgramRef& program, std::vector<size_t> tangent_inputs,
                                 std::vector<size_t> tangent_outputs, CallSite site) {
  return [program, tangent_inputs, tangent_outputs, site](std::span<const Array> in) {
    size_t n = program.program->inputs.size();
    std::span<const Array> primals = in.subspan(0, n);
    Values tangents(n);
    for (size_t q = 0; q < tangent_inputs.size(); ++q) tangents[tangent_inputs[q]] = in[n + q];
    detail::ProgramJvp jvp = detail::jvp_program(*program.program, primals, tangents, site);
    Values out = jvp.outputs;
    make_strong(out, site);
    for (size_t j : tangent_outputs) {
      out.push_back(carry_tangent(jvp.tangents[j], jvp.outputs[j], site));
    }
    return out;
  };
}

// Types for program_jvp's function: the program's input types, then the tangents'.
std::vector<AbstractValue> jvp_input_types(const Program& program,
                                           const std::vector<size_t>& tangent_inputs) {
  std::vector<AbstractValue> types = input_types(program);
  for (size_t i : tangent_inputs) types.push_back(strong_type(types[i]));
  return types;
}

}  // namespace

std::vector<Array> scan_jvp(const JvpArgs& args) {
  // Operands: consts, initial carry, xs; body: (consts, carry, x) -> (carry, y); the scan's
  // results: the final carry, then the stacked ys.
  const auto& p = std::get<ScanParams>(args.params);
  CallSite site = args.site;
  const Program& body = *p.body.program;
  auto nc = static_cast<size_t>(p.num_consts);
  auto ncarry = static_cast<size_t>(p.num_carry);
  size_t n = args.inputs.size();
  std::vector<AbstractValue> body_in = input_types(body);
  std::vector<AbstractValue> body_out;
  for (VarId var : body.outputs) body_out.push_back(body.aval(var));

  std::vector<size_t> t_consts = with_tangent(args.tangents, 0, nc);
  std::vector<size_t> t_carry = floating(body_in, nc, nc + ncarry);
  std::vector<size_t> t_xs = with_tangent(args.tangents, nc + ncarry, n);
  std::vector<size_t> t_ys = floating(body_out, ncarry, body_out.size());

  // The new body's inputs: consts, their tangents, carry, its tangents, x, its tangents.
  // program_jvp wants the primals first, so the body is wrapped to reorder.
  std::vector<size_t> tangent_inputs = t_consts;
  tangent_inputs.insert(tangent_inputs.end(), t_carry.begin(), t_carry.end());
  tangent_inputs.insert(tangent_inputs.end(), t_xs.begin(), t_xs.end());
  std::vector<size_t> tangent_outputs = t_carry;
  for (size_t& k : tangent_outputs) k -= nc;  // carry k of the body's outputs
  tangent_outputs.insert(tangent_outputs.end(), t_ys.begin(), t_ys.end());
  detail::FlatFunction jvp = program_jvp(p.body, tangent_inputs, tangent_outputs, site);
  size_t groups[] = {nc, t_consts.size(), ncarry, t_carry.size(), n - nc - ncarry, t_xs.size()};
  // In the scan's order (consts, tconsts, carry, tcarry, xs, txs) -> program_jvp's order
  // (consts, carry, xs, tconsts, tcarry, txs), and the results back into the scan's order
  // (carry, tcarry, ys, tys).
  detail::FlatFunction step = [&](std::span<const Array> in) {
    std::span<const Array> part[6];
    size_t at = 0;
    for (size_t g = 0; g < 6; ++g) {
      part[g] = in.subspan(at, groups[g]);
      at += groups[g];
    }
    Values reordered;
    for (size_t g : {0, 2, 4, 1, 3, 5}) append(reordered, part[g]);
    Values out = jvp(reordered);
    size_t ny = body_out.size() - ncarry;
    std::span<const Array> all(out);
    Values result;
    append(result, all.subspan(0, ncarry));
    append(result, all.subspan(body_out.size(), t_carry.size()));
    append(result, all.subspan(ncarry, ny));
    append(result, all.subspan(body_out.size() + t_carry.size()));
    return result;
  };
  std::vector<AbstractValue> step_types;
  auto add_types = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) step_types.push_back(body_in[i]);
  };
  auto add_tangent_types = [&](const std::vector<size_t>& positions) {
    for (size_t i : positions) step_types.push_back(strong_type(body_in[i]));
  };
  add_types(0, nc);
  add_tangent_types(t_consts);
  add_types(nc, nc + ncarry);
  add_tangent_types(t_carry);
  add_types(nc + ncarry, body_in.size());
  add_tangent_types(t_xs);
  ClosedProgram closed = trace_closed(step, step_types, site);

  Values operands = closed.consts;
  append(operands, args.inputs.subspan(0, nc));
  for (size_t i : t_consts) operands.push_back(strong(args.tangents[i], site));
  append(operands, args.inputs.subspan(nc, ncarry));
  for (size_t i : t_carry)
    operands.push_back(carry_tangent(args.tangents[i], args.inputs[i], site));
  append(operands, args.inputs.subspan(nc + ncarry));
  for (size_t i : t_xs) operands.push_back(strong(args.tangents[i], site));
  ScanParams params = p;
  params.body = closed.program;
  params.num_consts = static_cast<int64_t>(closed.consts.size() + nc + t_consts.size());
  params.num_carry = static_cast<int64_t>(ncarry + t_carry.size());
  Values results = bind(prim::scan, operands, params, site);

  Values tangents(args.outputs.size());
  for (size_t q = 0; q < t_carry.size(); ++q) tangents[t_carry[q] - nc] = results[ncarry + q];
  size_t tys_start = ncarry + t_carry.size() + (body_out.size() - ncarry);
  for (size_t q = 0; q < t_ys.size(); ++q) tangents[t_ys[q]] = results[tys_start + q];
  return tangents;
}

std::vector<Array> cond_jvp(const JvpArgs& args) {
  // Operands: the branch index, then the branches' arguments.
  const auto& p = std::get<CondParams>(args.params);
  CallSite site = args.site;
  std::span<const Array> operands = args.inputs.subspan(1);
  std::span<const Array> operand_tangents = args.tangents.subspan(1);
  const Program& first = *p.branches[0].program;
  std::vector<AbstractValue> out_types;
  for (VarId var : first.outputs) out_types.push_back(first.aval(var));
  std::vector<size_t> t_in = with_tangent(operand_tangents, 0, operands.size());
  std::vector<size_t> t_out = floating(out_types, 0, out_types.size());
  std::vector<ClosedProgram> closed;
  for (const ProgramRef& branch : p.branches) {
    closed.push_back(trace_closed(program_jvp(branch, t_in, t_out, site),
                                  jvp_input_types(*branch.program, t_in), site));
  }
  JoinedBranches joined = join_branches(closed);
  Values in{args.inputs[0]};
  append(in, joined.consts);
  append(in, operands);
  for (size_t i : t_in) in.push_back(strong(operand_tangents[i], site));
  Values results = bind(prim::cond, in, CondParams{std::move(joined.branches)}, site);
  Values tangents(args.outputs.size());
  for (size_t q = 0; q < t_out.size(); ++q) tangents[t_out[q]] = results[out_types.size() + q];
  return tangents;
}

std::vector<Array> while_jvp(const JvpArgs& args) {
  // Operands: cond's consts, body's consts, the initial carry.
  const auto& p = std::get<WhileParams>(args.params);
  CallSite site = args.site;
  auto ncc = static_cast<size_t>(p.cond_num_consts);
  auto nbc = static_cast<size_t>(p.body_num_consts);
  size_t n = args.inputs.size();
  size_t ncarry = n - ncc - nbc;
  std::vector<AbstractValue> body_in = input_types(*p.body.program);
  // Body positions: consts [0, nbc), carry [nbc, nbc + ncarry).
  std::vector<size_t> t_consts;
  for (size_t i = 0; i < nbc; ++i) {
    if (args.tangents[ncc + i].defined()) t_consts.push_back(i);
  }
  std::vector<size_t> t_carry = floating(body_in, nbc, nbc + ncarry);
  std::vector<size_t> tangent_inputs = t_consts;
  tangent_inputs.insert(tangent_inputs.end(), t_carry.begin(), t_carry.end());
  std::vector<size_t> tangent_outputs = t_carry;
  for (size_t& k : tangent_outputs) k -= nbc;
  detail::FlatFunction jvp = program_jvp(p.body, tangent_inputs, tangent_outputs, site);

  // New body: (consts, tconsts, carry, tcarry) -> (carry, tcarry).
  size_t nt = t_consts.size();
  detail::FlatFunction step = [&](std::span<const Array> in) {
    Values reordered;
    append(reordered, in.subspan(0, nbc));
    append(reordered, in.subspan(nbc + nt, ncarry));
    append(reordered, in.subspan(nbc, nt));
    append(reordered, in.subspan(nbc + nt + ncarry));
    return jvp(reordered);
  };
  std::vector<AbstractValue> step_types(body_in.begin(),
                                        body_in.begin() + static_cast<std::ptrdiff_t>(nbc));
  for (size_t i : t_consts) step_types.push_back(strong_type(body_in[i]));
  step_types.insert(step_types.end(), body_in.begin() + static_cast<std::ptrdiff_t>(nbc),
                    body_in.end());
  for (size_t i : t_carry) step_types.push_back(strong_type(body_in[i]));
  ClosedProgram new_body = trace_closed(step, step_types, site);

  // New cond: (consts, carry, tcarry) -> the old cond on (consts, carry).
  std::vector<AbstractValue> cond_types = input_types(*p.cond.program);
  for (size_t i : t_carry) cond_types.push_back(strong_type(body_in[i]));
  size_t cond_inputs = p.cond.program->inputs.size();
  detail::FlatFunction test = [&](std::span<const Array> in) {
    return run(p.cond, in.subspan(0, cond_inputs), site);
  };
  ClosedProgram new_cond = trace_closed(test, cond_types, site);

  Values operands = new_cond.consts;
  append(operands, args.inputs.subspan(0, ncc));
  append(operands, new_body.consts);
  append(operands, args.inputs.subspan(ncc, nbc));
  for (size_t i : t_consts) operands.push_back(strong(args.tangents[ncc + i], site));
  append(operands, args.inputs.subspan(ncc + nbc));
  for (size_t i : t_carry) {
    size_t operand = ncc + i;  // body position i (carry i - nbc) is operand ncc + i
    operands.push_back(carry_tangent(args.tangents[operand], args.inputs[operand], site));
  }
  WhileParams params = p;
  params.cond = new_cond.program;
  params.body = new_body.program;
  params.cond_num_consts = static_cast<int64_t>(new_cond.consts.size() + ncc);
  params.body_num_consts = static_cast<int64_t>(new_body.consts.size() + nbc + nt);
  Values results = bind(prim::while_loop, operands, params, site);
  Values tangents(args.outputs.size());
  for (size_t q = 0; q < t_carry.size(); ++q) tangents[t_carry[q] - nbc] = results[ncarry + q];
  return tangents;
}

}  // namespace kiln::control_flow
