// shard_map's impl rule (shard_map_run.cc), the pieces a faster run shares with it, and
// the collectives' impl outside it.
#pragma once

#include <span>
#include <vector>

#include "ir/program.h"
#include "kiln/sharding.h"
#include "prims/registry.h"
#include "sharding/shard_map_rules.h"

namespace kiln::spmd {

// One shard_map call in progress: the mesh and, per device, the value of each body
// variable that has one so far.
struct LockstepRun {
  const ShardMapParams& params;
  ShardMapLayout layout;
  Mesh mesh;
  std::vector<std::vector<Array>> env;  // env[device][var]
};

// The inputs placed as in_specs say (device_put where they are not already), each device's
// block bound to the body's input variable, and the body's constants bound on every device.
LockstepRun begin_lockstep(std::span<const Array> inputs, const ShardMapParams& params,
                           CallSite site);
// A collective equation of the body, run across the devices.
void run_collective_equation(LockstepRun& run, const Equation& equation);
// The body's outputs, each assembled from its per-device blocks as out_specs say.
std::vector<Array> finish_lockstep(LockstepRun& run, std::span<const Array> inputs, CallSite site);

// The reference run: the body's equations in order, each on every device, eagerly.
std::vector<Array> shard_map_impl(std::span<const Array> inputs, const Params& params,
                                  CallSite site);
// A collective bound where no lockstep run handles it: an error saying where they work.
[[noreturn]] std::vector<Array> collective_outside_shard_map(std::span<const Array> inputs,
                                                             const Params& params, CallSite site);

}  // namespace kiln::spmd
