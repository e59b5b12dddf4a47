// shard_map's impl rule (shard_map_run.cc), and the collectives' impl outside it.
#pragma once

#include <span>
#include <vector>

#include "prims/registry.h"

namespace kiln::spmd {

std::vector<Array> shard_map_impl(std::span<const Array> inputs, const Params& params,
                                  CallSite site);
// A collective bound where no lockstep run handles it: an error saying where they work.
[[noreturn]] std::vector<Array> collective_outside_shard_map(std::span<const Array> inputs,
                                                             const Params& params, CallSite site);

}  // namespace kiln::spmd
