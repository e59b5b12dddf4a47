// visualize_sharding (kiln/sharding.h): the blocks of an array and the devices holding each.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "kiln/sharding.h"

namespace kiln {
namespace {

constexpr size_t kMaxWidth = 80;

// Each block's devices, by the block's index along the first two dimensions.
using Holders = std::map<std::pair<int64_t, int64_t>, std::vector<std::string>>;

std::string ranges(const ShardBlock& block) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < block.start.size(); ++i) {
    parts.push_back(fmt::format("{}:{}", block.start[i], block.limit[i]));
  }
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string grid(const Holders& holders, int64_t rows, int64_t columns) {
  size_t width = 0;
  for (const auto& [where, devices] : holders) {
    width = std::max(width, fmt::format("{}", fmt::join(devices, " ")).size());
  }
  width += 2;
  std::string line = "+";
  for (int64_t c = 0; c < columns; ++c) line += std::string(width, '-') + "+";
  std::string out = line + "\n";
  for (int64_t r = 0; r < rows; ++r) {
    out += "|";
    for (int64_t c = 0; c < columns; ++c) {
      std::string label = fmt::format("{}", fmt::join(holders.at({r, c}), " "));
      size_t left = (width - label.size()) / 2;
      out += std::string(left, ' ') + label + std::string(width - left - label.size(), ' ') + "|";
    }
    out += "\n" + line + "\n";
  }
  return out;
}

}  // namespace

std::string visualize_sharding(const Shape& shape, const NamedSharding& sharding, CallSite site) {
  Shape piece = sharding.shard_shape(shape, site);
  const Mesh& mesh = sharding.mesh();
  std::string out = fmt::format(
      "{} over {} as {}: blocks of {}, each on {} device(s)\n", shape.to_string(), mesh.to_string(),
      sharding.spec_for(shape, site).to_string(), piece.to_string(), sharding.replicas());
  // A vector is one row of blocks, as JAX draws it; a matrix has its rows down.
  int64_t rows = shape.rank() == 2 ? sharding.parts(0) : 1;
  int64_t columns = shape.rank() == 2 ? sharding.parts(1) : sharding.parts(0);
  Holders holders;
  std::vector<std::pair<std::string, std::string>> listed;
  for (int64_t index = 0; index < mesh.size(); ++index) {
    ShardBlock block = sharding.block(shape, index, site);
    int64_t row = shape.rank() == 2 && piece[0] > 0 ? block.start[0] / piece[0] : 0;
    int64_t column = 0;
    if (shape.rank() == 1 && piece[0] > 0) column = block.start[0] / piece[0];
    if (shape.rank() == 2 && piece[1] > 0) column = block.start[1] / piece[1];
    holders[{row, column}].push_back(mesh.devices()[static_cast<size_t>(index)]->to_string());
    listed.emplace_back(mesh.devices()[static_cast<size_t>(index)]->to_string(), ranges(block));
  }
  bool drawable = shape.rank() >= 1 && shape.rank() <= 2 &&
                  static_cast<int64_t>(holders.size()) == rows * columns;
  if (drawable) {
    std::string drawn = grid(holders, rows, columns);
    if (drawn.find('\n') <= kMaxWidth) return out + drawn;
  }
  for (const auto& [device, block] : listed) out += fmt::format("  {:<8} {}\n", device, block);
  return out;
}

}  // namespace kiln
