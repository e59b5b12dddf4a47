// The mesh whose axes the collectives refer to while shard_map traces its function: a
// collective op reads its axes' sizes from here into its params, so that the program it
// records stands on its own.
#pragma once

#include <vector>

#include "kiln/sharding.h"
#include "prims/spmd_text.h"

namespace kiln::spmd {

// The names and sizes of `mesh`'s axes, as the collectives' params hold them.
std::vector<AxisText> mesh_axes(const Mesh& mesh);

// The axes bound on this thread, or null outside shard_map's tracing.
const std::vector<AxisText>* bound_axes();

// Binds `axes` on this thread while it lives.
class BoundAxes {
 public:
  explicit BoundAxes(const std::vector<AxisText>& axes);
  ~BoundAxes();
  BoundAxes(const BoundAxes&) = delete;
  BoundAxes& operator=(const BoundAxes&) = delete;

 private:
  const std::vector<AxisText>* previous_;
};

}  // namespace kiln::spmd
