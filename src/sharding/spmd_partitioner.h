// jit's in_shardings / out_shardings (kiln/jit_types.h): a program traced on whole arrays,
// partitioned over a mesh. Propagation walks the program once, asking each primitive's
// sharding rule (PrimDef::sharding) how it runs on blocks; the partitioned program is one
// shard_map whose body runs every equation on blocks, with the collectives that bring each
// operand to the split its rule asks for (all_gather to make a dimension whole, axis_index
// and dynamic_slice to split one, psum to add partial sums, psum_scatter where the sum is
// wanted split). docs/sharding.md, *jit with shardings*.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/program.h"
#include "kiln/sharding.h"
#include "kiln/tracing.h"

namespace kiln::spmd {

// What propagation decided for every variable of a program.
struct VarSharding {
  ShardingSpec spec;                 // the split of its blocks, one entry per dimension
  std::vector<std::string> partial;  // mesh axes over which the blocks are terms of a sum
};
struct PropagatedSharding {
  std::vector<VarSharding> vars;            // by VarId
  std::vector<ShardingDecision> decisions;  // by equation
  std::vector<std::vector<bool>> unsummed;  // by equation and operand: used as terms
};

// Propagates `input_specs` (one per program input) through `program`. A primitive whose
// rule refuses is an error at its call site naming `name`.
PropagatedSharding propagate_sharding(const Program& program,
                                      const std::vector<ShardingSpec>& input_specs,
                                      const std::vector<AxisText>& mesh, const std::string& name);

// `program` as a function of whole arrays that runs as one shard_map over `mesh`: argument
// i split by in_specs[i], result j by out_specs[j] (empty: the specs propagation gives the
// results). Checks the counts and each spec against its array's shape, naming
// in_shardings[i] / out_shardings[j] of jit `name`.
detail::FlatFunction partitioned_function(std::shared_ptr<const Program> program, Mesh mesh,
                                          std::vector<PartitionSpec> in_specs,
                                          std::vector<PartitionSpec> out_specs, std::string name,
                                          CallSite site);

}  // namespace kiln::spmd
