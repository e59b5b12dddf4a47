// The ids of the layout and data-movement primitives (prims/ids/shape.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::shape {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/shape.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::shape

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kShape, prim_rows::shape::id);
#include "prims/ids/shape.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
