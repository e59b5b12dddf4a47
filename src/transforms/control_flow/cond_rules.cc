// cond's impl, VJP and batching rules (its shape rule is in src/prims/control_flow_rules.cc).
//
// impl: the index is read on the host and clamped to the branches, as JAX's switch does.
// VJP: a cond on the same index whose branches are the VJPs of the original branches
// (each recomputes its branch's forward values), so only the taken branch runs backwards.
// Batching: with an unbatched index, a cond of the batched branches; with a batched index,
// every branch runs on the whole batch and each example selects its branch's results.
#include <algorithm>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "prims/ids/control_flow.h"
#include "transforms/batch_rules/batch_util.h"
#include "transforms/control_flow/control_flow_rules.h"
#include "transforms/control_flow/sub_programs.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln::control_flow {
namespace {

std::vector<Array> cond_impl(std::span<const Array> inputs, const Params& params, CallSite site) {
  const auto& p = std::get<CondParams>(params);
  auto last = static_cast<int64_t>(p.branches.size()) - 1;
  int64_t index = std::clamp<int64_t>(inputs[0].item<int32_t>(site), 0, last);
  std::vector<Array> results = run(p.branches[static_cast<size_t>(index)], inputs.subspan(1), site);
  make_strong(results, site);
  return results;
}

std::vector<Array> cond_vjp(const VjpArgs& args) {
  const auto& p = std::get<CondParams>(args.params);
  CallSite site = args.site;
  std::span<const Array> operands = args.inputs.subspan(1);
  const Program& first = *p.branches[0].program;
  std::vector<size_t> wanted, float_outputs;
  std::vector<bool> differentiable(operands.size(), false);
  for (size_t i = 0; i < operands.size(); ++i) {
    if (args.wanted[i + 1] && is_floating(operands[i].dtype())) {
      wanted.push_back(i);
      differentiable[i] = true;
    }
  }
  std::vector<Array> cts = vjp_util::none(args);
  if (wanted.empty()) return cts;
  for (size_t j = 0; j < first.outputs.size(); ++j) {
    if (is_floating(first.aval(first.outputs[j]).dtype)) float_outputs.push_back(j);
  }
  std::vector<AbstractValue> types = types_of(operands);
  std::vector<Array> output_cts;
  for (size_t j : float_outputs) {
    output_cts.push_back(strong(vjp_util::cotangent_or_zeros(args, j), site));
    types.push_back(output_cts.back().aval());
  }
  std::vector<ClosedProgram> closed;
  for (const ProgramRef& branch : p.branches) {
    detail::FlatFunction branch_vjp = [&](std::span<const Array> in) {
      std::span<const Array> values = in.subspan(0, operands.size());
      std::span<const Array> given = in.subspan(operands.size());
      detail::FlatFunction forward = [&](std::span<const Array> x) { return run(branch, x, site); };
      detail::FlatVjp vjp = detail::vjp_flat(forward, values, differentiable, site);
      std::vector<Array> out_cts(first.outputs.size());
      for (size_t q = 0; q < float_outputs.size(); ++q) out_cts[float_outputs[q]] = given[q];
      std::vector<Array> in_cts = vjp.pullback(out_cts);
      std::vector<Array> out;
      for (size_t i : wanted) out.push_back(strong(in_cts[i], site));
      return out;
    };
    closed.push_back(trace_closed(branch_vjp, types, site));
  }
  JoinedBranches joined = join_branches(closed);
  std::vector<Array> operands_bwd{args.inputs[0]};
  operands_bwd.insert(operands_bwd.end(), joined.consts.begin(), joined.consts.end());
  operands_bwd.insert(operands_bwd.end(), operands.begin(), operands.end());
  operands_bwd.insert(operands_bwd.end(), output_cts.begin(), output_cts.end());
  std::vector<Array> results =
      bind(prim::cond, operands_bwd, CondParams{std::move(joined.branches)}, site);
  for (size_t q = 0; q < wanted.size(); ++q) cts[wanted[q] + 1] = results[q];
  return cts;
}

BatchResult cond_batch(const BatchArgs& args) {
  const auto& p = std::get<CondParams>(args.params);
  CallSite site = args.site;
  std::span<const Array> operands = args.inputs.subspan(1);
  std::vector<bool> batched;
  std::vector<Array> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    batched.push_back(args.dims[i + 1] != kNotBatched);
    values.push_back(batch_util::move_batch_first(operands[i], args.dims[i + 1], site));
  }
  size_t num_outputs = p.branches[0].program->outputs.size();
  BatchResult result;
  if (args.dims[0] == kNotBatched) {
    // Results batched in any branch are batched in all.
    std::vector<bool> out_batched(num_outputs, false);
    for (const ProgramRef& branch : p.branches) {
      std::vector<bool> own = batched_outputs(*branch.program, batched);
      for (size_t j = 0; j < num_outputs; ++j) out_batched[j] = out_batched[j] || own[j];
    }
    std::vector<ClosedProgram> closed;
    for (const ProgramRef& branch : p.branches) {
      closed.push_back(batch_program(*branch.program, batched, out_batched, args.size, site));
    }
    JoinedBranches joined = join_branches(closed);
    std::vector<Array> in{args.inputs[0]};
    in.insert(in.end(), joined.consts.begin(), joined.consts.end());
    in.insert(in.end(), values.begin(), values.end());
    result.outputs = bind(prim::cond, in, CondParams{std::move(joined.branches)}, site);
    for (bool b : out_batched) result.dims.push_back(b ? 0 : kNotBatched);
    return result;
  }
  // A batched index: every branch on every example, then a per-example choice.
  Array index = batch_util::move_batch_first(args.inputs[0], args.dims[0], site);
  auto last = static_cast<double>(p.branches.size() - 1);
  index = clip(index, 0, last, site);
  std::vector<bool> all(num_outputs, true);
  for (size_t b = 0; b < p.branches.size(); ++b) {
    std::vector<Array> outs =
        run_batched(*p.branches[b].program, values, batched, all, args.size, site);
    if (b == 0) {
      result.outputs = std::move(outs);
      continue;
    }
    Array chosen = equal(
        index, full(Shape{args.size}, static_cast<double>(b), DType::i32, nullptr, site), site);
    for (size_t j = 0; j < num_outputs; ++j) {
      Array pred = broadcast_in_dim(chosen, outs[j].shape(), {0}, site);
      result.outputs[j] = where(pred, outs[j], result.outputs[j], site);
    }
  }
  result.dims.assign(num_outputs, 0);
  return result;
}

}  // namespace

void register_cond_rules(PrimTable& table) {
  PrimDef& def = table[prim::cond];
  def.impl = cond_impl;
  def.vjp = cond_vjp;
  def.batch = cond_batch;
}

}  // namespace kiln::control_flow
