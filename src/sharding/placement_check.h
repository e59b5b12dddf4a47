// `kiln devices --check`: places test arrays on this process's devices by several named
// shardings and checks that each device holds the block its sharding says, with the
// values of that block, that an op on each block runs on that block's device and gives the
// unsharded result's bits there, and that gathering gives the array back.
#pragma once

#include <string>
#include <vector>

namespace kiln::sharding {

struct PlacementCheck {
  std::string mesh;                   // "Mesh{data: 2, model: 2}"
  std::string spec;                   // "{data,_}"
  std::string shape;                  // "[16,6]"
  int64_t devices = 0;                // holding a block
  std::vector<std::string> problems;  // empty: every check passed
};

// One row per (mesh, spec): over all devices as one axis, and as two axes when the count
// is even and at least 4.
std::vector<PlacementCheck> check_placement();

}  // namespace kiln::sharding
