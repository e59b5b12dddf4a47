// NamedSharding (kiln/sharding.h): which block of an array each mesh device holds.
#include <fmt/format.h>

#include "core/sharding_spec_checks.h"
#include "kiln/sharding.h"

namespace kiln {

Shape ShardBlock::shape() const {
  Shape shape;
  for (size_t i = 0; i < start.size(); ++i) shape.dims().push_back(limit[i] - start[i]);
  return shape;
}

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec, CallSite site)
    : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  for (size_t dim = 0; dim < spec_.dims.size(); ++dim) {
    for (const std::string& axis : spec_.dims[dim]) {
      if (!mesh_.find_axis(axis)) {
        fail(site,
             fmt::format("the spec {} splits dimension {} over mesh axis '{}', which {} does not "
                         "have",
                         spec_.to_string(), dim, axis, mesh_.to_string()),
             fmt::format("the mesh's axes are {}", mesh_.axis_names()));
      }
    }
  }
  if (std::optional<std::string> axis = repeated_axis(spec_)) {
    fail(site, repeated_axis_message("the spec", spec_, *axis), kRepeatedAxisHint);
  }
}

int64_t NamedSharding::parts(int64_t dim) const {
  if (dim < 0 || dim >= static_cast<int64_t>(spec_.dims.size())) return 1;
  int64_t parts = 1;
  for (const std::string& axis : spec_.dims[static_cast<size_t>(dim)]) {
    parts *= mesh_.axes()[*mesh_.find_axis(axis)].size;
  }
  return parts;
}

void NamedSharding::check_shape(const Shape& shape, std::string_view what, CallSite site) const {
  if (static_cast<int64_t>(spec_.dims.size()) > shape.rank()) {
    fail(site,
         fmt::format("{} of shape {} has {} dimension(s), but the spec {} names {}", what,
                     shape.to_string(), shape.rank(), spec_.to_string(), spec_.dims.size()),
         "a spec has at most one entry per dimension");
  }
  for (int64_t dim = 0; dim < static_cast<int64_t>(spec_.dims.size()); ++dim) {
    int64_t parts = this->parts(dim);
    if (shape[dim] % parts != 0) {
      std::vector<std::string> axes;
      for (const std::string& axis : spec_.dims[static_cast<size_t>(dim)]) {
        axes.push_back(fmt::format("{} (size {})", axis, mesh_.axis_size(axis)));
      }
      fail(site,
           fmt::format("dimension {} of {} (shape {}, size {}) is split over mesh axis {} into {} "
                       "parts, which do not divide {}",
                       dim, what, shape.to_string(), shape[dim], fmt::join(axes, " x "), parts,
                       shape[dim]),
           "pad that dimension to a multiple, or split another one");
    }
  }
}

PartitionSpec NamedSharding::spec_for(const Shape& shape, CallSite site) const {
  check_shape(shape, "the array", site);
  PartitionSpec full = spec_;
  full.dims.resize(static_cast<size_t>(shape.rank()));
  full.sharded = true;
  return full;
}

Shape NamedSharding::shard_shape(const Shape& shape, CallSite site) const {
  check_shape(shape, "the array", site);
  Shape out = shape;
  for (int64_t dim = 0; dim < shape.rank(); ++dim) out[dim] = shape[dim] / parts(dim);
  return out;
}

ShardBlock NamedSharding::block(const Shape& shape, int64_t index, CallSite site) const {
  if (index < 0 || index >= mesh_.size()) {
    fail(site, fmt::format("mesh device {} does not exist: {} has {}", index, mesh_.to_string(),
                           mesh_.size()));
  }
  Shape piece = shard_shape(shape, site);
  Dims coords = mesh_.coordinates(index);
  ShardBlock block;
  for (int64_t dim = 0; dim < shape.rank(); ++dim) {
    // The dimension's axes, major to minor, number its parts like digits.
    int64_t part = 0;
    if (dim < static_cast<int64_t>(spec_.dims.size())) {
      for (const std::string& axis : spec_.dims[static_cast<size_t>(dim)]) {
        size_t position = *mesh_.find_axis(axis);
        part = part * mesh_.axes()[position].size + coords[position];
      }
    }
    block.start.push_back(part * piece[dim]);
    block.limit.push_back((part + 1) * piece[dim]);
  }
  return block;
}

int64_t NamedSharding::replicas() const {
  int64_t used = 1;
  for (int64_t dim = 0; dim < static_cast<int64_t>(spec_.dims.size()); ++dim) used *= parts(dim);
  return mesh_.size() / used;
}

std::string NamedSharding::to_string() const {
  PartitionSpec shown = spec_;
  shown.sharded = true;  // {} for a spec that splits nothing
  return fmt::format("NamedSharding({}, {})", mesh_.to_string(), shown.to_string());
}

}  // namespace kiln
