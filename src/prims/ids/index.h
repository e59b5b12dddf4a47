// The ids of the indexing primitives (prims/ids/index.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::index {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/index.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::index

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kIndex, prim_rows::index::id);
#include "prims/ids/index.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
