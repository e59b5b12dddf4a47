// device_put by a NamedSharding, and reading a sharded array's sharding and shards
// (kiln/sharding.h). The blocks are slices of the whole array, each copied to its device.
#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/sharding.h"
#include "runtime/sharded_array.h"
#include "sharding/sharded_blocks.h"

namespace kiln {
namespace {

// The runtime's sharded array with the sharding that made it.
class NamedShardedArray final : public ShardedArray {
 public:
  NamedShardedArray(AbstractValue aval, std::vector<Shard> shards, NamedSharding sharding)
      : ShardedArray(std::move(aval), std::move(shards)), sharding_(std::move(sharding)) {}
  const NamedSharding& sharding() const { return sharding_; }

 private:
  NamedSharding sharding_;
};

}  // namespace

Array device_put(const Array& x, const NamedSharding& sharding, CallSite site) {
  Array whole = as_sharded(x) != nullptr ? device_put(x, device(0, site), site) : x;
  sharding.check_shape(whole.shape(), "device_put's array", site);
  AbstractValue aval = whole.aval();
  aval.sharding = sharding.spec_for(whole.shape(), site);
  std::vector<ShardedArray::Shard> pieces;
  for (int64_t i = 0; i < sharding.mesh().size(); ++i) {
    ShardBlock block = sharding.block(whole.shape(), i, site);
    Dims strides(block.start.size(), 1);
    Array part = block.start.empty() ? whole : slice(whole, block.start, block.limit, strides);
    pieces.push_back({device_put(part, *sharding.mesh().devices()[static_cast<size_t>(i)], site),
                      block.start, block.limit});
  }
  return Array(std::make_shared<NamedShardedArray>(std::move(aval), std::move(pieces), sharding));
}

Array assemble_sharded(AbstractValue aval, std::vector<Array> blocks, const NamedSharding& sharding,
                       CallSite site) {
  aval.sharding = sharding.spec_for(aval.shape, site);
  std::vector<ShardedArray::Shard> pieces;
  for (int64_t i = 0; i < sharding.mesh().size(); ++i) {
    ShardBlock block = sharding.block(aval.shape, i, site);
    Device& target = *sharding.mesh().devices()[static_cast<size_t>(i)];
    pieces.push_back(
        {device_put(blocks[static_cast<size_t>(i)], target, site), block.start, block.limit});
  }
  return Array(std::make_shared<NamedShardedArray>(std::move(aval), std::move(pieces), sharding));
}

std::optional<NamedSharding> sharding_of(const Array& x) {
  const auto* named = dynamic_cast<const NamedShardedArray*>(x.impl());
  if (named == nullptr) return std::nullopt;
  return named->sharding();
}

std::vector<Array> shards(const Array& x, CallSite site) {
  const ShardedArray* sharded = as_sharded(x);
  if (sharded == nullptr) {
    x.block_until_ready(site);  // a clear error for an empty or traced array
    return {x};
  }
  std::vector<Array> out;
  for (const ShardedArray::Shard& shard : sharded->shards()) out.push_back(shard.array);
  return out;
}

std::string visualize_sharding(const Array& x, CallSite site) {
  if (std::optional<NamedSharding> sharding = sharding_of(x)) {
    return visualize_sharding(x.shape(), *sharding, site);
  }
  Mesh one({{"device", 1}}, {&x.device(site)}, site);
  return visualize_sharding(x.shape(), NamedSharding(one, {}), site);
}

}  // namespace kiln
