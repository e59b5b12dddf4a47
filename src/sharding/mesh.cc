// Mesh (kiln/sharding.h): devices laid out row-major over named axes.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "base/check.h"
#include "kiln/sharding.h"

namespace kiln {
namespace {

std::vector<Device*> first_devices(const std::vector<MeshAxis>& axes, CallSite site) {
  int64_t wanted = 1;
  for (const MeshAxis& axis : axes) {
    if (axis.size < 1) break;  // the constructor names the bad axis
    if (__builtin_mul_overflow(wanted, axis.size, &wanted)) break;
  }
  auto all = kiln::devices();
  if (wanted > static_cast<int64_t>(all.size())) {
    std::vector<std::string> sizes;
    for (const MeshAxis& axis : axes) sizes.push_back(fmt::format("{}: {}", axis.name, axis.size));
    fail(site,
         fmt::format("a mesh {{{}}} needs {} devices, but this process has {}",
                     fmt::join(sizes, ", "), wanted, all.size()),
         fmt::format("run with KILN_CPU_DEVICES={} for that many logical CPU devices, or use "
                     "smaller axes",
                     wanted));
  }
  return {all.begin(), all.begin() + std::max<int64_t>(wanted, 0)};
}

}  // namespace

Mesh::Mesh(std::vector<MeshAxis> axes, CallSite site)
    : Mesh(axes, first_devices(axes, site), site) {}

Mesh::Mesh(std::vector<MeshAxis> axes, std::vector<Device*> devices, CallSite site)
    : axes_(std::move(axes)), devices_(std::move(devices)) {
  if (axes_.empty()) fail(site, "a mesh needs at least one axis", "as in Mesh({{\"data\", 2}})");
  std::set<std::string> names;
  int64_t product = 1;
  for (const MeshAxis& axis : axes_) {
    if (axis.name.empty() || axis.name == "_") {
      fail(site, fmt::format("mesh axis name '{}' is not a name", axis.name),
           "name each axis, e.g. data or model ('_' marks a dimension no axis splits)");
    }
    if (!names.insert(axis.name).second) {
      fail(site, fmt::format("mesh axis '{}' appears twice", axis.name),
           "give each axis its own name");
    }
    if (axis.size < 1) {
      fail(site,
           fmt::format("mesh axis '{}' has size {}; a size is at least 1", axis.name, axis.size));
    }
    if (__builtin_mul_overflow(product, axis.size, &product)) {
      fail(site, "the mesh's axis sizes overflow int64 when multiplied");
    }
  }
  if (product != static_cast<int64_t>(devices_.size())) {
    fail(site,
         fmt::format("{} has {} positions, but {} device(s) were given", to_string(), product,
                     devices_.size()),
         "the product of the axis sizes must equal the number of devices");
  }
  std::set<Device*> distinct;
  for (Device* device : devices_) {
    if (device == nullptr) fail(site, "a mesh's device is null");
    if (!distinct.insert(device).second) {
      fail(site, fmt::format("device {} appears twice in {}", device->to_string(), to_string()),
           "each device holds one position of a mesh");
    }
  }
}

std::optional<size_t> Mesh::find_axis(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return i;
  }
  return std::nullopt;
}

int64_t Mesh::axis_size(std::string_view name, CallSite site) const {
  std::optional<size_t> axis = find_axis(name);
  if (!axis) {
    fail(site, fmt::format("{} has no axis '{}'", to_string(), name),
         fmt::format("its axes are {}", axis_names()));
  }
  return axes_[*axis].size;
}

std::string Mesh::axis_names() const {
  std::vector<std::string> names;
  for (const MeshAxis& axis : axes_) names.push_back(axis.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

Dims Mesh::coordinates(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "mesh device index out of range");
  Dims coords(axes_.size(), 0);
  for (size_t i = axes_.size(); i-- > 0;) {
    coords[i] = index % axes_[i].size;
    index /= axes_[i].size;
  }
  return coords;
}

std::string Mesh::to_string() const {
  std::vector<std::string> parts;
  for (const MeshAxis& axis : axes_) parts.push_back(fmt::format("{}: {}", axis.name, axis.size));
  return fmt::format("Mesh{{{}}}", fmt::join(parts, ", "));
}

}  // namespace kiln
