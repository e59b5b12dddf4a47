// The text forms shard_map's and the collectives' params hold, so that programs print,
// parse and hash them as any other params: a mesh "data=2,model=2", axis lists
// "data,model", and sharding specs "{data,_} {(data,model)} {}" (one per operand).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/shape.h"

namespace kiln::spmd {

struct AxisText {
  std::string name;
  int64_t size = 1;
};

// "data=2,model=2" -> {{data, 2}, {model, 2}}; an error naming `text` when malformed.
std::vector<AxisText> parse_mesh(std::string_view text);
std::string format_mesh(const std::vector<AxisText>& axes);

// "data,model" -> {data, model}; "" -> {}.
std::vector<std::string> split_axes(std::string_view text);
std::string join_axes(const std::vector<std::string>& axes);

// "{data,_} {}" -> two specs (every one `sharded`); "" -> none.
std::vector<ShardingSpec> parse_specs(std::string_view text);
std::string format_specs(const std::vector<ShardingSpec>& specs);

// `spec` with one entry per dimension of an array of `rank` (a spec may leave trailing
// whole dimensions out), marked sharded.
ShardingSpec full_rank(ShardingSpec spec, int64_t rank);

// The product of the sizes of `spec`'s axes on dimension `dim` (1 past its entries).
int64_t parts(const std::vector<AxisText>& mesh, const ShardingSpec& spec, size_t dim);
// The shape of one block of an array of `shape` split by `spec` (whose axes divide it).
Shape block_shape(const std::vector<AxisText>& mesh, const Shape& shape, const ShardingSpec& spec);

}  // namespace kiln::spmd
