// Meshes and named shardings, as in jax.sharding. A Mesh arranges devices in a grid with
// named axes; a PartitionSpec (kiln::ShardingSpec, kiln/shape.h) says which mesh axes split
// each dimension of an array; a NamedSharding joins the two and says which block of an
// array each device of the mesh holds. Devices along a mesh axis the spec does not use
// hold the same block: they are replicas.
//
//   kiln::Mesh mesh({{"data", 2}, {"model", 2}});          // the first 4 devices, row-major
//   kiln::NamedSharding rows(mesh, {{"data"}, {}});        // rows split over "data"
//   rows.block(kiln::Shape{128, 512}, 3);                  // device 3: rows [64, 128)
//   std::cout << kiln::visualize_sharding(kiln::Shape{128, 512}, rows);
//
// With KILN_CPU_DEVICES=N a machine has N logical CPU devices to build meshes from.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/array.h"
#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/shape.h"
#include "kiln/tree.h"

namespace kiln {

using PartitionSpec = ShardingSpec;

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  friend bool operator==(const MeshAxis&, const MeshAxis&) = default;
};

class Mesh {
 public:
  // The first (product of the sizes) devices of kiln::devices(), in id order, laid out
  // row-major over the axes: the last axis varies fastest, as jax.make_mesh does.
  explicit Mesh(std::vector<MeshAxis> axes, CallSite site = {});
  // These devices (each once), row-major over the axes.
  Mesh(std::vector<MeshAxis> axes, std::vector<Device*> devices, CallSite site = {});

  const std::vector<MeshAxis>& axes() const { return axes_; }
  std::span<Device* const> devices() const { return devices_; }
  int64_t size() const { return static_cast<int64_t>(devices_.size()); }
  // The axis called `name`, or nullopt.
  std::optional<size_t> find_axis(std::string_view name) const;
  // The size of axis `name`; an error naming the mesh's axes when it has none of that name.
  int64_t axis_size(std::string_view name, CallSite site = {}) const;
  // The position of mesh device `index` (0 <= index < size()) along each axis.
  Dims coordinates(int64_t index) const;
  // "Mesh{data: 2, model: 2}"
  std::string to_string() const;
  // "data, model": the axes' names, for messages.
  std::string axis_names() const;

  friend bool operator==(const Mesh&, const Mesh&) = default;

 private:
  std::vector<MeshAxis> axes_;
  std::vector<Device*> devices_;
};

// One device's part of an array: elements [start, limit) along each dimension.
struct ShardBlock {
  Dims start;
  Dims limit;
  Shape shape() const;
  friend bool operator==(const ShardBlock&, const ShardBlock&) = default;
};

class NamedSharding {
 public:
  // `spec` may name only axes of `mesh`, each at most once.
  NamedSharding(Mesh mesh, PartitionSpec spec, CallSite site = {});

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }

  // Refuses a shape this sharding cannot split: a spec with more entries than the shape
  // has dimensions, or a dimension that its axes' sizes do not divide. `what` names the
  // array in the message ("params/dense/kernel").
  void check_shape(const Shape& shape, std::string_view what = "the array",
                   CallSite site = {}) const;
  // The spec with one entry per dimension of `shape` (missing trailing entries: not split),
  // which is what a sharded type carries (f32[128,512]{data,_}).
  PartitionSpec spec_for(const Shape& shape, CallSite site = {}) const;
  // How many parts dimension `dim` is split into (the product of its axes' sizes).
  int64_t parts(int64_t dim) const;
  // The shape of every device's block.
  Shape shard_shape(const Shape& shape, CallSite site = {}) const;
  // The block mesh device `index` holds.
  ShardBlock block(const Shape& shape, int64_t index, CallSite site = {}) const;
  // How many devices hold each block (the product of the sizes of the axes not used).
  int64_t replicas() const;
  // "NamedSharding(Mesh{data: 2, model: 2}, {data,_})"
  std::string to_string() const;

  friend bool operator==(const NamedSharding&, const NamedSharding&) = default;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

// `x` split over the devices of `sharding`'s mesh: each device gets a committed copy of
// its block (replicas each get their own). The result's type carries the spec
// (f32[128,512]{data,_}); to_host, to_string and placement() see the whole array; eager ops
// take arrays on one device and refuse it by name until sharded computation lands
// (docs/sharding.md). A sharded `x` is gathered first. Asynchronous, like device_put.
Array device_put(const Array& x, const NamedSharding& sharding, CallSite site = {});

// The sharding `x` was placed with, or nullopt for an array on one device.
std::optional<NamedSharding> sharding_of(const Array& x);

// Each mesh device's block of a sharded `x`, in mesh order (replicas included); for an
// array on one device, the array itself.
std::vector<Array> shards(const Array& x, CallSite site = {});

// Which device holds which block of an array of `shape`, as text: for one or two
// dimensions a grid of the blocks (when it fits in 80 columns) with the devices
// holding each, as jax.debug.visualize_array_sharding does; otherwise a list of blocks.
std::string visualize_sharding(const Shape& shape, const NamedSharding& sharding,
                               CallSite site = {});
// The same for a sharded array; an array on one device is drawn as one block.
std::string visualize_sharding(const Array& x, CallSite site = {});

// ----- shard_map and collectives (docs/sharding.md, *shard_map*) -------------------------

// A function of flat lists of arrays, what shard_map maps over the devices.
using SpmdFunction = std::function<std::vector<Array>(const std::vector<Array>&)>;

// jax.shard_map: the returned function splits argument i by in_specs[i] over `mesh`, runs
// `f` on every device with that device's blocks (f sees the block shapes, and may call the
// collectives below over the mesh's axes), and assembles result j from the devices' results
// by out_specs[j]: sharded arrays whose types carry those specs. A result whose spec does not
// split it over some mesh axis must be the same on every device along that axis (a psum or
// pmean over it makes it so); shard_map checks this when it traces f. It composes with
// grad, vmap and jit. Collectives inside scan, cond or while_loop in f are not supported yet.
SpmdFunction shard_map(SpmdFunction f, Mesh mesh, std::vector<PartitionSpec> in_specs,
                       std::vector<PartitionSpec> out_specs, CallSite site = {});

// shard_map's specs for Trees, as jax.shard_map takes a pytree prefix of its arguments: a
// spec at a node applies to every leaf below it, so one PartitionSpec covers a whole tree
// (PartitionSpec() for a tree every device holds whole) and a dict or list of specs follows
// the tree's own.
//
//   SpecTree::dict({{"params", PartitionSpec()},                // params replicated
//                   {"batch", PartitionSpec({{"data"}})}});     // batch rows split
class SpecTree {
 public:
  SpecTree(PartitionSpec spec);  // NOLINT: implicit, so that a spec nests directly
  static SpecTree dict(std::vector<std::pair<std::string, SpecTree>> items);
  static SpecTree list(std::vector<SpecTree> items);
  // One spec per leaf of `like`, in its leaves' order (a layout computed leaf by leaf).
  static SpecTree of_leaves(const Tree& like, std::span<const PartitionSpec> leaf_specs,
                            CallSite site = {});

  // The spec of each leaf of `tree`, in its leaves' order. Where the two disagree (a dict
  // of other keys, a list of another length, a dict or list where the tree has a leaf) a
  // kiln::Error names the path and both sides; `what` says which tree it is.
  std::vector<PartitionSpec> leaf_specs(const Tree& tree, std::string_view what,
                                        CallSite site = {}) const;

 private:
  struct Node;
  explicit SpecTree(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  std::shared_ptr<const Node> node_;
};

// A function of one Tree to one Tree, what shard_map over trees maps over the devices.
using TreeSpmdFunction = std::function<Tree(const Tree&)>;

// shard_map over trees: as above, with the argument's leaves split by `in_specs` and the
// result's assembled by `out_specs`, each a SpecTree matching the argument's or the
// result's structure (the result's is known once f is traced).
TreeSpmdFunction shard_map(TreeSpmdFunction f, Mesh mesh, SpecTree in_specs, SpecTree out_specs,
                           CallSite site = {});

// The mesh axes a collective runs over: "data", or {"data", "model"} (the first the major
// digit of a device's index in the group).
struct AxisNames {
  AxisNames(const char* name) : names{name} {}             // NOLINT: implicit
  AxisNames(std::string name) : names{std::move(name)} {}  // NOLINT: implicit
  AxisNames(std::initializer_list<std::string> list) : names(list) {}
  std::vector<std::string> names;
};

// Inside shard_map's f. Every reduction adds (or compares) the group's values in the
// order of their index along the axes, whatever devices hold them.
// The sum over the devices along `axes` (lax.psum); every device gets it.
Array psum(const Array& x, const AxisNames& axes, CallSite site = {});
// The mean (lax.pmean), of floating-point arrays.
Array pmean(const Array& x, const AxisNames& axes, CallSite site = {});
// The maximum (lax.pmax).
Array pmax(const Array& x, const AxisNames& axes, CallSite site = {});
// Every device's x, stacked on a new axis `axis` (tiled: concatenated along `axis`).
Array all_gather(const Array& x, const AxisNames& axes, int64_t axis = 0, bool tiled = false,
                 CallSite site = {});
// psum, of which device i keeps part i along `dimension` (tiled: a block of size / n;
// otherwise entry i, the dimension removed): a reduce-scatter.
Array psum_scatter(const Array& x, const AxisNames& axes, int64_t dimension = 0, bool tiled = false,
                   CallSite site = {});
// Block j of x along split_axis goes to device j, which concatenates the blocks it
// receives along concat_axis in device order (lax.all_to_all with tiled=True).
Array all_to_all(const Array& x, const AxisNames& axes, int64_t split_axis, int64_t concat_axis,
                 CallSite site = {});
// Device `source` sends x to device `destination`, for each pair (indices along the axes;
// over several axes, numbered in the mesh's order of them whatever order `axes` names
// them in, as lax.ppermute does); a device no pair sends to gets zeros (lax.ppermute).
Array ppermute(const Array& x, const AxisNames& axes,
               const std::vector<std::pair<int64_t, int64_t>>& permutation, CallSite site = {});
// This device's index along `axes`, an i32 scalar (lax.axis_index).
Array axis_index(const AxisNames& axes, CallSite site = {});
// The number of devices along `axes`, their sizes multiplied (lax.axis_size): a plain
// integer, known while f is traced. Outside f, or for an axis the mesh lacks, an error.
int64_t axis_size(const AxisNames& axes, CallSite site = {});
// Whether a function is being mapped over a mesh with axis `name` here: for code that
// splits itself over an axis when there is one and is ordinary elsewhere (nn::Dense with
// DenseOptions::parallel).
bool axis_is_bound(std::string_view name);

// ----- how collectives run (docs/sharding.md, *Collective algorithms*) ----------------------

// reference: through the group's first device (the plain meaning, for checking); tree: up and
// down a pairwise tree (log2 n steps); ring: reduce-scatter, then a ring all-gather (2 (n-1)/n
// of the bytes per device). kAuto, the default, takes the tree for all-reduces (between
// the logical devices of one process it is the faster at every size, docs/performance.md)
// and the ring for the others. Every algorithm combines values in the
// same order, so the choice changes time and traffic, never the bits. KILN_COLLECTIVES=
// auto|ref|tree|ring sets the initial choice.
enum class CollectiveAlgorithm { kAuto, kReference, kTree, kRing };
void set_collective_algorithm(CollectiveAlgorithm algorithm);
CollectiveAlgorithm collective_algorithm();

// What the collectives moved in and out of one logical device since the process started
// (or reset_collective_traffic): bytes and transfers.
struct DeviceTraffic {
  int device = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t sends = 0;
  int64_t receives = 0;
};
// One entry per device of the process, in id order.
std::vector<DeviceTraffic> collective_traffic();
void reset_collective_traffic();

}  // namespace kiln
