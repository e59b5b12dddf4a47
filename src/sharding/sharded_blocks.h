// A sharded array made from blocks already on their devices (shard_map's results).
#pragma once

#include <vector>

#include "kiln/sharding.h"

namespace kiln {

// `blocks[i]` is mesh device i's block of an array of type `aval` split by `sharding`
// (each moved to, and committed on, that device here). aval's sharding is set from it.
Array assemble_sharded(AbstractValue aval, std::vector<Array> blocks, const NamedSharding& sharding,
                       CallSite site);

}  // namespace kiln
