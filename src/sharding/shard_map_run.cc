// Running shard_map: the body's equations in order, each on every device of the mesh in
// lockstep. An ordinary equation runs on each device's values (on that device, since its
// blocks are committed there); a collective combines the devices' values through the
// reference collectives. Lockstep keeps the collectives' order and their reductions
// independent of threads and timing.
#include <fmt/format.h>

#include "ir/program.h"
#include "kiln/sharding.h"
#include "prims/bind.h"
#include "prims/ids/spmd.h"
#include "sharding/collective_dispatch.h"
#include "sharding/shard_map_rules.h"
#include "sharding/shard_map_run.h"
#include "sharding/sharded_blocks.h"
#include "transforms/trace.h"

namespace kiln::spmd {
namespace {

Mesh mesh_of(const std::vector<AxisText>& axes, const Dims& device_ids, CallSite site) {
  std::vector<MeshAxis> mesh_axes;
  for (const AxisText& axis : axes) mesh_axes.push_back({axis.name, axis.size});
  std::vector<Device*> devices;
  for (int64_t id : device_ids) devices.push_back(&device(static_cast<int>(id), site));
  return Mesh(std::move(mesh_axes), std::move(devices), site);
}

}  // namespace

LockstepRun begin_lockstep(std::span<const Array> inputs, const ShardMapParams& params,
                           CallSite site) {
  RuleContext context{prim_def(prim::shard_map), site};
  ShardMapLayout layout = shard_map_layout(params, context);
  Mesh mesh = mesh_of(layout.mesh, params.devices, site);
  const Program& body = *params.body.program;
  auto devices = static_cast<size_t>(mesh.size());
  LockstepRun run{params, std::move(layout), std::move(mesh),
                  std::vector<std::vector<Array>>(devices, std::vector<Array>(body.num_vars()))};
  for (size_t i = 0; i < inputs.size(); ++i) {
    NamedSharding sharding(run.mesh, run.layout.in_specs[i], site);
    std::optional<NamedSharding> current = sharding_of(inputs[i]);
    Array placed =
        current && *current == sharding ? inputs[i] : device_put(inputs[i], sharding, site);
    std::vector<Array> blocks = shards(placed, site);
    for (size_t d = 0; d < devices; ++d) {
      run.env[d][static_cast<size_t>(body.inputs[i])] = blocks[d];
    }
  }
  for (size_t c = 0; c < body.constants.size(); ++c) {
    for (size_t d = 0; d < devices; ++d) {
      run.env[d][static_cast<size_t>(body.constants[c])] = body.constant_values[c];
    }
  }
  return run;
}

void run_collective_equation(LockstepRun& run, const Equation& equation) {
  if (equation.prim == prim::shard_map) {
    fail(equation.site, "shard_map: a shard_map inside another is not supported");
  }
  std::vector<Array> values;
  for (std::vector<Array>& device_env : run.env) {
    values.push_back(equation.inputs.empty() ? Array()
                                             : device_env[static_cast<size_t>(equation.inputs[0])]);
  }
  std::vector<Array> results =
      run_collective(equation.prim, std::get<CollectiveParams>(equation.params), run.layout.mesh,
                     run.mesh.devices(), values, equation.site);
  for (size_t d = 0; d < run.env.size(); ++d) {
    run.env[d][static_cast<size_t>(equation.outputs[0])] = std::move(results[d]);
  }
}

std::vector<Array> finish_lockstep(LockstepRun& run, std::span<const Array> inputs, CallSite site) {
  RuleContext context{prim_def(prim::shard_map), site};
  const Program& body = *run.params.body.program;
  std::vector<AbstractValue> in_types;
  for (const Array& input : inputs) in_types.push_back(input.aval());
  std::vector<AbstractValue> out_types = shard_map_rule(in_types, Params(run.params), context);
  std::vector<Array> outputs;
  for (size_t j = 0; j < body.outputs.size(); ++j) {
    NamedSharding sharding(run.mesh, out_types[j].sharding, site);
    std::vector<Array> blocks;
    for (std::vector<Array>& device_env : run.env) {
      blocks.push_back(device_env[static_cast<size_t>(body.outputs[j])]);
    }
    outputs.push_back(assemble_sharded(out_types[j], std::move(blocks), sharding, site));
  }
  return outputs;
}

std::vector<Array> shard_map_impl(std::span<const Array> inputs, const Params& params,
                                  CallSite site) {
  const auto& p = std::get<ShardMapParams>(params);
  LockstepRun run = begin_lockstep(inputs, p, site);
  std::vector<Array> operands;
  for (const Equation& equation : p.body.program->equations) {
    ScopeOverride scope(equation.scope);
    if (prim_def(equation.prim).family == Family::kSpmd) {
      run_collective_equation(run, equation);
      continue;
    }
    for (std::vector<Array>& device_env : run.env) {
      operands.clear();
      for (VarId var : equation.inputs) operands.push_back(device_env[static_cast<size_t>(var)]);
      std::vector<Array> results = bind(equation.prim, operands, equation.params, equation.site);
      for (size_t r = 0; r < results.size(); ++r) {
        device_env[static_cast<size_t>(equation.outputs[r])] = std::move(results[r]);
      }
    }
  }
  return finish_lockstep(run, inputs, site);
}

std::vector<Array> collective_outside_shard_map(std::span<const Array>, const Params& params,
                                                CallSite site) {
  const auto& p = std::get<CollectiveParams>(params);
  fail(site,
       fmt::format("a collective over mesh axes '{}' ran outside shard_map's lockstep run (inside "
                   "scan, cond or while_loop in a shard_map's function, or bound directly)",
                   p.axes),
       "call collectives at the top level of the function given to kiln::shard_map; inside "
       "control flow they are not supported yet");
}

}  // namespace kiln::spmd
