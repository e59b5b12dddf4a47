// Running one collective equation of a shard_map's body: its groups, the algorithm
// (collective_algorithms.h; kiln::set_collective_algorithm), a trace event with the bytes
// it moved.
#pragma once

#include <span>
#include <vector>

#include "kiln/array.h"
#include "kiln/device.h"
#include "prims/registry.h"
#include "sharding/spmd_groups.h"

namespace kiln::spmd {

// `values` holds the equation's operand on each mesh device (mesh order), `devices` those
// devices; returns each device's result, committed to that device.
std::vector<Array> run_collective(PrimId prim, const CollectiveParams& params,
                                  const std::vector<AxisText>& mesh,
                                  std::span<Device* const> devices, std::span<const Array> values,
                                  CallSite site);

}  // namespace kiln::spmd
