// shard_map's shape rule and the layout its params describe (shard_map_rules.cc).
#pragma once

#include <span>
#include <vector>

#include "prims/registry.h"
#include "prims/spmd_text.h"

namespace kiln::spmd {

struct ShardMapLayout {
  std::vector<AxisText> mesh;
  std::vector<ShardingSpec> in_specs;
  std::vector<ShardingSpec> out_specs;
};

// The mesh and specs of `params`, checked against each other.
ShardMapLayout shard_map_layout(const ShardMapParams& params, const RuleContext& context);

std::vector<AbstractValue> shard_map_rule(std::span<const AbstractValue> inputs,
                                          const Params& params, const RuleContext& context);

}  // namespace kiln::spmd
