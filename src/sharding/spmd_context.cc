// The mesh axes bound while shard_map traces (spmd_context.h).
#include "sharding/spmd_context.h"

namespace kiln::spmd {
namespace {
thread_local const std::vector<AxisText>* bound = nullptr;
}  // namespace

std::vector<AxisText> mesh_axes(const Mesh& mesh) {
  std::vector<AxisText> axes;
  for (const MeshAxis& axis : mesh.axes()) axes.push_back({axis.name, axis.size});
  return axes;
}

const std::vector<AxisText>* bound_axes() {
  return bound;
}

BoundAxes::BoundAxes(const std::vector<AxisText>& axes) : previous_(bound) {
  bound = &axes;
}

BoundAxes::~BoundAxes() {
  bound = previous_;
}

}  // namespace kiln::spmd
