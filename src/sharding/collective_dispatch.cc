// run_collective (collective_dispatch.h) and the choice of algorithm.
#include "sharding/collective_dispatch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "base/trace_events.h"
#include "kiln/ops.h"
#include "prims/ids/spmd.h"
#include "sharding/collective_algorithms.h"
#include "sharding/collective_traffic.h"

namespace kiln {
namespace {

// kAuto's all-reduce is the tree, at every size: between the logical devices of one
// process every copy costs the same shared memory bandwidth whichever device makes it, so
// the ring's saving (no device moves more than 2 (n-1)/n of the bytes) buys nothing, while
// each of its 2 (n-1) steps pays a hand-off between device threads and it slices and
// concatenates segments. Measured with `kiln bench collectives`, the tree is 1.5x to 1.8x
// faster on 4 devices at every size from 4 KiB to 64 MiB, and 1.3x to 2.0x on 2 devices
// from 64 KiB (0.8x below, where both take two hand-offs; docs/performance.md,
// *Collectives*). The ring stays for explicit use and for links that are separate
// (processes).
CollectiveAlgorithm from_environment() {
  const char* value = std::getenv("KILN_COLLECTIVES");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) {
    return CollectiveAlgorithm::kAuto;
  }
  if (std::strcmp(value, "ref") == 0) return CollectiveAlgorithm::kReference;
  if (std::strcmp(value, "tree") == 0) return CollectiveAlgorithm::kTree;
  if (std::strcmp(value, "ring") == 0) return CollectiveAlgorithm::kRing;
  fail(CallSite(), fmt::format("KILN_COLLECTIVES={} is not an algorithm", value),
       "use auto (the default), ref, tree or ring");
}

std::atomic<CollectiveAlgorithm>& setting() {
  static std::atomic<CollectiveAlgorithm> algorithm{from_environment()};
  return algorithm;
}

}  // namespace

void set_collective_algorithm(CollectiveAlgorithm algorithm) {
  setting().store(algorithm, std::memory_order_relaxed);
}

CollectiveAlgorithm collective_algorithm() {
  return setting().load(std::memory_order_relaxed);
}

namespace spmd {
namespace {

int64_t nonnegative_axis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

std::vector<Array> run_group(PrimId prim, const CollectiveParams& p, const Group& group,
                             CollectiveAlgorithm chosen) {
  const int64_t rank = group.size() > 0 ? group.value(0).rank() : 0;
  auto algorithm = [&](bool all_reduce) {
    if (chosen != CollectiveAlgorithm::kAuto) return chosen;
    return all_reduce ? CollectiveAlgorithm::kTree : CollectiveAlgorithm::kRing;
  };
  switch (prim) {
    case prim::psum:
      return all_reduce(group, Reduction::kSum, algorithm(true));
    case prim::pmax:
      return all_reduce(group, Reduction::kMax, algorithm(true));
    case prim::pmean: {
      std::vector<Array> out = all_reduce(group, Reduction::kSum, algorithm(true));
      for (Array& x : out) {
        x = div(x,
                full(Shape{}, static_cast<double>(group.size()), x.dtype(), nullptr, group.site()),
                group.site());
      }
      return out;
    }
    case prim::all_gather:
      return all_gather(group, nonnegative_axis(p.dimension, rank + (p.tiled ? 0 : 1)), p.tiled,
                        algorithm(false));
    case prim::psum_scatter:
      return reduce_scatter(group, nonnegative_axis(p.dimension, rank), p.tiled, algorithm(false));
    case prim::all_to_all:
      return all_to_all(group, nonnegative_axis(p.split_dimension, rank),
                        nonnegative_axis(p.dimension, rank), algorithm(false));
    case prim::ppermute:
      return permute(group, p.permutation, algorithm(false));
    default:
      KILN_CHECK(false, "{} is not a collective with operands", prim_name(prim));
  }
}

}  // namespace

std::vector<Array> run_collective(PrimId prim, const CollectiveParams& p,
                                  const std::vector<AxisText>& mesh,
                                  std::span<Device* const> devices, std::span<const Array> values,
                                  CallSite site) {
  std::vector<std::string> axes = split_axes(p.axes);
  if (prim == prim::ppermute) {
    // lax.ppermute numbers the devices of a group over several axes in the mesh's order
    // of the axes, whichever order they are named in: ({"b", "a"}) on a mesh {a, b}
    // permutes as ({"a", "b"}) does.
    std::vector<std::string> in_mesh_order;
    for (const AxisText& axis : mesh) {
      if (std::find(axes.begin(), axes.end(), axis.name) != axes.end()) {
        in_mesh_order.push_back(axis.name);
      }
    }
    axes = std::move(in_mesh_order);
  }
  Groups groups = groups_over(mesh, axes);
  std::vector<Array> out(devices.size());
  if (prim == prim::axis_index) {
    for (size_t d = 0; d < devices.size(); ++d) {
      out[d] = full(Shape{}, static_cast<double>(groups.index_of[d]), DType::i32, devices[d], site);
    }
    return out;
  }
  trace::Span span("collective", prim_name(prim));
  const int64_t sent_before = total_bytes_sent();
  const CollectiveAlgorithm chosen = collective_algorithm();
  for (const std::vector<int64_t>& members : groups.members) {
    std::vector<Array> group_values;
    std::vector<Device*> group_devices;
    for (int64_t d : members) {
      group_values.push_back(values[static_cast<size_t>(d)]);
      group_devices.push_back(devices[static_cast<size_t>(d)]);
    }
    std::vector<Array> results =
        run_group(prim, p, Group(std::move(group_values), std::move(group_devices), site), chosen);
    for (size_t k = 0; k < members.size(); ++k) out[static_cast<size_t>(members[k])] = results[k];
  }
  span.arg("bytes", static_cast<double>(total_bytes_sent() - sent_before));
  span.arg("group_size", static_cast<double>(groups.size()));
  return out;
}

}  // namespace spmd
}  // namespace kiln
