// shard_map's shape rule: the operands split by in_specs must give the body's input types,
// and the results are the body's results assembled by out_specs. It also checks that a
// result out_specs does not split over some mesh axis is the same on every device along it
// (what makes a block of a replicated result the result, and shard_map's VJP right): a
// static walk over the body tracks the axes along which each value may vary.
#include <algorithm>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/sharding_spec_checks.h"
#include "ir/program.h"
#include "prims/ids/spmd.h"
#include "prims/registry.h"
#include "prims/spmd_text.h"
#include "sharding/shard_map_rules.h"

namespace kiln::spmd {
namespace {

using AxisMask = uint64_t;
// Each axis is a bit of an AxisMask; no real mesh comes near.
constexpr size_t kMaxMeshAxes = 16;

AxisMask mask_of(const std::vector<AxisText>& mesh, const std::vector<std::string>& axes) {
  AxisMask mask = 0;
  for (const std::string& axis : axes) {
    for (size_t a = 0; a < mesh.size(); ++a) {
      if (mesh[a].name == axis) mask |= AxisMask{1} << a;
    }
  }
  return mask;
}

AxisMask mask_of(const std::vector<AxisText>& mesh, const ShardingSpec& spec) {
  AxisMask mask = 0;
  for (const std::vector<std::string>& axes : spec.dims) mask |= mask_of(mesh, axes);
  return mask;
}

// The mesh axes along which each body output may differ between devices.
std::vector<AxisMask> varying_outputs(const Program& body, const std::vector<AxisText>& mesh,
                                      const std::vector<AxisMask>& inputs);

std::vector<AxisMask> slice_of(const std::vector<AxisMask>& masks, size_t begin, size_t count) {
  return {masks.begin() + static_cast<std::ptrdiff_t>(begin),
          masks.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

// Widens `carry` until a loop body that maps (prefix, carry, suffix) to (carry', ...) adds
// no axis: a carry varies along an axis once any step can make it vary. Masks only grow and
// have at most kMaxMeshAxes bits, so this ends.
std::vector<AxisMask> loop_invariant_carry(
    std::vector<AxisMask> carry,
    const std::function<std::vector<AxisMask>(const std::vector<AxisMask>&)>& step) {
  for (bool changed = true; changed;) {
    std::vector<AxisMask> next = step(carry);
    changed = false;
    for (size_t i = 0; i < carry.size(); ++i) {
      AxisMask widened = carry[i] | next[i];
      changed |= widened != carry[i];
      carry[i] = widened;
    }
  }
  return carry;
}

// The results' masks of a control-flow equation, from its operands': the sub-programs are
// walked too, so that a collective inside a scan, cond or while_loop body counts (a scan
// whose body psums its carry returns a replicated carry). nullopt for other primitives.
std::optional<std::vector<AxisMask>> control_flow_outputs(const Equation& equation,
                                                          const std::vector<AxisText>& mesh,
                                                          const std::vector<AxisMask>& operands);

std::vector<AxisMask> varying_outputs(const Program& body, const std::vector<AxisText>& mesh,
                                      const std::vector<AxisMask>& inputs) {
  std::vector<AxisMask> vary(body.num_vars(), 0);
  for (size_t i = 0; i < body.inputs.size(); ++i)
    vary[static_cast<size_t>(body.inputs[i])] = inputs[i];
  for (const Equation& equation : body.equations) {
    std::vector<AxisMask> operand_masks;
    AxisMask operands = 0;
    for (VarId var : equation.inputs) {
      operand_masks.push_back(vary[static_cast<size_t>(var)]);
      operands |= vary[static_cast<size_t>(var)];
    }
    if (std::optional<std::vector<AxisMask>> results =
            control_flow_outputs(equation, mesh, operand_masks)) {
      for (size_t k = 0; k < equation.outputs.size(); ++k) {
        vary[static_cast<size_t>(equation.outputs[k])] = (*results)[k];
      }
      continue;
    }
    AxisMask result = operands;
    if (const auto* p = std::get_if<CollectiveParams>(&equation.params)) {
      AxisMask axes = mask_of(mesh, split_axes(p->axes));
      switch (equation.prim) {
        case prim::psum:
        case prim::pmean:
        case prim::pmax:
        case prim::all_gather:
          result = operands & ~axes;  // every device of the group gets the same
          break;
        default:  // psum_scatter, all_to_all, ppermute, axis_index: a part per device
          result = operands | axes;
          break;
      }
    }
    for (VarId var : equation.outputs) vary[static_cast<size_t>(var)] = result;
  }
  std::vector<AxisMask> out;
  for (VarId var : body.outputs) out.push_back(vary[static_cast<size_t>(var)]);
  return out;
}

std::optional<std::vector<AxisMask>> control_flow_outputs(const Equation& equation,
                                                          const std::vector<AxisText>& mesh,
                                                          const std::vector<AxisMask>& operands) {
  if (const auto* p = std::get_if<ScanParams>(&equation.params)) {
    auto consts = static_cast<size_t>(p->num_consts), carried = static_cast<size_t>(p->num_carry);
    std::vector<AxisMask> xs =
        slice_of(operands, consts + carried, operands.size() - consts - carried);
    auto body_outputs = [&](const std::vector<AxisMask>& carry) {
      std::vector<AxisMask> in = slice_of(operands, 0, consts);
      in.insert(in.end(), carry.begin(), carry.end());
      in.insert(in.end(), xs.begin(), xs.end());
      return varying_outputs(*p->body.program, mesh, in);
    };
    std::vector<AxisMask> carry = loop_invariant_carry(
        slice_of(operands, consts, carried),
        [&](const std::vector<AxisMask>& c) { return slice_of(body_outputs(c), 0, carried); });
    // The final carry is the last step's (each step seeing at most `carry`'s axes), or, for
    // a scan of length 0, the initial one.
    std::vector<AxisMask> results = body_outputs(carry);
    if (p->length == 0) {
      for (size_t i = 0; i < carried; ++i) results[i] = operands[consts + i];
    }
    return results;
  }
  if (const auto* p = std::get_if<CondParams>(&equation.params)) {
    // Devices whose index differs may take different branches.
    std::vector<AxisMask> branch_operands = slice_of(operands, 1, operands.size() - 1);
    std::vector<AxisMask> results(equation.outputs.size(), operands[0]);
    for (const ProgramRef& branch : p->branches) {
      std::vector<AxisMask> out = varying_outputs(*branch.program, mesh, branch_operands);
      for (size_t k = 0; k < results.size(); ++k) results[k] |= out[k];
    }
    return results;
  }
  if (const auto* p = std::get_if<WhileParams>(&equation.params)) {
    auto cond_consts = static_cast<size_t>(p->cond_num_consts);
    auto body_consts = static_cast<size_t>(p->body_num_consts);
    size_t carried = operands.size() - cond_consts - body_consts;
    auto with = [&](size_t begin, size_t count, const std::vector<AxisMask>& carry) {
      std::vector<AxisMask> in = slice_of(operands, begin, count);
      in.insert(in.end(), carry.begin(), carry.end());
      return in;
    };
    // Where the predicate varies, devices may run different numbers of steps: every carry
    // then varies there too.
    std::vector<AxisMask> carry = loop_invariant_carry(
        slice_of(operands, cond_consts + body_consts, carried),
        [&](const std::vector<AxisMask>& c) {
          std::vector<AxisMask> next =
              varying_outputs(*p->body.program, mesh, with(cond_consts, body_consts, c));
          AxisMask predicate = varying_outputs(*p->cond.program, mesh, with(0, cond_consts, c))[0];
          for (AxisMask& m : next) m |= predicate;
          return next;
        });
    return carry;
  }
  return std::nullopt;
}

void check_spec(const std::vector<AxisText>& mesh, const ShardingSpec& spec, int64_t rank,
                const std::string& what, const RuleContext& context) {
  if (std::optional<std::string> axis = repeated_axis(spec)) {
    context.fail(repeated_axis_message(what, spec, *axis), kRepeatedAxisHint);
  }
  for (const std::vector<std::string>& axes : spec.dims) {
    for (const std::string& axis : axes) {
      if (mask_of(mesh, std::vector<std::string>{axis}) == 0) {
        context.fail(fmt::format("{} {} names axis '{}', which mesh {} does not have", what,
                                 spec.to_string(), axis, format_mesh(mesh)));
      }
    }
  }
  if (static_cast<int64_t>(spec.dims.size()) > rank) {
    context.fail(fmt::format("{} {} has {} entries for rank {}", what, spec.to_string(),
                             spec.dims.size(), rank),
                 "a spec has at most one entry per dimension");
  }
}

}  // namespace

ShardMapLayout shard_map_layout(const ShardMapParams& p, const RuleContext& context) {
  ShardMapLayout layout;
  layout.mesh = parse_mesh(p.mesh);
  layout.in_specs = parse_specs(p.in_specs);
  layout.out_specs = parse_specs(p.out_specs);
  if (p.body.program == nullptr) context.fail("has no body");
  // Program text can say anything: a mesh is refused here before its axes become bits of
  // a mask (varying_outputs) or its sizes are multiplied.
  if (layout.mesh.empty()) context.fail("the mesh has no axes", "as in mesh=\"data=4\"");
  if (layout.mesh.size() > kMaxMeshAxes) {
    context.fail(
        fmt::format("the mesh has {} axes, more than {}", layout.mesh.size(), kMaxMeshAxes));
  }
  int64_t devices = 1;
  for (size_t a = 0; a < layout.mesh.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      if (layout.mesh[a].name == layout.mesh[b].name) {
        context.fail(
            fmt::format("mesh axis '{}' appears twice in {}", layout.mesh[a].name, p.mesh));
      }
    }
    if (__builtin_mul_overflow(devices, layout.mesh[a].size, &devices)) {
      context.fail(fmt::format("the mesh {} has more than 2^63 devices", p.mesh));
    }
  }
  if (static_cast<int64_t>(p.devices.size()) != devices) {
    context.fail(fmt::format("mesh {} has {} devices, but {} device ids are given", p.mesh, devices,
                             p.devices.size()));
  }
  return layout;
}

std::vector<AbstractValue> shard_map_rule(std::span<const AbstractValue> inputs,
                                          const Params& params, const RuleContext& context) {
  const auto& p = std::get<ShardMapParams>(params);
  ShardMapLayout layout = shard_map_layout(p, context);
  const Program& body = *p.body.program;
  if (layout.in_specs.size() != inputs.size() || body.inputs.size() != inputs.size()) {
    context.fail(fmt::format("{} operand(s), {} in_specs and a body of {} input(s)", inputs.size(),
                             layout.in_specs.size(), body.inputs.size()));
  }
  if (layout.out_specs.size() != body.outputs.size()) {
    context.fail(fmt::format("{} out_specs for a body of {} result(s)", layout.out_specs.size(),
                             body.outputs.size()));
  }
  std::vector<AxisMask> input_vary;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ShardingSpec& spec = layout.in_specs[i];
    const Shape& shape = inputs[i].shape;
    std::string what = fmt::format("in_specs[{}]", i);
    check_spec(layout.mesh, spec, shape.rank(), what, context);
    Shape block = shape;
    for (size_t d = 0; d < static_cast<size_t>(shape.rank()); ++d) {
      int64_t n = parts(layout.mesh, spec, d);
      if (shape[static_cast<int64_t>(d)] % n != 0) {
        context.fail(fmt::format("operand {} ({}): dimension {} (size {}) is split by {} {} into "
                                 "{} parts, which do not divide it",
                                 i, inputs[i].to_string(), d, shape[static_cast<int64_t>(d)], what,
                                 spec.to_string(), n),
                     "pad that dimension to a multiple of the parts, or split another one");
      }
      block.dims()[d] = shape[static_cast<int64_t>(d)] / n;
    }
    const AbstractValue& expected = body.aval(body.inputs[i]);
    if (expected.shape != block || expected.dtype != inputs[i].dtype) {
      context.fail(
          fmt::format("operand {} ({}) split by {} gives blocks of {}[{}], but the body "
                      "takes {}",
                      i, inputs[i].to_string(), spec.to_string(), dtype_name(inputs[i].dtype),
                      fmt::join(block.dims(), ","), expected.to_string()));
    }
    input_vary.push_back(mask_of(layout.mesh, spec));
  }
  std::vector<AxisMask> output_vary = varying_outputs(body, layout.mesh, input_vary);
  std::vector<AbstractValue> out;
  for (size_t j = 0; j < body.outputs.size(); ++j) {
    AbstractValue value = body.aval(body.outputs[j]);
    ShardingSpec spec = layout.out_specs[j];
    std::string what = fmt::format("out_specs[{}]", j);
    check_spec(layout.mesh, spec, value.shape.rank(), what, context);
    AxisMask unsplit = output_vary[j] & ~mask_of(layout.mesh, spec);
    for (size_t a = 0; a < layout.mesh.size(); ++a) {
      if ((unsplit >> a) & 1) {
        const std::string& axis = layout.mesh[a].name;
        context.fail(
            fmt::format("result {} ({}) may differ along mesh axis '{}', but {} {} does not "
                        "split it over '{}', which claims every device along it holds the same",
                        j, value.to_string(), axis, what, spec.to_string(), axis),
            fmt::format("psum or pmean it over '{}' in the function, or split a dimension over "
                        "'{}' in {}",
                        axis, axis, what));
      }
    }
    for (size_t d = 0; d < static_cast<size_t>(value.shape.rank()); ++d) {
      value.shape.dims()[d] *= parts(layout.mesh, spec, d);
    }
    while (static_cast<int64_t>(spec.dims.size()) < value.shape.rank()) spec.dims.emplace_back();
    spec.sharded = true;
    value.sharding = spec;
    value.weak_type = false;
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace kiln::spmd
