// The collective ops of kiln/sharding.h: each checks its axes against the mesh shard_map
// bound while tracing, records their total size in its params and binds its primitive.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/sharding.h"
#include "prims/bind.h"
#include "prims/ids/spmd.h"
#include "sharding/spmd_context.h"

namespace kiln {
namespace {

CollectiveParams params_for(std::string_view op, const AxisNames& axes, CallSite site) {
  const std::vector<spmd::AxisText>* mesh = spmd::bound_axes();
  if (axes.names.empty()) fail(site, fmt::format("{}: names no mesh axis", op));
  if (mesh == nullptr) {
    fail(site,
         fmt::format("{}: mesh axis '{}' is not bound here: collectives run inside the function "
                     "kiln::shard_map maps over a mesh",
                     op, axes.names[0]),
         "call it from the function given to kiln::shard_map (docs/sharding.md)");
  }
  CollectiveParams p;
  p.axes = spmd::join_axes(axes.names);
  for (size_t i = 0; i < axes.names.size(); ++i) {
    const std::string& name = axes.names[i];
    auto found = std::find_if(mesh->begin(), mesh->end(),
                              [&](const spmd::AxisText& axis) { return axis.name == name; });
    if (found == mesh->end()) {
      std::vector<std::string> known;
      for (const spmd::AxisText& axis : *mesh) known.push_back(axis.name);
      fail(site, fmt::format("{}: the mesh has no axis '{}' (its axes: {})", op, name,
                             fmt::join(known, ", ")));
    }
    if (std::find(axes.names.begin(), axes.names.begin() + static_cast<std::ptrdiff_t>(i), name) !=
        axes.names.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail(site, fmt::format("{}: names mesh axis '{}' twice", op, name));
    }
    p.axis_size *= found->size;
  }
  return p;
}

}  // namespace

Array psum(const Array& x, const AxisNames& axes, CallSite site) {
  return bind1(prim::psum, {x}, params_for("psum", axes, site), site);
}

Array pmean(const Array& x, const AxisNames& axes, CallSite site) {
  return bind1(prim::pmean, {x}, params_for("pmean", axes, site), site);
}

Array pmax(const Array& x, const AxisNames& axes, CallSite site) {
  return bind1(prim::pmax, {x}, params_for("pmax", axes, site), site);
}

Array all_gather(const Array& x, const AxisNames& axes, int64_t axis, bool tiled, CallSite site) {
  CollectiveParams p = params_for("all_gather", axes, site);
  p.dimension = axis;
  p.tiled = tiled;
  return bind1(prim::all_gather, {x}, p, site);
}

Array psum_scatter(const Array& x, const AxisNames& axes, int64_t dimension, bool tiled,
                   CallSite site) {
  CollectiveParams p = params_for("psum_scatter", axes, site);
  p.dimension = dimension;
  p.tiled = tiled;
  return bind1(prim::psum_scatter, {x}, p, site);
}

Array all_to_all(const Array& x, const AxisNames& axes, int64_t split_axis, int64_t concat_axis,
                 CallSite site) {
  CollectiveParams p = params_for("all_to_all", axes, site);
  p.split_dimension = split_axis;
  p.dimension = concat_axis;
  p.tiled = true;
  return bind1(prim::all_to_all, {x}, p, site);
}

Array ppermute(const Array& x, const AxisNames& axes,
               const std::vector<std::pair<int64_t, int64_t>>& permutation, CallSite site) {
  CollectiveParams p = params_for("ppermute", axes, site);
  for (const auto& [source, destination] : permutation) {
    p.permutation.push_back(source);
    p.permutation.push_back(destination);
  }
  return bind1(prim::ppermute, {x}, p, site);
}

Array axis_index(const AxisNames& axes, CallSite site) {
  return bind1(prim::axis_index, {}, params_for("axis_index", axes, site), site);
}

int64_t axis_size(const AxisNames& axes, CallSite site) {
  return params_for("axis_size", axes, site).axis_size;
}

bool axis_is_bound(std::string_view name) {
  const std::vector<spmd::AxisText>* mesh = spmd::bound_axes();
  return mesh != nullptr &&
         std::any_of(mesh->begin(), mesh->end(),
                     [&](const spmd::AxisText& axis) { return axis.name == name; });
}

}  // namespace kiln
