// The collectives' and shard_map's VJP and batching rules, and the registration of every
// SPMD rule this layer owns (impl, shard_map's shape and cost rules).
//
// VJPs, as JAX's: psum's is psum (and pmean's pmean), all_gather's is psum_scatter and back,
// all_to_all's swaps its axes, ppermute's inverts the permutation, pmax's sends the
// summed cotangent to the devices that held the maximum (split evenly between ties). shard_map's
// VJP is a shard_map of the body's VJP, which divides the cotangent of a result replicated
// over some axes by their size (each replica receives a share) and psums the cotangent of an
// operand replicated over some axes over them (each replica contributed).
// Batching: the batch axis is one more axis no collective touches; shard_map batches its
// body and leaves the batch axis unsplit.
#include <fmt/format.h>

#include "ir/program.h"
#include "kiln/grad.h"
#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/ids/spmd.h"
#include "prims/spmd_text.h"
#include "sharding/shard_map_rules.h"
#include "sharding/shard_map_run.h"
#include "transforms/batch_rules/batch_util.h"
#include "transforms/control_flow/sub_programs.h"
#include "transforms/cost_analysis.h"
#include "transforms/eval.h"
#include "transforms/vjp_rules/vjp_util.h"

namespace kiln::spmd {
namespace {

const CollectiveParams& collective_params(const Params& params) {
  return std::get<CollectiveParams>(params);
}

template <PrimId kTransposed>
std::vector<Array> linear_vjp(const VjpArgs& args) {
  std::vector<Array> cts = vjp_util::none(args);
  if (!args.cotangents[0].defined()) return cts;
  cts[0] = bind1(kTransposed, {args.cotangents[0]}, args.params, args.site);
  return cts;
}

std::vector<Array> all_to_all_vjp(const VjpArgs& args) {
  std::vector<Array> cts = vjp_util::none(args);
  if (!args.cotangents[0].defined()) return cts;
  CollectiveParams p = collective_params(args.params);
  std::swap(p.dimension, p.split_dimension);
  cts[0] = bind1(prim::all_to_all, {args.cotangents[0]}, p, args.site);
  return cts;
}

std::vector<Array> ppermute_vjp(const VjpArgs& args) {
  std::vector<Array> cts = vjp_util::none(args);
  if (!args.cotangents[0].defined()) return cts;
  CollectiveParams p = collective_params(args.params);
  for (size_t i = 0; i + 1 < p.permutation.size(); i += 2) {
    std::swap(p.permutation[i], p.permutation[i + 1]);
  }
  cts[0] = bind1(prim::ppermute, {args.cotangents[0]}, p, args.site);
  return cts;
}

std::vector<Array> pmax_vjp(const VjpArgs& args) {
  std::vector<Array> cts = vjp_util::none(args);
  if (!args.cotangents[0].defined()) return cts;
  CallSite site = args.site;
  Array holds = astype(equal(args.inputs[0], args.outputs[0], site), args.inputs[0].dtype(), site);
  Array holders = bind1(prim::psum, {holds}, args.params, site);
  // The result is the same on every device, and each device's cotangent is its share of
  // the result's: their sum goes to the holders of the maximum.
  Array total = bind1(prim::psum, {args.cotangents[0]}, args.params, site);
  cts[0] = div(mul(total, holds, site), holders, site);
  return cts;
}

template <PrimId kPrim>
BatchResult same_axes_batch(const BatchArgs& args) {
  return BatchResult{{bind1(kPrim, {args.inputs[0]}, args.params, args.site)}, {args.dims[0]}};
}

int64_t nonnegative_dimension(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

template <PrimId kPrim>
BatchResult shifted_axes_batch(const BatchArgs& args) {
  Array x = batch_util::move_batch_first(args.inputs[0], args.dims[0], args.site);
  CollectiveParams p = collective_params(args.params);
  int64_t rank = x.rank() - 1;  // of one example
  p.dimension = nonnegative_dimension(p.dimension, rank) + 1;
  if (kPrim == prim::all_to_all)
    p.split_dimension = nonnegative_dimension(p.split_dimension, rank) + 1;
  return batch_util::first(bind1(kPrim, {x}, p, args.site));
}

// ----- shard_map ---------------------------------------------------------------------------

ShardingSpec replicated() {
  return ShardingSpec(std::vector<std::vector<std::string>>{});
}

// The mesh axes `spec` does not split over, in mesh order.
std::vector<std::string> unsplit_axes(const std::vector<AxisText>& mesh, const ShardingSpec& spec) {
  std::vector<std::string> out;
  for (const AxisText& axis : mesh) {
    bool used = false;
    for (const auto& axes : spec.dims) {
      for (const std::string& name : axes) used = used || name == axis.name;
    }
    if (!used) out.push_back(axis.name);
  }
  return out;
}

int64_t size_of(const std::vector<AxisText>& mesh, const std::vector<std::string>& axes) {
  int64_t size = 1;
  for (const AxisText& axis : mesh) {
    for (const std::string& name : axes) size *= name == axis.name ? axis.size : 1;
  }
  return size;
}

ShardingSpec with_leading_unsplit(ShardingSpec spec) {
  spec.dims.insert(spec.dims.begin(), std::vector<std::string>{});
  spec.sharded = true;
  return spec;
}

std::vector<Array> shard_map_vjp(const VjpArgs& args) {
  const auto& p = std::get<ShardMapParams>(args.params);
  CallSite site = args.site;
  RuleContext context{prim_def(prim::shard_map), site};
  ShardMapLayout layout = shard_map_layout(p, context);
  const Program& body = *p.body.program;
  size_t operands = args.inputs.size();
  std::vector<size_t> wanted, float_outputs;
  std::vector<bool> differentiable(operands, false);
  for (size_t i = 0; i < operands; ++i) {
    if (args.wanted[i] && is_floating(args.inputs[i].dtype())) {
      wanted.push_back(i);
      differentiable[i] = true;
    }
  }
  std::vector<Array> cts = vjp_util::none(args);
  if (wanted.empty()) return cts;
  std::vector<AbstractValue> types = control_flow::input_types(body);
  std::vector<Array> output_cts;
  for (size_t j = 0; j < body.outputs.size(); ++j) {
    const AbstractValue& block = body.aval(body.outputs[j]);
    if (!is_floating(block.dtype)) continue;
    float_outputs.push_back(j);
    const Array& given = args.cotangents[j];
    output_cts.push_back(given.defined()
                             ? control_flow::strong(given, site)
                             : zeros(args.outputs[j].shape(), block.dtype, nullptr, site));
    types.push_back(control_flow::strong_type(block));
  }
  detail::FlatFunction backward = [&](std::span<const Array> in) {
    std::span<const Array> values = in.subspan(0, operands);
    std::span<const Array> given = in.subspan(operands);
    detail::FlatFunction forward = [&](std::span<const Array> x) {
      return eval_program(body, x, site);
    };
    detail::FlatVjp vjp = detail::vjp_flat(forward, values, differentiable, site);
    std::vector<Array> out_cts(body.outputs.size());
    for (size_t q = 0; q < float_outputs.size(); ++q) {
      size_t j = float_outputs[q];
      int64_t replicas = size_of(layout.mesh, unsplit_axes(layout.mesh, layout.out_specs[j]));
      out_cts[j] =
          replicas == 1
              ? given[q]
              : div(given[q],
                    full(Shape{}, static_cast<double>(replicas), given[q].dtype(), nullptr, site),
                    site);
    }
    std::vector<Array> in_cts = vjp.pullback(out_cts);
    std::vector<Array> out;
    for (size_t i : wanted) {
      Array ct = control_flow::strong(in_cts[i], site);
      std::vector<std::string> axes = unsplit_axes(layout.mesh, layout.in_specs[i]);
      if (!axes.empty()) {
        CollectiveParams sum;
        sum.axes = join_axes(axes);
        sum.axis_size = size_of(layout.mesh, axes);
        ct = bind1(prim::psum, {ct}, sum, site);
      }
      out.push_back(ct);
    }
    return out;
  };
  control_flow::ClosedProgram closed = control_flow::trace_closed(backward, types, site);
  std::vector<ShardingSpec> specs(closed.consts.size(), replicated());
  specs.insert(specs.end(), layout.in_specs.begin(), layout.in_specs.end());
  for (size_t j : float_outputs) specs.push_back(layout.out_specs[j]);
  std::vector<ShardingSpec> result_specs;
  for (size_t i : wanted) result_specs.push_back(layout.in_specs[i]);
  ShardMapParams backward_params{closed.program, p.mesh, p.devices, format_specs(specs),
                                 format_specs(result_specs)};
  std::vector<Array> operands_bwd = closed.consts;
  operands_bwd.insert(operands_bwd.end(), args.inputs.begin(), args.inputs.end());
  operands_bwd.insert(operands_bwd.end(), output_cts.begin(), output_cts.end());
  std::vector<Array> results = bind(prim::shard_map, operands_bwd, backward_params, site);
  for (size_t q = 0; q < wanted.size(); ++q) cts[wanted[q]] = results[q];
  return cts;
}

BatchResult shard_map_batch(const BatchArgs& args) {
  const auto& p = std::get<ShardMapParams>(args.params);
  CallSite site = args.site;
  RuleContext context{prim_def(prim::shard_map), site};
  ShardMapLayout layout = shard_map_layout(p, context);
  const Program& body = *p.body.program;
  std::vector<bool> batched;
  std::vector<Array> values;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    batched.push_back(args.dims[i] != kNotBatched);
    values.push_back(batch_util::move_batch_first(args.inputs[i], args.dims[i], site));
  }
  std::vector<bool> out_batched = control_flow::batched_outputs(body, batched);
  control_flow::ClosedProgram closed =
      control_flow::batch_program(body, batched, out_batched, args.size, site);
  std::vector<ShardingSpec> in_specs(closed.consts.size(), replicated());
  for (size_t i = 0; i < values.size(); ++i) {
    in_specs.push_back(batched[i] ? with_leading_unsplit(layout.in_specs[i]) : layout.in_specs[i]);
  }
  std::vector<ShardingSpec> out_specs;
  BatchResult result;
  for (size_t j = 0; j < out_batched.size(); ++j) {
    out_specs.push_back(out_batched[j] ? with_leading_unsplit(layout.out_specs[j])
                                       : layout.out_specs[j]);
    result.dims.push_back(out_batched[j] ? 0 : kNotBatched);
  }
  std::vector<Array> operands = closed.consts;
  operands.insert(operands.end(), values.begin(), values.end());
  result.outputs = bind(prim::shard_map, operands,
                        ShardMapParams{closed.program, p.mesh, p.devices, format_specs(in_specs),
                                       format_specs(out_specs)},
                        site);
  return result;
}

// The body's cost on every device.
Cost shard_map_cost(std::span<const AbstractValue>, std::span<const AbstractValue>,
                    const Params& params) {
  const auto& p = std::get<ShardMapParams>(params);
  return program_cost(*p.body.program) * static_cast<double>(p.devices.size());
}

}  // namespace
}  // namespace kiln::spmd

namespace kiln {

void register_spmd_transforms(PrimTable& table) {
  using namespace spmd;
  for (PrimId id : {prim::psum, prim::pmean, prim::pmax, prim::all_gather, prim::psum_scatter,
                    prim::all_to_all, prim::ppermute, prim::axis_index}) {
    table[id].impl = collective_outside_shard_map;
  }
  table[prim::psum].vjp = linear_vjp<prim::psum>;
  table[prim::pmean].vjp = linear_vjp<prim::pmean>;
  table[prim::all_gather].vjp = linear_vjp<prim::psum_scatter>;
  table[prim::psum_scatter].vjp = linear_vjp<prim::all_gather>;
  table[prim::all_to_all].vjp = all_to_all_vjp;
  table[prim::ppermute].vjp = ppermute_vjp;
  table[prim::pmax].vjp = pmax_vjp;
  table[prim::psum].batch = same_axes_batch<prim::psum>;
  table[prim::pmean].batch = same_axes_batch<prim::pmean>;
  table[prim::pmax].batch = same_axes_batch<prim::pmax>;
  table[prim::ppermute].batch = same_axes_batch<prim::ppermute>;
  table[prim::all_gather].batch = shifted_axes_batch<prim::all_gather>;
  table[prim::psum_scatter].batch = shifted_axes_batch<prim::psum_scatter>;
  table[prim::all_to_all].batch = shifted_axes_batch<prim::all_to_all>;
  PrimDef& shard_map = table[prim::shard_map];
  shard_map.abstract_eval = shard_map_rule;
  shard_map.impl = shard_map_impl;
  shard_map.vjp = shard_map_vjp;
  shard_map.batch = shard_map_batch;
  shard_map.cost = shard_map_cost;
}

}  // namespace kiln
