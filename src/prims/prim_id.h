// A primitive's id: its family and its row in that family's list (prims/ids/<family>.def).
// The named ids (prim::add, prim::dot_general, ...) are declared family by family in
// prims/ids/<family>.h, and a file includes the families it names: a new row recompiles
// the users of its family and the registry, not every file that handles primitives.
#pragma once

#include <cstdint>

namespace kiln {

// The families, in the order of prims/ids/all.def.
enum class Family : uint8_t {
  kUnary,
  kBinary,
  kSelect,
  kConvert,
  kShape,
  kIndex,
  kReduce,
  kContract,
  kWindow,
  kRandom,
  kSort,
  kCustom,
  kControlFlow,
  kSpmd  // collectives and shard_map: they need a mesh (src/sharding/)
};
inline constexpr int kNumFamilies = static_cast<int>(Family::kSpmd) + 1;

// The family in the high byte, the row in the low one. Only the registry maps ids to dense
// table positions; nothing stores an id outside a running process (programs are saved as
// text, by name), so the numbering may change with any row.
enum class PrimId : uint16_t {};
inline constexpr int kMaxRowsPerFamily = 256;

constexpr PrimId prim_id(Family family, uint16_t row) {
  return static_cast<PrimId>((static_cast<uint16_t>(family) << 8) | row);
}
constexpr Family family_of(PrimId id) {
  return static_cast<Family>(static_cast<uint16_t>(id) >> 8);
}
constexpr uint16_t row_of(PrimId id) {
  return static_cast<uint16_t>(id) & 0xff;
}

}  // namespace kiln
