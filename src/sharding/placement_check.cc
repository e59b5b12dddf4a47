// kiln devices --check (placement_check.h).
#include "sharding/placement_check.h"

#include <cstring>

#include <fmt/format.h>

#include "kiln/ops.h"
#include "kiln/sharding.h"

namespace kiln::sharding {
namespace {

bool same_bits(const HostArray& a, const HostArray& b) {
  return a.aval.shape == b.aval.shape && a.aval.dtype == b.aval.dtype &&
         a.bytes.size() == b.bytes.size() &&
         (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
}

PlacementCheck check(const Mesh& mesh, const PartitionSpec& spec) {
  PlacementCheck row;
  NamedSharding sharding(mesh, spec);
  // Rows and columns that every split of this mesh divides; distinct values everywhere.
  Shape shape{4 * mesh.size(), 2 * mesh.size() + 2};
  if (spec.dims.size() > 1 && !spec.dims[1].empty()) shape[1] = 2 * mesh.size();
  row.mesh = mesh.to_string();
  row.spec = sharding.spec_for(shape).to_string();
  row.shape = shape.to_string();
  row.devices = mesh.size();
  auto problem = [&](std::string text) { row.problems.push_back(std::move(text)); };

  Array x = astype(iota(shape, DType::i32, 0) * 7 + iota(shape, DType::i32, 1), DType::f32) * 0.25;
  Array y = device_put(x, sharding);
  Placement where = placement(y);
  std::vector<Array> blocks = shards(y);
  if (static_cast<int64_t>(where.pieces.size()) != mesh.size() ||
      static_cast<int64_t>(blocks.size()) != mesh.size()) {
    problem(fmt::format("{} pieces for {} devices", where.pieces.size(), mesh.size()));
    return row;
  }
  Array expected_result = x * 3.0f + 1.0f;
  for (int64_t i = 0; i < mesh.size(); ++i) {
    Device* device = mesh.devices()[static_cast<size_t>(i)];
    ShardBlock block = sharding.block(shape, i);
    const PlacementPiece& piece = where.pieces[static_cast<size_t>(i)];
    if (piece.device != device || piece.start != block.start || piece.limit != block.limit) {
      problem(fmt::format("mesh position {}: the block is on {} at {}, expected {} at {}", i,
                          piece.device->to_string(), dims_to_string(piece.start),
                          device->to_string(), dims_to_string(block.start)));
    }
    Array part = blocks[static_cast<size_t>(i)];
    Array want = slice(x, block.start, block.limit);
    if (!same_bits(part.to_host(), want.to_host())) {
      problem(fmt::format("{}: its block's values differ from the array's", device->to_string()));
    }
    Array computed = part * 3.0f + 1.0f;
    if (&computed.device() != device) {
      problem(fmt::format("an op on {}'s block ran on {}", device->to_string(),
                          computed.device().to_string()));
    }
    if (!same_bits(computed.to_host(),
                   slice(expected_result, block.start, block.limit).to_host())) {
      problem(fmt::format("{}: x * 3 + 1 on its block differs from the unsharded result",
                          device->to_string()));
    }
  }
  if (!same_bits(device_put(y, device(0)).to_host(), x.to_host())) {
    problem("gathering the blocks does not give the array back");
  }
  return row;
}

}  // namespace

std::vector<PlacementCheck> check_placement() {
  const int64_t count = static_cast<int64_t>(devices().size());
  std::vector<PlacementCheck> rows;
  Mesh line({{"data", count}});
  for (const PartitionSpec& spec :
       {PartitionSpec{}, PartitionSpec{{"data"}}, PartitionSpec{{}, {"data"}}}) {
    rows.push_back(check(line, spec));
  }
  if (count >= 4 && count % 2 == 0) {
    Mesh grid({{"data", 2}, {"model", count / 2}});
    for (const PartitionSpec& spec :
         {PartitionSpec{{"data"}}, PartitionSpec{{"data"}, {"model"}},
          PartitionSpec{{"model"}, {"data"}}, PartitionSpec{{"data", "model"}}}) {
      rows.push_back(check(grid, spec));
    }
  }
  return rows;
}

}  // namespace kiln::sharding
