// Sharding propagation and the partitioned program of jit's in_shardings
// (spmd_partitioner.h).
#include "sharding/spmd_partitioner.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "base/check.h"
#include "kiln/ops.h"
#include "prims/bind.h"
#include "prims/ids/binary.h"
#include "prims/ids/contract.h"
#include "prims/ids/custom.h"
#include "prims/ids/reduce.h"
#include "prims/ids/shape.h"
#include "prims/ids/unary.h"
#include "prims/spmd_text.h"
#include "sharding/spmd_context.h"

namespace kiln::spmd {
namespace {

using AxisList = std::vector<std::string>;

bool uses_any(const ShardingSpec& spec, const AxisList& axes) {
  for (const AxisList& dim : spec.dims) {
    for (const std::string& axis : dim) {
      if (std::find(axes.begin(), axes.end(), axis) != axes.end()) return true;
    }
  }
  return false;
}

AxisList sorted(AxisList axes) {
  std::sort(axes.begin(), axes.end());
  return axes;
}

// Which operands a primitive may take as terms of a partial sum, the result then being the
// terms of its sum: the primitive is linear in them (and the other operands are whole
// values). Everything else gets summed operands.
std::vector<bool> linear_operands(PrimId prim, const std::vector<const VarSharding*>& operands) {
  std::vector<bool> keep(operands.size(), false);
  auto partial = [&](size_t i) { return !operands[i]->partial.empty(); };
  switch (prim) {
    case prim::neg:
    case prim::transpose:
    case prim::reshape:
    case prim::broadcast_in_dim:
    case prim::reduce_sum:
    case prim::stop_gradient:
    case prim::checkpoint_name:
      keep[0] = partial(0);
      break;
    case prim::mul:
    case prim::dot_general:
      if (partial(0) != partial(1)) keep = {partial(0), partial(1)};
      break;
    case prim::div:
      keep[0] = partial(0) && !partial(1);
      break;
    case prim::add:
    case prim::sub:
      if (partial(0) && partial(1) &&
          sorted(operands[0]->partial) == sorted(operands[1]->partial)) {
        keep = {true, true};
      }
      break;
    default:
      break;
  }
  return keep;
}

}  // namespace

PropagatedSharding propagate_sharding(const Program& program,
                                      const std::vector<ShardingSpec>& input_specs,
                                      const std::vector<AxisText>& mesh, const std::string& name) {
  PropagatedSharding result;
  result.vars.resize(program.num_vars());
  auto state = [&](VarId var) -> VarSharding& { return result.vars[static_cast<size_t>(var)]; };
  for (VarId var : program.constants) {
    state(var).spec =
        full_rank(ShardingSpec(std::vector<AxisList>{}), program.aval(var).shape.rank());
  }
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    VarId var = program.inputs[i];
    state(var).spec = full_rank(input_specs[i], program.aval(var).shape.rank());
  }
  for (const Equation& equation : program.equations) {
    const PrimDef& prim = prim_def(equation.prim);
    std::vector<AbstractValue> inputs, outputs;
    std::vector<const VarSharding*> operands;
    for (VarId var : equation.inputs) {
      inputs.push_back(program.aval(var));
      inputs.back().sharding = state(var).spec;
      operands.push_back(&state(var));
    }
    for (VarId var : equation.outputs) outputs.push_back(program.aval(var));
    ShardingDecision decision = prim.sharding(ShardingArgs{inputs, outputs, equation.params, mesh});
    if (!decision.refusal.empty()) {
      fail(equation.site,
           fmt::format("jit '{}' with in_shardings: {} {}", name, prim.name, decision.refusal),
           "call it outside the partitioned function, or write this part with kiln::shard_map");
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      decision.operands[i] = full_rank(decision.operands[i], inputs[i].shape.rank());
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      decision.results[j] = full_rank(decision.results[j], outputs[j].shape.rank());
    }

    // Terms of a sum flow on through a linear primitive, unless its blocks would be split
    // along an axis the terms are summed over (then the sum is taken, or scattered).
    std::vector<bool> unsummed = linear_operands(equation.prim, operands);
    AxisList partial = decision.partial_sum_axes;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (unsummed[i] && uses_any(decision.operands[i], operands[i]->partial)) unsummed[i] = false;
    }
    for (size_t i = 0; i < operands.size(); ++i) {
      if (!unsummed[i]) continue;
      for (const std::string& axis : operands[i]->partial) {
        if (std::find(partial.begin(), partial.end(), axis) == partial.end())
          partial.push_back(axis);
      }
    }
    bool clash = false;
    for (const ShardingSpec& spec : decision.results) clash = clash || uses_any(spec, partial);
    if (clash) {
      unsummed.assign(operands.size(), false);
      partial = decision.partial_sum_axes;
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      state(equation.outputs[j]) = VarSharding{decision.results[j], partial};
    }
    result.decisions.push_back(std::move(decision));
    result.unsummed.push_back(std::move(unsummed));
  }
  return result;
}

namespace {

// Runs `program` on this device's blocks inside shard_map's function, bringing every
// operand to the split its rule asked for.
class BlockRunner {
 public:
  BlockRunner(const Program& program, const PropagatedSharding& plan,
              const std::vector<AxisText>& mesh)
      : program_(program), plan_(plan), mesh_(mesh), blocks_(program.num_vars()) {}

  std::vector<Array> run(std::span<const Array> inputs,
                         const std::vector<ShardingSpec>& out_specs) {
    for (size_t i = 0; i < program_.constants.size(); ++i) {
      blocks_[static_cast<size_t>(program_.constants[i])] = program_.constant_values[i];
    }
    for (size_t i = 0; i < program_.inputs.size(); ++i) {
      blocks_[static_cast<size_t>(program_.inputs[i])] = inputs[i];
    }
    std::vector<bool> needed = needed_equations();
    for (size_t e = 0; e < program_.equations.size(); ++e) {
      if (!needed[e]) continue;
      const Equation& equation = program_.equations[e];
      const ShardingDecision& decision = plan_.decisions[e];
      std::vector<Array> operands;
      for (size_t i = 0; i < equation.inputs.size(); ++i) {
        operands.push_back(
            bring(equation.inputs[i], decision.operands[i], plan_.unsummed[e][i], equation.site));
      }
      const Params& params = decision.block_params ? *decision.block_params : equation.params;
      std::vector<Array> results = bind(equation.prim, operands, params, equation.site);
      for (size_t j = 0; j < results.size(); ++j) {
        VarId var = equation.outputs[j];
        Shape expected = block_shape(mesh_, program_.aval(var).shape, decision.results[j]);
        KILN_CHECK(results[j].shape() == expected,
                   "jit partitioner: {} gave a block {} where its sharding rule promised {}",
                   prim_name(equation.prim), results[j].shape().to_string(), expected.to_string());
        blocks_[static_cast<size_t>(var)] = results[j];
      }
    }
    std::vector<Array> outputs;
    for (size_t j = 0; j < program_.outputs.size(); ++j) {
      outputs.push_back(bring(program_.outputs[j], out_specs[j], false, CallSite{}));
    }
    return outputs;
  }

 private:
  // The equations a result depends on: the others (a loss beside its gradient) would
  // still bring their operands, with collectives nothing reads.
  std::vector<bool> needed_equations() const {
    std::vector<bool> live(program_.num_vars(), false), needed(program_.equations.size(), false);
    for (VarId var : program_.outputs) live[static_cast<size_t>(var)] = true;
    for (size_t e = program_.equations.size(); e-- > 0;) {
      const Equation& equation = program_.equations[e];
      for (VarId var : equation.outputs) needed[e] = needed[e] || live[static_cast<size_t>(var)];
      if (!needed[e]) continue;
      for (VarId var : equation.inputs) live[static_cast<size_t>(var)] = true;
    }
    return needed;
  }

  int64_t size_of(const AxisList& axes) const {
    int64_t size = 1;
    for (const std::string& axis : axes) {
      for (const AxisText& mesh_axis : mesh_) size *= mesh_axis.name == axis ? mesh_axis.size : 1;
    }
    return size;
  }

  // The block of `var` split by `target`, its partial sums added (unless `unsummed`). Each
  // (variable, target) is brought once, however many equations read it.
  Array bring(VarId var, const ShardingSpec& target, bool unsummed, CallSite site) {
    auto key = std::tuple(var, target.to_string(), unsummed);
    if (auto found = brought_.find(key); found != brought_.end()) return found->second;
    const VarSharding& now = plan_.vars[static_cast<size_t>(var)];
    Array x = blocks_[static_cast<size_t>(var)];
    ShardingSpec have = now.spec;
    const size_t rank = have.dims.size();
    auto is_prefix = [](const AxisList& a, const AxisList& b) {
      return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
    };
    if (!unsummed && !now.partial.empty()) {
      // A sum the target splits along a dimension is reduce-scattered there; the rest is
      // all-reduced.
      AxisList summed;
      for (const std::string& axis : now.partial) {
        bool scattered = false;
        for (size_t d = 0; d < rank && !scattered; ++d) {
          const AxisList& want = target.dims[d];
          if (is_prefix(have.dims[d], want) && want.size() > have.dims[d].size() &&
              want[have.dims[d].size()] == axis) {
            x = psum_scatter(x, axis, static_cast<int64_t>(d), /*tiled=*/true, site);
            have.dims[d].push_back(axis);
            scattered = true;
          }
        }
        if (!scattered) summed.push_back(axis);
      }
      if (!summed.empty()) x = psum(x, axis_names(summed), site);
    }
    // Gather first: an axis that moves between dimensions leaves one before splitting the
    // other.
    for (size_t d = 0; d < rank; ++d) {
      const AxisList& want = target.dims[d];
      size_t common = 0;
      while (common < have.dims[d].size() && common < want.size() &&
             have.dims[d][common] == want[common]) {
        ++common;
      }
      if (common < have.dims[d].size()) {
        AxisList gathered(have.dims[d].begin() + static_cast<std::ptrdiff_t>(common),
                          have.dims[d].end());
        x = all_gather(x, axis_names(gathered), static_cast<int64_t>(d), /*tiled=*/true, site);
        have.dims[d].resize(common);
      }
    }
    for (size_t d = 0; d < rank; ++d) {
      const AxisList& want = target.dims[d];
      if (have.dims[d].size() == want.size()) continue;
      AxisList split(want.begin() + static_cast<std::ptrdiff_t>(have.dims[d].size()), want.end());
      int64_t parts = size_of(split);
      int64_t block = x.shape()[d] / parts;
      Array start_of_block = mul(axis_index(axis_names(split), site),
                                 scalar(static_cast<double>(block), DType::i32), site);
      std::vector<Array> start;
      for (size_t k = 0; k < rank; ++k) {
        start.push_back(k == d ? start_of_block : scalar(0, DType::i32));
      }
      Dims sizes = x.shape().dims();
      sizes[d] = block;
      // The primitive, not the op: these starts are never negative, so the op's counting of
      // negative starts from the end would only add three equations to every slice.
      if (block != x.shape()[d]) {
        x = bind1(prim::dynamic_slice, {x, stack(start)}, DynamicSliceParams{sizes}, site);
      }
      have.dims[d] = want;
    }
    brought_.emplace(key, x);
    return x;
  }

  static AxisNames axis_names(const AxisList& axes) {
    AxisNames names(std::initializer_list<std::string>{});
    names.names = axes;
    return names;
  }

  const Program& program_;
  const PropagatedSharding& plan_;
  const std::vector<AxisText>& mesh_;
  std::vector<Array> blocks_;
  std::map<std::tuple<VarId, std::string, bool>, Array> brought_;
};

}  // namespace

detail::FlatFunction partitioned_function(std::shared_ptr<const Program> program, Mesh mesh,
                                          std::vector<PartitionSpec> in_specs,
                                          std::vector<PartitionSpec> out_specs, std::string name,
                                          CallSite site) {
  if (in_specs.size() != program->inputs.size()) {
    fail(site,
         fmt::format("jit '{}': {} in_shardings for {} array argument(s) (leaves of the "
                     "arguments' pytrees)",
                     name, in_specs.size(), program->inputs.size()),
         "give one NamedSharding per array leaf, in the order the arguments flatten");
  }
  if (!out_specs.empty() && out_specs.size() != program->outputs.size()) {
    fail(site,
         fmt::format("jit '{}': {} out_shardings for {} result array(s)", name, out_specs.size(),
                     program->outputs.size()),
         "give one NamedSharding per result leaf, or none to keep the propagated shardings");
  }
  std::vector<AxisText> axes = mesh_axes(mesh);
  for (size_t i = 0; i < in_specs.size(); ++i) {
    const AbstractValue& aval = program->aval(program->inputs[i]);
    NamedSharding sharding(mesh, in_specs[i], site);
    sharding.check_shape(aval.shape, fmt::format("jit '{}' in_shardings[{}]", name, i), site);
    in_specs[i] = sharding.spec_for(aval.shape, site);
  }
  auto plan =
      std::make_shared<PropagatedSharding>(propagate_sharding(*program, in_specs, axes, name));
  if (out_specs.empty()) {
    for (VarId var : program->outputs)
      out_specs.push_back(plan->vars[static_cast<size_t>(var)].spec);
  }
  for (size_t j = 0; j < out_specs.size(); ++j) {
    const AbstractValue& aval = program->aval(program->outputs[j]);
    NamedSharding sharding(mesh, out_specs[j], site);
    sharding.check_shape(aval.shape, fmt::format("jit '{}' out_shardings[{}]", name, j), site);
    out_specs[j] = sharding.spec_for(aval.shape, site);
  }
  SpmdFunction body = [program, plan, axes, out_specs](const std::vector<Array>& blocks) {
    BlockRunner runner(*program, *plan, axes);
    return runner.run(blocks, out_specs);
  };
  SpmdFunction mapped = shard_map(body, std::move(mesh), in_specs, out_specs, site);
  return [mapped](std::span<const Array> args) {
    return mapped(std::vector<Array>(args.begin(), args.end()));
  };
}

}  // namespace kiln::spmd
