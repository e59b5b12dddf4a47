// The ids of elementwise binary primitives (prims/ids/binary.def): prim::<id>.
#pragma once

#include <cstdint>

#include "prims/prim_id.h"

namespace kiln {
namespace prim_rows::binary {
enum Row : uint16_t {
#define KILN_PRIM(id, name, arity, params, flags) id,
#include "prims/ids/binary.def"
#undef KILN_PRIM
};
}  // namespace prim_rows::binary

namespace prim {
#define KILN_PRIM(id, name, arity, params, flags) \
  inline constexpr PrimId id = prim_id(Family::kBinary, prim_rows::binary::id);
#include "prims/ids/binary.def"
#undef KILN_PRIM
}  // namespace prim

}  // namespace kiln
