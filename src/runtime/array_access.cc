// Array methods that touch the runtime: waiting, reading values back, placement, and
// moving arrays between devices and the host.
#include <algorithm>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "base/trace_events.h"
#include "kiln/device.h"
#include "kiln/ops.h"
#include "runtime/device_array.h"
#include "runtime/sharded_array.h"
#include "transforms/transform_value.h"

namespace kiln {

TargetDevice target_of(std::span<const Array> arrays, CallSite site, std::string_view what) {
  TargetDevice placement;
  std::optional<size_t> first_committed;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const DeviceArray& array = concrete(arrays[i], site, what);
    if (placement.device == nullptr) placement.device = array.device();
    if (!array.committed()) continue;
    if (!first_committed) {
      first_committed = i;
      placement.device = array.device();
      placement.committed = true;
    } else if (!placement.conflict && array.device() != placement.device) {
      placement.conflict = std::pair{*first_committed, i};
    }
  }
  if (placement.device == nullptr) placement.device = &cpu_device(default_device());
  return placement;
}

const DeviceArray& concrete(const Array& array, CallSite site, std::string_view what) {
  if (!array.defined()) {
    fail(site, fmt::format("{}: the Array is empty (default-constructed)", what),
         "initialise the Array from an op or from_host before using it");
  }
  const auto* device_array = dynamic_cast<const DeviceArray*>(array.impl());
  // Every operand of every eager op comes through here: the other kinds of array are
  // looked for only once it is known not to be a device array.
  if (device_array == nullptr) {
    if (const ShardedArray* sharded = as_sharded(array)) {
      fail(site,
           fmt::format("{}: {} is sharded over {} devices; this takes an array on one device", what,
                       array.aval().to_string(), sharded->shards().size()),
           "kiln::device_put(x, kiln::device(0)) gathers it onto one device; kiln::shards(x) "
           "gives each device's block (docs/sharding.md)");
    }
    if (const auto* traced = dynamic_cast<const TransformValue*>(array.impl());
        traced != nullptr && traced->owner() == nullptr) {
      fail_escaped_value(array.aval(), site);
    }
    fail(site,
         fmt::format("{}: {} is a traced value, not a concrete array", what,
                     array.aval().to_string()),
         "values inside a transformed function cannot be read or moved; return them from the "
         "function instead");
  }
  if (device_array->deleted()) {
    fail(site,
         fmt::format("{}: this {} was donated to a jit call, which reused its buffer", what,
                     array.aval().to_string()),
         "a donated argument is consumed by the call; use the call's result instead, or do not "
         "donate it (JitOptions::donate_argnums)");
  }
  return *device_array;
}

void wait_ready(const DeviceArray& array, CallSite site) {
  (void)site;
  array.ready()->wait();
  if (const auto& error = array.ready()->error()) throw Error(*error);
}

void Array::fail_undefined() {
  fail(kUnknownSite, "the Array is empty (default-constructed): it has no shape, dtype or value",
       "initialise the Array from an op or from_host before asking for its type; "
       "Array::defined() says whether it holds one");
}

int64_t Array::dim(int64_t axis) const {
  int64_t r = rank();
  if (axis < -r || axis >= r) {
    fail(kUnknownSite, fmt::format("axis {} is out of range for {}", axis, aval().to_string()));
  }
  return shape()[axis < 0 ? axis + r : axis];
}

Device& Array::device(CallSite site) const {
  return *concrete(*this, site, "device").device();
}

const Array& Array::block_until_ready(CallSite site) const {
  if (const ShardedArray* sharded = as_sharded(*this)) {
    for (const ShardedArray::Shard& shard : sharded->shards()) shard.array.block_until_ready(site);
    return *this;
  }
  wait_ready(concrete(*this, site, "block_until_ready"), site);
  return *this;
}

namespace {

// The global array's bytes, each block copied from the first shard that holds it (its
// replicas hold the same values).
HostArray assemble(const ShardedArray& sharded, CallSite site) {
  const AbstractValue& aval = sharded.aval();
  HostArray host{aval, std::vector<std::byte>(static_cast<size_t>(aval.size_bytes()))};
  const int64_t item = dtype_size(aval.dtype);
  const Dims strides = aval.shape.strides();
  std::vector<Dims> copied;
  for (const ShardedArray::Shard& shard : sharded.shards()) {
    if (std::find(copied.begin(), copied.end(), shard.start) != copied.end()) continue;
    copied.push_back(shard.start);
    HostArray block = shard.array.to_host(site);
    const Shape block_shape = block.aval.shape;
    const int64_t rank = block_shape.rank();
    if (block_shape.num_elements() == 0) continue;
    // Copy row by row: the last axis of a block is contiguous in both.
    const int64_t row = rank == 0 ? 1 : block_shape[rank - 1];
    const int64_t rows = block_shape.num_elements() / row;
    Dims index(static_cast<size_t>(rank), 0);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t offset = 0;
      for (int64_t axis = 0; axis < rank; ++axis) {
        offset += (shard.start[static_cast<size_t>(axis)] + index[static_cast<size_t>(axis)]) *
                  strides[static_cast<size_t>(axis)];
      }
      std::memcpy(host.bytes.data() + offset * item, block.bytes.data() + r * row * item,
                  static_cast<size_t>(row * item));
      for (int64_t axis = rank - 2; axis >= 0; --axis) {
        if (++index[static_cast<size_t>(axis)] < block_shape[axis]) break;
        index[static_cast<size_t>(axis)] = 0;
      }
    }
  }
  return host;
}

}  // namespace

Array gathered_for_eager(const ShardedArray& sharded, CallSite site) {
  const AbstractValue& global = sharded.aval();
  AbstractValue whole(global.shape, global.dtype, global.weak_type);
  const ShardedArray::Shard& first = sharded.shards().front();
  const DeviceArray& first_block = concrete(first.array, site, "gather");
  if (first.limit == global.shape.dims()) {  // every device holds the whole array
    return Array(std::make_shared<DeviceArray>(std::move(whole), first_block.device(),
                                               first_block.buffer(), first_block.ready(),
                                               /*committed=*/false));
  }
  HostArray host = assemble(sharded, site);
  Array gathered = from_host_bytes(host.bytes.data(), whole, first_block.device(), site);
  const auto& array = static_cast<const DeviceArray&>(*gathered.impl());
  return Array(std::make_shared<DeviceArray>(std::move(whole), array.device(), array.buffer(),
                                             array.ready(), /*committed=*/false));
}

HostArray Array::to_host(CallSite site) const {
  if (const ShardedArray* sharded = as_sharded(*this)) return assemble(*sharded, site);
  const DeviceArray& array = concrete(*this, site, "to_host");
  trace::Span span("sync", "host sync");
  span.arg("bytes", static_cast<double>(size_bytes()));
  wait_ready(array, site);
  HostArray host{aval(), std::vector<std::byte>(static_cast<size_t>(size_bytes()))};
  if (!host.bytes.empty())
    std::memcpy(host.bytes.data(), array.buffer()->data(), host.bytes.size());
  count_host_sync(size_bytes());
  return host;
}

HostArray Array::item_host(CallSite site) const {
  if (size() != 1) {
    fail(site,
         fmt::format("item: {} has {} elements, item() needs exactly one", aval().to_string(),
                     size()),
         "reduce the array first (e.g. x.sum()) or index one element");
  }
  return to_host(site);
}

void Array::check_storage_type(DType requested, CallSite site) const {
  if (requested != dtype()) {
    fail(site,
         fmt::format("to_vector: the array is {}, but its values were requested as {}",
                     aval().to_string(), dtype_name(requested)),
         fmt::format("convert first: x.astype(kiln::DType::{}).to_vector<...>()",
                     dtype_name(requested)));
  }
}

Array from_host_bytes(const void* data, AbstractValue aval, Device* target, CallSite site) {
  for (int64_t dim : aval.shape.dims()) {
    if (dim < 0) {
      fail(site,
           fmt::format("from_host: shape {} has a negative dimension", aval.shape.to_string()));
    }
  }
  CpuDevice& device = cpu_device(target ? *target : default_device());
  auto buffer = device.allocator().allocate(static_cast<size_t>(aval.size_bytes()));
  if (aval.size_bytes() > 0) {
    std::memcpy(buffer->data(), data, static_cast<size_t>(aval.size_bytes()));
  }
  count_host_to_device(aval.size_bytes());
  return Array(std::make_shared<DeviceArray>(std::move(aval), &device, std::move(buffer),
                                             Completion::done(), /*committed=*/target != nullptr));
}

void detail::check_host_size(size_t count, const Shape& shape, CallSite site) {
  if (static_cast<int64_t>(count) != shape.num_elements()) {
    fail(site, fmt::format("from_host: {} values given for shape {}, which holds {}", count,
                           shape.to_string(), shape.num_elements()));
  }
}

Array copy_to_device(const DeviceArray& source, const Array& handle, CpuDevice& device,
                     bool committed) {
  if (source.device() == &device) {
    if (source.committed() == committed) return handle;
    return Array(std::make_shared<DeviceArray>(source.aval(), &device, source.buffer(),
                                               source.ready(), committed));
  }
  auto bytes = static_cast<size_t>(source.aval().size_bytes());
  auto buffer = device.allocator().allocate(bytes);
  auto completion = std::make_shared<Completion>();
  device.enqueue(
      [from = source.buffer(), from_ready = source.ready(), to = buffer, completion, bytes] {
        from_ready->wait();
        if (from_ready->error()) {
          completion->set_failed(from_ready->error());
          return;
        }
        if (bytes > 0) std::memcpy(to->data(), from->data(), bytes);
        completion->set_done();
      });
  return Array(std::make_shared<DeviceArray>(source.aval(), &device, std::move(buffer), completion,
                                             committed));
}

Array device_put(const Array& x, Device& target, CallSite site) {
  if (as_sharded(x) != nullptr) {
    // Gathered through the host: a sharded array's blocks are on several devices.
    HostArray host = x.to_host(site);
    AbstractValue whole(host.aval.shape, host.aval.dtype, host.aval.weak_type);
    return from_host_bytes(host.bytes.data(), whole, &target, site);
  }
  return copy_to_device(concrete(x, site, "device_put"), x, cpu_device(target), true);
}

Device* device_of(const Array& x) {
  const auto* array = dynamic_cast<const DeviceArray*>(x.impl());
  return array != nullptr && array->committed() ? array->device() : nullptr;
}

Placement placement(const Array& x, CallSite site) {
  if (const ShardedArray* sharded = as_sharded(x)) {
    Placement out{x.aval(), {}, true};
    for (const ShardedArray::Shard& shard : sharded->shards()) {
      out.pieces.push_back(PlacementPiece{&shard.array.device(site), shard.start, shard.limit,
                                          shard.array.size_bytes()});
    }
    return out;
  }
  const DeviceArray& array = concrete(x, site, "placement");
  Dims start(static_cast<size_t>(x.rank()), 0);
  return Placement{x.aval(),
                   {PlacementPiece{array.device(), start, x.shape().dims(), x.size_bytes()}},
                   array.committed()};
}

std::string Placement::to_string() const {
  std::string text =
      fmt::format("{} ({} bytes) on {} device(s), {}", aval.to_string(), aval.size_bytes(),
                  pieces.size(), committed ? "committed" : "uncommitted");
  for (const PlacementPiece& piece : pieces) {
    std::vector<std::string> ranges;
    for (size_t axis = 0; axis < piece.start.size(); ++axis) {
      ranges.push_back(fmt::format("{}:{}", piece.start[axis], piece.limit[axis]));
    }
    text += fmt::format("\n  {:<8} [{}]  {} bytes", piece.device->to_string(),
                        fmt::join(ranges, ", "), piece.bytes);
  }
  return text;
}

std::ostream& operator<<(std::ostream& out, const Placement& placement) {
  return out << placement.to_string();
}

}  // namespace kiln
