// kiln::shard_map (kiln/sharding.h): checks the arguments against their specs, traces the
// function on the blocks' types with the mesh's axes bound (so that collectives know their
// sizes) and binds the shard_map primitive.
#include <fmt/format.h>

#include "kiln/sharding.h"
#include "prims/bind.h"
#include "prims/ids/spmd.h"
#include "prims/spmd_text.h"
#include "sharding/spmd_context.h"
#include "transforms/control_flow/sub_programs.h"

namespace kiln {
namespace {

// The results' specs, known once the function is traced: a fixed list, or (over trees) the
// specs of the traced result's leaves.
using OutSpecs = std::function<std::vector<PartitionSpec>(const std::vector<Array>& results)>;

std::vector<Array> shard_map_call(const SpmdFunction& f, const Mesh& mesh,
                                  const std::vector<PartitionSpec>& in_specs,
                                  const OutSpecs& out_specs_of, const std::vector<Array>& args,
                                  CallSite site) {
  if (spmd::bound_axes() != nullptr) {
    fail(site, "shard_map: called inside another shard_map's function, which is not supported",
         "give the outer shard_map the whole mesh and use collectives over its axes");
  }
  if (args.size() != in_specs.size()) {
    fail(site,
         fmt::format("shard_map: {} argument(s) for {} in_specs", args.size(), in_specs.size()),
         "give one PartitionSpec per argument ({} for an argument every device holds whole)");
  }
  std::vector<AbstractValue> block_types;
  for (size_t i = 0; i < args.size(); ++i) {
    NamedSharding sharding(mesh, in_specs[i], site);
    std::string what = fmt::format("shard_map argument {}", i);
    sharding.check_shape(args[i].shape(), what, site);
    block_types.push_back(control_flow::strong_type(
        AbstractValue(sharding.shard_shape(args[i].shape(), site), args[i].dtype())));
  }
  std::vector<spmd::AxisText> axes = spmd::mesh_axes(mesh);
  std::vector<PartitionSpec> out_specs;
  detail::FlatFunction body = [&](std::span<const Array> blocks) {
    std::vector<Array> results = f(std::vector<Array>(blocks.begin(), blocks.end()));
    out_specs = out_specs_of(results);
    if (results.size() != out_specs.size()) {
      fail(site, fmt::format("shard_map: the function returned {} result(s) for {} out_specs",
                             results.size(), out_specs.size()));
    }
    control_flow::make_strong(results, site);
    return results;
  };
  control_flow::ClosedProgram closed;
  {
    spmd::BoundAxes bound(axes);
    closed = control_flow::trace_closed(body, block_types, site);
  }
  ShardMapParams params;
  params.body = closed.program;
  params.mesh = spmd::format_mesh(axes);
  for (Device* device : mesh.devices()) params.devices.push_back(device->id());
  // Values the function captured are on every device whole.
  std::vector<PartitionSpec> operand_specs(closed.consts.size(),
                                           PartitionSpec(std::vector<std::vector<std::string>>{}));
  operand_specs.insert(operand_specs.end(), in_specs.begin(), in_specs.end());
  params.in_specs = spmd::format_specs(operand_specs);
  params.out_specs = spmd::format_specs(out_specs);
  std::vector<Array> operands = closed.consts;
  operands.insert(operands.end(), args.begin(), args.end());
  return bind(prim::shard_map, operands, params, site);
}

}  // namespace

SpmdFunction shard_map(SpmdFunction f, Mesh mesh, std::vector<PartitionSpec> in_specs,
                       std::vector<PartitionSpec> out_specs, CallSite site) {
  return [f = std::move(f), mesh = std::move(mesh), in_specs = std::move(in_specs),
          out_specs = std::move(out_specs), site](const std::vector<Array>& args) {
    return shard_map_call(
        f, mesh, in_specs, [&](const std::vector<Array>&) { return out_specs; }, args, site);
  };
}

TreeSpmdFunction shard_map(TreeSpmdFunction f, Mesh mesh, SpecTree in_specs, SpecTree out_specs,
                           CallSite site) {
  return [f = std::move(f), mesh = std::move(mesh), in_specs = std::move(in_specs),
          out_specs = std::move(out_specs), site](const Tree& args) {
    TreeDef in_def = args.structure();
    Tree result_like;  // the traced result: its structure and its leaves' specs
    SpmdFunction flat = [&](const std::vector<Array>& blocks) {
      result_like = f(unflatten(in_def, blocks, site));
      return result_like.leaves();
    };
    std::vector<Array> results = shard_map_call(
        flat, mesh, in_specs.leaf_specs(args, "shard_map's in_specs", site),
        [&](const std::vector<Array>&) {
          return out_specs.leaf_specs(result_like, "shard_map's out_specs", site);
        },
        args.leaves(), site);
    return unflatten(result_like.structure(), results, site);
  };
}

}  // namespace kiln
