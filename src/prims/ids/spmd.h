// The ids of the SPMD primitives (collectives, shard_map) (prims/ids/spmd.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::spmd {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/spmd.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::spmd

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kSpmd, prim_rows::spmd::id);
#include "prims/ids/spmd.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
