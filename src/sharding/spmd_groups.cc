// Collective groups of a mesh (spmd_groups.h).
#include "sharding/spmd_groups.h"

#include <algorithm>
#include <map>

namespace kiln::spmd {

std::vector<int64_t> coordinates(const std::vector<AxisText>& mesh, int64_t index) {
  std::vector<int64_t> coords(mesh.size());
  for (size_t a = mesh.size(); a-- > 0;) {
    coords[a] = index % mesh[a].size;
    index /= mesh[a].size;
  }
  return coords;
}

Groups groups_over(const std::vector<AxisText>& mesh, const std::vector<std::string>& axes) {
  int64_t devices = 1;
  for (const AxisText& axis : mesh) devices *= axis.size;
  std::vector<size_t> named;
  for (const std::string& name : axes) {
    for (size_t a = 0; a < mesh.size(); ++a) {
      if (mesh[a].name == name) named.push_back(a);
    }
  }
  Groups groups;
  groups.group_of.resize(static_cast<size_t>(devices));
  groups.index_of.resize(static_cast<size_t>(devices));
  // Groups are numbered in the order of their first member, so that the numbering (and
  // every loop over groups) follows the mesh order.
  std::map<std::vector<int64_t>, int64_t> group_by_rest;
  for (int64_t d = 0; d < devices; ++d) {
    std::vector<int64_t> coords = coordinates(mesh, d);
    std::vector<int64_t> rest;
    for (size_t a = 0; a < mesh.size(); ++a) {
      if (std::find(named.begin(), named.end(), a) == named.end()) rest.push_back(coords[a]);
    }
    int64_t index = 0;
    for (size_t a : named) index = index * mesh[a].size + coords[a];
    auto [found, fresh] = group_by_rest.emplace(rest, static_cast<int64_t>(groups.members.size()));
    if (fresh) groups.members.emplace_back();
    groups.group_of[static_cast<size_t>(d)] = found->second;
    groups.index_of[static_cast<size_t>(d)] = index;
  }
  int64_t size = devices / static_cast<int64_t>(std::max<size_t>(groups.members.size(), 1));
  for (auto& members : groups.members) members.assign(static_cast<size_t>(size), -1);
  for (int64_t d = 0; d < devices; ++d) {
    groups.members[static_cast<size_t>(groups.group_of[static_cast<size_t>(d)])]
                  [static_cast<size_t>(groups.index_of[static_cast<size_t>(d)])] = d;
  }
  return groups;
}

}  // namespace kiln::spmd
