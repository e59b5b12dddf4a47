// Running shard_map: the body's equations in order, each on every device of the mesh in
// lockstep. An ordinary equation runs on each device's values (on that device, since its
// blocks are committed there); a collective combines the devices' values through the
// reference collectives. Lockstep keeps the collectives' order and their reductions
// independent of threads and timing.
#include <fmt/format.h>

#include "ir/program.h"
#include "kiln/sharding.h"
#include "prims/bind.h"
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

std::vector<Array> shard_map_impl(std::span<const Array> inputs, const Params& params,
                                  CallSite site) {
  const auto& p = std::get<ShardMapParams>(params);
  RuleContext context{prim_def(PrimId::shard_map), site};
  ShardMapLayout layout = shard_map_layout(p, context);
  Mesh mesh = mesh_of(layout.mesh, p.devices, site);
  const Program& body = *p.body.program;
  auto devices = static_cast<size_t>(mesh.size());
  // env[d][var]: device d's value of each body variable.
  std::vector<std::vector<Array>> env(devices, std::vector<Array>(body.num_vars()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    NamedSharding sharding(mesh, layout.in_specs[i], site);
    std::optional<NamedSharding> current = sharding_of(inputs[i]);
    Array placed =
        current && *current == sharding ? inputs[i] : device_put(inputs[i], sharding, site);
    std::vector<Array> blocks = shards(placed, site);
    for (size_t d = 0; d < devices; ++d) env[d][static_cast<size_t>(body.inputs[i])] = blocks[d];
  }
  for (size_t c = 0; c < body.constants.size(); ++c) {
    for (size_t d = 0; d < devices; ++d) {
      env[d][static_cast<size_t>(body.constants[c])] = body.constant_values[c];
    }
  }
  std::vector<Array> operands;
  for (const Equation& equation : body.equations) {
    ScopeOverride scope(equation.scope);
    const PrimDef& prim = prim_def(equation.prim);
    if (prim.family == Family::kSpmd) {
      if (equation.prim == PrimId::shard_map) {
        fail(equation.site, "shard_map: a shard_map inside another is not supported");
      }
      std::vector<Array> values;
      for (size_t d = 0; d < devices; ++d) {
        values.push_back(equation.inputs.empty() ? Array()
                                                 : env[d][static_cast<size_t>(equation.inputs[0])]);
      }
      std::vector<Array> results =
          run_collective(equation.prim, std::get<CollectiveParams>(equation.params), layout.mesh,
                         mesh.devices(), values, equation.site);
      for (size_t d = 0; d < devices; ++d) {
        env[d][static_cast<size_t>(equation.outputs[0])] = std::move(results[d]);
      }
      continue;
    }
    for (size_t d = 0; d < devices; ++d) {
      operands.clear();
      for (VarId var : equation.inputs) operands.push_back(env[d][static_cast<size_t>(var)]);
      std::vector<Array> results = bind(equation.prim, operands, equation.params, equation.site);
      for (size_t r = 0; r < results.size(); ++r) {
        env[d][static_cast<size_t>(equation.outputs[r])] = std::move(results[r]);
      }
    }
  }
  std::vector<AbstractValue> in_types;
  for (const Array& input : inputs) in_types.push_back(input.aval());
  std::vector<AbstractValue> out_types = shard_map_rule(in_types, params, context);
  std::vector<Array> outputs;
  for (size_t j = 0; j < body.outputs.size(); ++j) {
    NamedSharding sharding(mesh, out_types[j].sharding, site);
    std::vector<Array> blocks;
    for (size_t d = 0; d < devices; ++d)
      blocks.push_back(env[d][static_cast<size_t>(body.outputs[j])]);
    outputs.push_back(assemble_sharded(out_types[j], std::move(blocks), sharding, site));
  }
  return outputs;
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
