// An array split into blocks held by several devices: its global type (whose ShardingSpec
// says how it is split) and, per device, a committed array holding one block. The sharding
// layer makes them (kiln::device_put(x, NamedSharding), kiln/sharding.h) and keeps its
// mesh in a subclass; the runtime reads them through this base: their values (to_host
// assembles the blocks), their placement, and waiting for them. An eager op on a sharded
// array runs on the array gathered onto one device (gathered_for_eager, device_array.h);
// concrete() refuses one by name where a single device's buffer is needed.
#pragma once

#include <vector>

#include "kiln/array.h"

namespace kiln {

class ShardedArray : public ArrayImpl {
 public:
  struct Shard {
    Array array;  // on its device, committed; its shape is limit - start
    Dims start;   // the block's first element in the global array
    Dims limit;   // one past its last element, per axis
  };

  ShardedArray(AbstractValue aval, std::vector<Shard> shards)
      : ArrayImpl(std::move(aval)), shards_(std::move(shards)) {}

  // In mesh order, replicas included: every device of the mesh has one.
  const std::vector<Shard>& shards() const { return shards_; }

 private:
  std::vector<Shard> shards_;
};

// The sharded array behind `array`, or null when it is not one.
inline const ShardedArray* as_sharded(const Array& array) {
  return dynamic_cast<const ShardedArray*>(array.impl());
}

}  // namespace kiln
